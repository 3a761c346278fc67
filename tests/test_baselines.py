"""The two baselines every MLM accuracy is shown beside (minibert/corpus/baselines.py):
exact numbers on a toy corpus worked out by hand, and agreement with a brute-force count."""

from collections import Counter

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

from minibert.corpus.baselines import NeighbourCounts, mlm_baselines

PAD, CLS, SEP, MASK = 0, 2, 3, 4
SPECIAL = {PAD, 1, CLS, SEP, MASK}
X = -100  # not a labeled position

# Two documents, back to back: [5 6 7 5 6 8] and [6 7 5].
TOKENS = np.array([5, 6, 7, 5, 6, 8, 6, 7, 5])
STARTS = np.array([0, 6])


def test_tables_count_inside_documents_only_and_break_ties_by_smallest_id():
    counts = NeighbourCounts.fit(TOKENS, STARTS, vocab_size=10, never_guess=SPECIAL)
    assert counts.unigram == 5  # 5 and 6 both occur 3 times: the smaller id wins
    after = dict(zip(*counts.after))
    assert after == {5: 6, 6: 7, 7: 5}  # 6 is followed by 7 twice, by 8 once; 8 -> 6 spans two documents
    assert dict(zip(*counts.before)) == {5: 7, 6: 5, 7: 6, 8: 6}
    both = {(int(k) // 10, int(k) % 10): int(v) for k, v in zip(*counts.both)}
    assert both == {(5, 7): 6, (6, 5): 7, (7, 6): 5, (5, 8): 6}


def test_accuracies_on_a_hand_checked_batch():
    counts = NeighbourCounts.fit(TOKENS, STARTS, vocab_size=10, never_guess=SPECIAL)
    batch = {
        "input_ids": torch.tensor([
            [CLS, 5, MASK, 7, MASK, 9, SEP],
            [CLS, MASK, 6, SEP, PAD, PAD, PAD],
            [CLS, 8, MASK, SEP, PAD, PAD, PAD],
        ]),
        "labels": torch.tensor([
            [X, 5, 6, X, 5, 9, X],  # 5: neighbours CLS/MASK unknown -> unigram 5, right
                                    # 6: between 5 and 7 -> 6, right; 5: (7, 9) unseen -> after 7 = 5, right
                                    # 9: neighbours MASK and SEP unknown -> unigram 5, wrong
            [X, 5, X, X, X, X, X],  # left CLS unknown, before 6 = 5, right
            [X, X, 6, X, X, X, X],  # after 8 was never seen inside a document -> unigram 5, wrong
        ]),
    }
    scores = mlm_baselines(counts, [batch], unknown_ids=SPECIAL)
    assert scores == {"baseline_unigram_accuracy": 3 / 6, "baseline_neighbour_accuracy": 4 / 6}


def brute_force_guess(documents, ids, row, col, unknown):
    """The rule written the slow way: count, then back off both -> left -> right -> unigram."""
    unigram, after, before, both = Counter(), Counter(), Counter(), Counter()
    for doc in documents:
        unigram.update((token,) for token in doc)
        for i in range(len(doc) - 1):
            after[doc[i], doc[i + 1]] += 1
            before[doc[i + 1], doc[i]] += 1
        for i in range(len(doc) - 2):
            both[doc[i], doc[i + 2], doc[i + 1]] += 1

    def best(counter, context):
        options = [(-n, key[-1]) for key, n in counter.items() if key[:-1] == context]
        return min(options)[1] if options else None

    left = ids[row][col - 1] if col > 0 and ids[row][col - 1] not in unknown else None
    right = ids[row][col + 1] if col + 1 < len(ids[row]) and ids[row][col + 1] not in unknown else None
    for known, counter, context in ((left is not None and right is not None, both, (left, right)),
                                    (left is not None, after, (left,)), (right is not None, before, (right,))):
        if known and (guess := best(counter, context)) is not None:
            return guess
    return best(unigram, ())


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_agrees_with_brute_force_counting(data):
    documents = data.draw(st.lists(st.lists(st.integers(5, 9), min_size=1, max_size=12), min_size=1, max_size=5))
    starts = np.cumsum([0] + [len(d) for d in documents[:-1]])
    counts = NeighbourCounts.fit(np.concatenate(documents), starts, vocab_size=10, never_guess=SPECIAL)
    ids = data.draw(st.lists(st.lists(st.sampled_from([5, 6, 7, 8, 9, MASK, SEP]), min_size=3, max_size=8), min_size=1, max_size=3))
    width = max(map(len, ids))
    ids = [row + [PAD] * (width - len(row)) for row in ids]
    positions = torch.tensor([(r, c) for r in range(len(ids)) for c in range(width)])
    guesses = counts.guess(torch.tensor(ids), positions, SPECIAL)
    expected = [brute_force_guess(documents, ids, r, c, SPECIAL) for r, c in positions.tolist()]
    assert guesses.tolist() == expected
