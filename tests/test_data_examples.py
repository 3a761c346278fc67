"""Properties of the example layouts: NSP (BERT), SOP (ALBERT), FULL-SENTENCES (RoBERTa)."""

import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_data_support import FIRST_ID, PositionTokenizer, corpus_shapes, numbered_store

from minibert.data.examples import LAYOUTS, Examples, build_examples

CLS, SEP = 2, 3
OPTIONS = dict(short_seq_prob=0.1, seed=0, specials=(2, 3))


def decoded_examples(shape, layout, max_length, short_seq_prob=0.1, seed=0):
    """Build examples on a numbered corpus; return (examples as (ids, segments, label), document of each id)."""
    with tempfile.TemporaryDirectory() as directory:
        store = numbered_store(shape, directory)
        rows = build_examples(store, layout, max_length=max_length, short_seq_prob=short_seq_prob, seed=seed, specials=(2, 3))
        laid_out = Examples.from_spans(store, rows, PositionTokenizer(), max_length)
        assert (laid_out.sentence_label is None) == (layout == "full_sentences")
        examples = [(laid_out.input_ids[row, :n].astype(np.int64), laid_out.token_type_ids[row, :n],
                     -1 if laid_out.sentence_label is None else int(laid_out.sentence_label[row]))
                    for row, n in enumerate(laid_out.lengths)]
    document_of = np.repeat(np.arange(len(shape)), [sum(lengths) for lengths in shape])
    return examples, lambda ids: set(document_of[np.asarray(ids) - FIRST_ID])


def segments_of(ids, segments):
    a = [int(i) for i, s in zip(ids[1:], segments[1:]) if s == 0 and i != SEP]
    b = [int(i) for i, s in zip(ids, segments) if s == 1 and i != SEP]
    return a, b


@settings(max_examples=40, deadline=None)
@given(corpus_shapes, st.sampled_from(LAYOUTS), st.integers(8, 48), st.sampled_from([0.0, 0.1, 1.0]), st.integers(0, 99))
def test_every_example_fits_and_is_laid_out(shape, layout, max_length, short_seq_prob, seed):
    examples, _ = decoded_examples(shape, layout, max_length, short_seq_prob, seed)
    for ids, segments, label in examples:
        assert len(ids) <= max_length
        assert ids[0] == CLS and ids[-1] == SEP and len(ids) == len(segments)
        if layout == "full_sentences":
            assert label == -1 and not segments.any()
        else:
            assert label in (0, 1)
            a, b = segments_of(ids, segments)
            assert a and b and list(segments) == [0] * (len(a) + 2) + [1] * (len(b) + 1)


@settings(max_examples=40, deadline=None)
@given(corpus_shapes, st.integers(8, 48), st.sampled_from([0.0, 0.1, 1.0]), st.integers(0, 99))
def test_full_sentence_packing_loses_and_duplicates_no_token(shape, max_length, short_seq_prob, seed):
    examples, document = decoded_examples(shape, "full_sentences", max_length, short_seq_prob, seed)
    served = [int(i) for ids, _, _ in examples for i in ids if i not in (CLS, SEP)]
    assert served == list(range(FIRST_ID, FIRST_ID + sum(map(sum, shape))))
    for ids, _, _ in examples:  # a [SEP] inside an example sits exactly between two documents
        for k in np.flatnonzero(ids[1:-1] == SEP) + 1:
            assert ids[k + 1] == ids[k - 1] + 1 and document([ids[k - 1]]) != document([ids[k + 1]])


@settings(max_examples=40, deadline=None)
@given(corpus_shapes, st.integers(8, 48), st.integers(0, 99))
def test_nsp_random_segment_never_comes_from_its_own_document(shape, max_length, seed):
    examples, document = decoded_examples(shape, "nsp", max_length, seed=seed)
    for ids, segments, label in examples:
        a, b = segments_of(ids, segments)
        assert len(document(a)) == 1 and len(document(b)) == 1
        if label == 1:
            assert document(a) != document(b)
        else:  # the true continuation: same document, right after A (unless A was truncated)
            assert document(a) == document(b) and b[0] > a[-1]
            assert b[0] == a[-1] + 1 or len(ids) == max_length
        assert a == list(range(a[0], a[-1] + 1)) and b == list(range(b[0], b[-1] + 1))


@settings(max_examples=40, deadline=None)
@given(corpus_shapes, st.integers(8, 48), st.integers(0, 99))
def test_sop_swapped_pair_is_the_same_two_segments_reversed(shape, max_length, seed):
    examples, document = decoded_examples(shape, "sop", max_length, seed=seed)
    for ids, segments, label in examples:
        a, b = segments_of(ids, segments)
        first, second = (a, b) if label == 0 else (b, a)  # undo the swap
        assert document(first) == document(second) and len(document(first)) == 1
        assert second[0] > first[-1]
        assert second[0] == first[-1] + 1 or len(ids) == max_length  # consecutive unless truncated


def test_sentence_labels_are_balanced_and_seeded():
    shape = [[(d * 7 + s * 3) % 25 + 5 for s in range(20)] for d in range(40)]
    for layout in ("nsp", "sop"):
        examples, _ = decoded_examples(shape, layout, max_length=32)
        labels = np.array([label for _, _, label in examples])
        assert len(labels) > 300 and abs(labels.mean() - 0.5) < 0.06, (layout, labels.mean())
        again, _ = decoded_examples(shape, layout, max_length=32)
        assert all(np.array_equal(x[0], y[0]) for x, y in zip(examples, again))


def test_short_seq_prob_shortens_about_that_share():
    shape = [[30] * 40 for _ in range(20)]
    full, _ = decoded_examples(shape, "full_sentences", 128, short_seq_prob=0.0)
    short, _ = decoded_examples(shape, "full_sentences", 128, short_seq_prob=0.5)
    assert np.mean([len(ids) for ids, _, _ in short]) < np.mean([len(ids) for ids, _, _ in full])


def test_bad_layouts_fail_clearly(tmp_path):
    store = numbered_store([[5, 5]], tmp_path)
    with pytest.raises(ValueError, match="only 1 document"):
        build_examples(store, "nsp", max_length=32, **OPTIONS)
    with pytest.raises(ValueError, match="layout='mlm'"):
        build_examples(store, "mlm", max_length=32, **OPTIONS)
    with pytest.raises(ValueError, match="max_length=4"):
        build_examples(store, "sop", max_length=4, **OPTIONS)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31), copies=st.integers(2, 4))
def test_bert_s_static_copies_are_each_cut_anew_with_balanced_labels(seed, copies):
    """BERT's dupe_factor passes (create_pretraining_data.py:create_training_instances): each copy
    of the corpus draws its own target lengths, cut points and random next segments, so the copies'
    segment pairs differ (most pairs of one copy are in no other), while each copy's NSP labels stay
    balanced (within 6 standard deviations of 0.5). `write_examples(copies=k)`, running
    `dupe_factor_passes`, stores exactly the k copies one after the other, each one's first row recorded
    (the copies' lengths differ), and copy 0 is the examples of a run without copies."""
    from minibert.corpus.stored_examples import write_examples

    shape = [[(d * 7 + s * 3) % 25 + 5 for s in range(20)] for d in range(30)]
    with tempfile.TemporaryDirectory() as directory:
        store = numbered_store(shape, directory)
        options = dict(max_length=32, short_seq_prob=0.1, seed=seed, specials=(2, 3))
        passes = [build_examples(store, "nsp", copy=copy, **options) for copy in range(copies)]
        assert np.array_equal(passes[0], build_examples(store, "nsp", **options))
        pairs = [set(map(tuple, spans[:, :4].tolist())) for spans in passes]
        for copy, spans in enumerate(passes):
            others = set().union(*(pairs[:copy] + pairs[copy + 1:]))
            assert len(pairs[copy] & others) < 0.5 * len(pairs[copy]), copy
            labels = spans[:, 4]
            assert abs(labels.mean() - 0.5) <= 6 * (0.25 / len(labels)) ** 0.5, (copy, labels.mean())
        stored = write_examples(store, PositionTokenizer(), range(len(shape)), {"layout": "nsp", **options},
                                f"{directory}/examples", copies=copies)
        expected = [Examples.from_spans(store, spans, PositionTokenizer(), 32) for spans in passes]
        for name in Examples.FIELDS:
            assert np.array_equal(getattr(stored, name), np.concatenate([getattr(e, name) for e in expected])), name
        assert stored.copy_starts.tolist() == np.cumsum([0] + [len(e) for e in expected[:-1]]).tolist()


def test_examples_cached_before_copy_starts_were_recorded_still_load(tmp_path):
    """An older cache's meta.json has no copy_starts: its examples load as they were, the copies' starts unknown."""
    import json

    from minibert.corpus.stored_examples import load_examples, write_examples

    store = numbered_store([[6, 7, 8]] * 6, tmp_path)
    options = dict(layout="nsp", max_length=16, short_seq_prob=0.1, seed=0, specials=(2, 3))
    stored = write_examples(store, PositionTokenizer(), range(6), options, tmp_path / "examples", copies=2)
    meta = json.loads((tmp_path / "examples" / "meta.json").read_text())
    del meta["copy_starts"]
    (tmp_path / "examples" / "meta.json").write_text(json.dumps(meta))
    old = load_examples(tmp_path / "examples")
    assert old.copy_starts is None and len(stored.copy_starts) == 2
    assert all(np.array_equal(getattr(old, name), getattr(stored, name)) for name in Examples.FIELDS if getattr(old, name) is not None)
