"""Extractive question answering: reading SQuAD files, SQuAD's scores, decoding spans from logits."""

import json
import math

import numpy as np
import pytest
import torch

from minibert.finetune.kinds.squad_scores import exact_match, normalize_answer, squad_scores, token_f1
from minibert.finetune.kinds.span_decoding import decode_spans, write_predictions
from minibert.finetune.kinds.squad import QAExample, is_squad, read_squad, split_articles

CONTEXT = "Denver Broncos won Super Bowl 50."


def squad_json(qas, context=CONTEXT, version="v2.0"):
    return {"version": version, "data": [{"title": "Super_Bowl", "paragraphs": [{"context": context, "qas": qas}]}]}


def qa(id, question="Who won?", answers=(("Denver Broncos", 0),), **more):
    return {"id": id, "question": question, "answers": [{"text": t, "answer_start": s} for t, s in answers], **more}


def write(path, value):
    path.write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return path


# --- reading ------------------------------------------------------------------------------

def test_reads_squad_v1_json(tmp_path):
    path = write(tmp_path / "train.json", squad_json([qa("q1"), qa("q2", "What game?", [("Super Bowl 50", 19), ("Super Bowl", 19)])], version="1.1"))
    data = read_squad(path)
    assert [e.id for e in data] == ["q1", "q2"]
    assert data[1] == QAExample("q2", "Super_Bowl", "What game?", CONTEXT, [("Super Bowl 50", 19), ("Super Bowl", 19)], False, [])
    assert not data.has_impossible and is_squad(path)


def test_reads_squad_v2_impossible_and_plausible(tmp_path):
    impossible = qa("q2", "Who lost?", (), is_impossible=True, plausible_answers=[{"text": "Broncos", "answer_start": 7}])
    data = read_squad(write(tmp_path / "dev.json", squad_json([qa("q1", is_impossible=False), impossible])))
    assert data.has_impossible
    assert (data[1].answers, data[1].is_impossible, data[1].plausible) == ([], True, [("Broncos", 7)])
    assert data[0].is_impossible is False


def test_reads_hugging_face_jsonl(tmp_path):
    rows = [{"id": "a", "title": "T", "context": CONTEXT, "question": "Who won?", "answers": {"text": ["Broncos"], "answer_start": [7]}},
            {"id": "b", "title": "T", "context": CONTEXT, "question": "Who lost?", "answers": {"text": [], "answer_start": []}}]
    path = write(tmp_path / "dev.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    data = read_squad(path)
    assert [(e.id, e.answers, e.is_impossible) for e in data] == [("a", [("Broncos", 7)], False), ("b", [], True)]
    assert data.has_impossible and is_squad(path)


def test_is_squad_refuses_other_files(tmp_path):
    assert not is_squad(write(tmp_path / "sst.jsonl", '{"sentence": "good", "label": 1}\n'))
    assert not is_squad(write(tmp_path / "config.json", '{"hidden_size": 768}'))
    assert not is_squad(tmp_path / "missing.json")


@pytest.mark.parametrize("qas, message", [
    ([qa("q7", answers=[("Broncos", 0)])], "question 'q7': answer 'Broncos' is not at answer_start 0"),
    ([qa("q7", answers=[("Broncos", 99)])], "question 'q7': answer 'Broncos' is not at answer_start 99"),
    ([qa("q7", question="  ")], "question 'q7': the question is empty"),
    ([qa("q7"), qa("q7")], "question id 'q7' occurs twice"),
    ([qa("q7", is_impossible=True)], "question 'q7' is marked is_impossible but has 1 answer"),
    ([qa("q7", answers=())], None),  # no answers, no flag: an impossible question, read as one
    ([qa("q7", answers=(), is_impossible=False)], "question 'q7' has no answers but is_impossible is false"),
    ([{"question": "Who?", "answers": []}], "article 0 paragraph 0 question 0: no \"id\""),
])
def test_bad_questions_are_one_line_errors_naming_file_and_id(tmp_path, qas, message):
    path = write(tmp_path / "bad.json", squad_json(qas))
    if message is None:
        assert read_squad(path)[0].is_impossible
        return
    with pytest.raises(ValueError) as error:
        read_squad(path)
    text = str(error.value)
    assert message in text and str(path) in text and "\n" not in text


def test_question_without_context_names_the_id(tmp_path):
    path = write(tmp_path / "bad.jsonl", json.dumps({"id": "x9", "question": "Who?", "answers": {"text": [], "answer_start": []}}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl: question 'x9' has no context"):
        read_squad(path)


def test_broken_json_names_line_and_column(tmp_path):
    path = write(tmp_path / "broken.json", '{"data": [\n  {"title": "x",, }]}')
    with pytest.raises(ValueError, match=r"broken.json is not valid JSON \(line 2 column 17"):
        read_squad(path)
    path = write(tmp_path / "broken.jsonl", '{"id": "a"\n')
    with pytest.raises(ValueError, match=r"broken.jsonl line 1"):
        read_squad(path)


def test_other_bad_files(tmp_path):
    with pytest.raises(ValueError, match='no "data" list'):
        read_squad(write(tmp_path / "a.json", {"version": "1.1"}))
    with pytest.raises(ValueError, match="holds no questions"):
        read_squad(write(tmp_path / "b.json", {"data": []}))
    bad = {"id": "h1", "context": CONTEXT, "question": "Who?", "answers": {"text": ["Broncos"], "answer_start": []}}
    with pytest.raises(ValueError, match=r"c.jsonl line 1: \"answers\" needs"):
        read_squad(write(tmp_path / "c.jsonl", json.dumps(bad)))
    with pytest.raises(FileNotFoundError):
        read_squad(tmp_path / "none.json")


def test_split_articles_keeps_articles_whole(tmp_path):
    articles = [{"title": f"A{i}", "paragraphs": [{"context": CONTEXT, "qas": [qa(f"{i}-{j}") for j in range(i + 1)]}]} for i in range(3)]
    source = write(tmp_path / "all.json", {"version": "1.1", "data": articles})
    assert split_articles(source, 2, tmp_path / "a.json", tmp_path / "b.json") == (3, 3)
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json"))
    assert a == {"version": "1.1", "data": articles[:2]} and b == {"version": "1.1", "data": articles[2:]}
    with pytest.raises(ValueError, match="has 3 articles"):
        split_articles(source, 3, tmp_path / "a.json", tmp_path / "b.json")


def test_reads_the_real_dev_set(datasets_dir):
    path = datasets_dir / "squad" / "dev-v1.1.json"
    if not path.is_file():
        pytest.skip("no SQuAD dev file")
    data = read_squad(path)
    assert len(data) == 10570 and not data.has_impossible and is_squad(path)


# --- scores -------------------------------------------------------------------------------

def test_normalize_answer_by_the_official_rules():
    assert normalize_answer("The  Big, cat!") == "big cat"
    assert normalize_answer("an apple") == "apple"
    assert normalize_answer("theater Anthem") == "theater anthem"  # articles only as whole words
    assert normalize_answer("U.S.-made") == "usmade"  # punctuation removed, not replaced by a space
    assert normalize_answer("the") == ""


def test_exact_and_f1_hand_worked():
    assert exact_match("The Denver Broncos.", "denver broncos") == 1.0
    # "big cat sat" vs "cat sat down": 2 shared tokens, precision 2/3, recall 2/3
    assert token_f1("the big cat sat", "a cat sat down") == pytest.approx(2 / 3)
    assert token_f1("cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)  # shared tokens counted with multiplicity
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("", "cat") == 0.0 and token_f1("the", "") == 1.0  # empty: F1 is EM


def examples_v2():
    return [QAExample("q1", "", "Who won?", CONTEXT, [("Denver Broncos", 0)]),
            QAExample("q2", "", "What?", "a cat sat down", [("a cat sat down", 0), ("cat", 2)]),
            QAExample("q3", "", "Who lost?", CONTEXT, [], True),
            QAExample("q4", "", "Where?", CONTEXT, [], True)]


def test_squad_scores_hand_worked_v2():
    predictions = {"q1": "the Denver Broncos", "q2": "the big cat sat", "q3": "", "q4": "Paris"}
    report = squad_scores(examples_v2(), predictions, {"q1": -5.0, "q2": -1.0, "q3": 2.0, "q4": 3.0})
    # q1: EM 1 F1 1; q2: EM 0, F1 max(2/3, 1/2); q3: "" on an impossible question, 1 1; q4: text on one, 0 0
    assert report["exact_match"] == pytest.approx(50.0) and report["f1"] == pytest.approx(100 * (8 / 3) / 4)
    assert (report["HasAns_exact"], report["HasAns_f1"], report["HasAns_total"]) == (50.0, pytest.approx(100 * (5 / 3) / 2), 2)
    assert (report["NoAns_exact"], report["NoAns_f1"], report["NoAns_total"]) == (50.0, 50.0, 2)
    # the sweep starts at 2 (both impossible ones "no answer"); by rising odds: q1 +1 -> 3 at -5; q2 +0 (EM) or +2/3 (F1)
    # -> 3 2/3 at -1 for F1; q3 answered "" +0; q4 answered with text -1.
    assert (report["best_exact"], report["best_exact_thresh"]) == (75.0, -5.0)
    assert report["best_f1"] == pytest.approx(100 * (11 / 3) / 4) and report["best_f1_thresh"] == -1.0


def test_best_threshold_stays_zero_when_no_answer_everywhere_is_best():
    predictions = {"q1": "wrong", "q2": "wrong", "q3": "x", "q4": "y"}
    report = squad_scores(examples_v2(), predictions, {"q1": 1.0, "q2": 2.0, "q3": 3.0, "q4": 4.0})
    assert (report["best_exact"], report["best_exact_thresh"]) == (50.0, 0.0)
    assert report["exact_match"] == 0.0


def test_v1_scores_and_multiple_golds():
    examples = examples_v2()[:2]
    report = squad_scores(examples, {"q1": "Broncos", "q2": "Cat."})
    assert report == {"exact_match": 50.0, "f1": pytest.approx(100 * (2 / 3 + 1) / 2), "total": 2}  # "Cat." is q2's second gold
    with pytest.raises(ValueError, match="no prediction for 1 of 2 questions \\(the first: 'q2'\\)"):
        squad_scores(examples, {"q1": ""})


# --- decoding -----------------------------------------------------------------------------
# "Alpha beta gamma delta epsilon" in two windows of 8: [CLS] q [SEP] Alpha beta gamma delta [SEP]
# and [CLS] q [SEP] gamma delta epsilon [SEP] (pad). gamma has its max context in window 0
# (min(2, 1) + 0.04 beats 0 + 0.03), delta in window 1 (min(1, 1) + 0.03 beats 0 + 0.04).

WORDS = "Alpha beta gamma delta epsilon"
SPAN = {"Alpha": (0, 5), "beta": (6, 10), "gamma": (11, 16), "delta": (17, 22), "epsilon": (23, 30)}
WINDOWS = [["Alpha", "beta", "gamma", "delta"], ["gamma", "delta", "epsilon"]]


def two_windows(starts, ends, null=(0.0, 0.0)):
    """Offsets and logits of the two windows: `starts`/`ends` map (window, word) to a logit, -10 elsewhere;
    `null` is each window's [CLS] start and end logit."""
    offsets = np.full((2, 8, 2), -1)
    start_logits, end_logits = np.full((2, 8), -10.0), np.full((2, 8), -10.0)
    for w, words in enumerate(WINDOWS):
        for i, word in enumerate(words):
            offsets[w, 3 + i] = SPAN[word]
            start_logits[w, 3 + i] = starts.get((w, word), -10.0)
            end_logits[w, 3 + i] = ends.get((w, word), -10.0)
        start_logits[w, 0] = end_logits[w, 0] = null[w]
    return [0, 0], offsets, start_logits, end_logits


def example(is_impossible=False):
    return [QAExample("e", "", "Which?", WORDS, [] if is_impossible else [("delta", 17)], is_impossible)]


def test_decoding_picks_the_best_span_over_overlapping_windows():
    windows = two_windows({(0, "beta"): 2.0, (1, "delta"): 5.0}, {(0, "gamma"): 2.0, (1, "epsilon"): 4.0})
    decoded = decode_spans(example(), *windows)
    assert decoded.predictions == {"e": "delta epsilon"} and decoded.null_odds == {}
    best = decoded.nbest["e"][0]
    assert (best["text"], best["start"], best["score"], best["start_logit"], best["end_logit"]) == ("delta epsilon", 17, 9.0, 5.0, 4.0)
    assert [entry["text"] for entry in decoded.nbest["e"][1:3]] == ["beta gamma", "delta"]  # 2 + 2, then 5 + (-10)
    assert sum(entry["probability"] for entry in decoded.nbest["e"]) == pytest.approx(1.0)
    assert len(decoded.nbest["e"]) <= 20 and len({entry["text"] for entry in decoded.nbest["e"]}) == len(decoded.nbest["e"])


def test_a_start_counts_only_in_its_max_context_window():
    # delta..delta scores best (9 + 9) in window 0, where delta is the last passage token (no context to its
    # right): refused there, the best is gamma..delta in window 0 (3 + 9; gamma's max context is window 0)
    windows = two_windows({(0, "delta"): 9.0, (0, "gamma"): 3.0, (1, "delta"): 1.0, (1, "gamma"): 8.0}, {(0, "delta"): 9.0, (1, "delta"): 1.0})
    assert decode_spans(example(), *windows).predictions["e"] == "gamma delta"
    assert decode_spans(example(), *windows).nbest["e"][0]["score"] == 12.0  # not 8 + 1: gamma starts only in window 0
    assert decode_spans(example(), *windows, max_context=False).predictions["e"] == "delta"


def test_tokens_that_share_a_character_span_each_keep_their_own_max_context():
    """The byte pieces of one character are several tokens with one span: each has its own max
    context. gamma is two such pieces, g1 g2: g1's max context is window 0, g2's window 1, where it starts the best span."""
    offsets = np.full((2, 8, 2), -1)
    offsets[0, 3:7] = [SPAN["Alpha"], SPAN["beta"], SPAN["gamma"], SPAN["gamma"]]  # Alpha beta g1 g2
    offsets[1, 3:7] = [SPAN["gamma"], SPAN["gamma"], SPAN["delta"], SPAN["epsilon"]]  # g1 g2 delta epsilon
    starts, ends = np.full((2, 8), -10.0), np.full((2, 8), -10.0)
    starts[1, 4], ends[1, 5] = 6.0, 5.0  # g2 .. delta, in window 1
    best = decode_spans(example(), [0, 0], offsets, starts, ends).nbest["e"][0]
    assert (best["text"], best["score"]) == ("gamma delta", 11.0)


def test_end_before_start_and_max_answer_len_are_refused():
    windows = two_windows({(0, "beta"): 9.0, (0, "Alpha"): 1.0}, {(0, "Alpha"): 9.0, (0, "delta"): 2.0})
    assert decode_spans(example(), *windows).predictions["e"] == "beta gamma delta"  # beta..Alpha ends before it starts
    assert decode_spans(example(), *windows, max_answer_len=2).predictions["e"] == "Alpha"  # beta..delta is 3 tokens
    for entry in decode_spans(example(), *windows, max_answer_len=2).nbest["e"]:
        assert len(entry["text"].split()) <= 2


def test_null_answer_from_the_lowest_cls_score():
    starts, ends = {(1, "delta"): 3.0}, {(1, "delta"): 3.0}  # best span: 6
    # [CLS] scores 2 + 2 = 4 in window 0 and 4 + 4 = 8 in window 1: the null score is the lowest, 4
    decoded = decode_spans(example(True), *two_windows(starts, ends, null=(2.0, 4.0)), allow_null=True)
    assert decoded.null_odds == {"e": pytest.approx(4.0 - 6.0)} and decoded.predictions == {"e": "delta"}
    nbest = decoded.nbest["e"]
    assert nbest[0]["text"] == "delta" and nbest[1] == {"text": "", "start": None, "score": 4.0, "start_logit": 2.0,
                                                         "end_logit": 2.0, "probability": pytest.approx(1 / (1 + math.exp(2)), rel=1e-3)}
    decoded = decode_spans(example(True), *two_windows(starts, ends, null=(4.0, 5.0)), allow_null=True)
    assert decoded.null_odds["e"] == pytest.approx(2.0) and decoded.predictions["e"] == ""
    assert decode_spans(example(True), *two_windows(starts, ends, null=(4.0, 5.0)), allow_null=True, null_threshold=3.0).predictions["e"] == "delta"


def test_decoding_accepts_numpy_and_torch():
    owner, offsets, starts, ends = two_windows({(1, "delta"): 5.0}, {(1, "epsilon"): 5.0})
    decoded = decode_spans(example(), torch.tensor(owner), torch.tensor(offsets), starts, torch.tensor(ends))
    assert decoded.predictions["e"] == "delta epsilon"


def test_decoding_refuses_questions_without_windows():
    with pytest.raises(ValueError, match="question 'f' has no window"):
        decode_spans([*example(), QAExample("f", "", "?", WORDS, [("beta", 6)])], *two_windows({}, {}))


def test_write_predictions(tmp_path):
    decoded = decode_spans(example(True), *two_windows({(1, "delta"): 3.0}, {(1, "delta"): 3.0}), allow_null=True)
    written = write_predictions(tmp_path, decoded)
    assert [p.name for p in written] == ["predictions.json", "nbest_predictions.json", "null_odds.json"]
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"e": "delta"}
    assert json.loads((tmp_path / "null_odds.json").read_text()) == {"e": pytest.approx(-6.0)}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)  # no temporary file left
    v1 = decode_spans(example(), *two_windows({(1, "delta"): 3.0}, {(1, "delta"): 3.0}))
    assert [p.name for p in write_predictions(tmp_path / "v1", v1)] == ["predictions.json", "nbest_predictions.json"]
