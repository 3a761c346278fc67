"""Question answering as run_qa.py users run it: its local files read, questions left-stripped,
SQuAD 2.0's official keys and strict-JSON null odds, and the threshold step (the best
--null-threshold printed by the fine-tune, `predict --null-threshold` answering again with it)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from minibert.finetune.predictions import predict_file
from minibert.finetune.kinds.squad_scores import reanswered_threshold, squad_scores
from minibert.finetune.kinds.span_decoding import best_spans, decode_spans
from minibert.finetune.kinds.squad import QAExample, is_squad, read_squad

from test_question_answering import QA_FLAGS, backbone, finetune_qa, one_thread, squad_file  # noqa: F401 (fixtures)

OFFICIAL_V2 = ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total",
               "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh")


def records(dataset: dict) -> list[dict]:
    """run_qa.py's records of a SQuAD dataset: one per question, answers as two lists."""
    return [{"id": qa["id"], "title": article["title"], "context": paragraph["context"], "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]], "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for article in dataset["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]


def strict(text: str):
    """JSON as a strict parser reads it: Infinity, -Infinity and NaN are refused."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_run_qas_local_json_and_json_lines_named_json_read_as_squads_own_file(tmp_path):
    dataset = squad_file(tmp_path / "squad.json", version="v2.0", impossible=True)
    rows = records(dataset)
    (tmp_path / "run_qa.json").write_text(json.dumps({"data": rows}))
    (tmp_path / "lines.json").write_text("".join(json.dumps(row) + "\n" for row in rows))
    expected = read_squad(tmp_path / "squad.json")
    for name in ("run_qa.json", "lines.json"):
        assert is_squad(tmp_path / name), name  # --task auto finds question answering
        found = read_squad(tmp_path / name)
        assert [(e.id, e.question, e.context, e.answers, e.is_impossible) for e in found] == \
            [(e.id, e.question, e.context, e.answers, e.is_impossible) for e in expected], name
    (tmp_path / "broken.json").write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match="broken.json line 2") as caught:
        read_squad(tmp_path / "broken.json")
    assert "\n" not in str(caught.value)


def test_a_misplaced_answer_in_a_run_qa_record_is_refused_by_its_id(tmp_path):
    dataset = squad_file(tmp_path / "squad.json")
    rows = records(dataset)
    rows[3]["answers"]["answer_start"] = [rows[3]["answers"]["answer_start"][0] + 1]
    (tmp_path / "run_qa.json").write_text(json.dumps({"data": rows}))
    with pytest.raises(ValueError, match=f"question '{rows[3]['id']}'.*is not at answer_start"):
        read_squad(tmp_path / "run_qa.json")


@pytest.fixture(scope="module")
def byte_bpe(tmp_path_factory):
    from test_byte_bpe import default_corpus_paragraphs, train_vocabulary

    from minibert.interop.tokenizers import ByteLevelBPETokenizer

    folder = train_vocabulary(tmp_path_factory.mktemp("bpe"), default_corpus_paragraphs()[:100], 400)
    return ByteLevelBPETokenizer.load(folder)


def test_a_question_is_read_without_its_leading_space_as_run_qa_strips_it(byte_bpe, tmp_path):
    from minibert.finetune.kinds.windows import question_windows

    question = "Who wrote the book?"
    assert byte_bpe.tokenize_to_ids("  " + question) != byte_bpe.tokenize_to_ids(question)  # else this test tests nothing
    context = "The book was written by Ann Smith."
    for name, asked in (("plain", question), ("spaced", "  " + question)):
        (tmp_path / f"{name}.jsonl").write_text(json.dumps({"id": "q", "context": context, "question": asked,
                                                            "answers": {"text": ["Ann Smith"], "answer_start": [24]}}) + "\n")
    plain, spaced = read_squad(tmp_path / "plain.jsonl"), read_squad(tmp_path / "spaced.jsonl")
    assert spaced[0].question == question
    shape = dict(max_len=64, max_query_len=64, doc_stride=16, labelled=True)
    assert question_windows(byte_bpe, spaced, **shape)[0] == question_windows(byte_bpe, plain, **shape)[0]


def test_a_question_without_a_valid_span_has_finite_null_odds():
    """--n-best 1: the best start (beta) comes after the best end (alpha), so no span is valid; the
    null odds are [CLS]'s score less 0, as upstream's "empty" entry scores."""
    example = QAExample("q", "", "What?", "alpha beta", [], True)
    offsets = np.array([[[-1, -1], [0, 5], [6, 10]]])
    starts, ends = np.array([[1.5, -9.0, 2.0]]), np.array([[0.5, 3.0, -9.0]])
    decoded = decode_spans([example], [0], offsets, starts, ends, n_best=1, allow_null=True)
    assert decoded.predictions["q"] == "" and decoded.null_odds["q"] == pytest.approx(2.0)  # [CLS]'s 1.5 + 0.5, less 0
    assert strict(json.dumps(decoded.null_odds)) == decoded.null_odds


def examples_v2() -> list[QAExample]:
    context = "Ann Smith wrote the book in 1990 in Paris"
    return [QAExample("a1", "", "Who?", context, [("Ann Smith", 0)]), QAExample("a2", "", "When?", context, [("1990", 28)]),
            QAExample("a3", "", "Where?", context, [("Paris", 36)]), QAExample("n1", "", "Why?", context, [], True),
            QAExample("n2", "", "How?", context, [], True)]


def test_the_reanswered_threshold_sees_above_the_threshold_applied():
    """Answered at threshold 0 with every odds above it, every answer is "": the official sweep then
    finds nothing better than answering nothing, while the best spans would have scored."""
    spans = {"a1": "Ann Smith", "a2": "1990", "a3": "the book", "n1": "Paris", "n2": "Smith"}
    odds = {"a1": 2.0, "a2": 3.0, "a3": 5.0, "n1": 4.0, "n2": 6.0}
    given = {qid: "" for qid in spans}  # threshold 0: every odds is above it
    official = squad_scores(examples_v2(), given, odds)
    assert (official["best_f1"], official["best_f1_thresh"]) == (40.0, 0.0)  # the two impossible ones, "no answer" for all
    best = reanswered_threshold(examples_v2(), spans, odds)
    # answering a1 and a2 (odds 2 and 3) and nothing above: 2 + 2 impossible = 4 of 5
    assert best["f1"] == pytest.approx(80.0) and 3.0 < best["f1_thresh"] < 4.0
    again = {qid: text if odds[qid] <= best["f1_thresh"] else "" for qid, text in spans.items()}
    assert squad_scores(examples_v2(), again)["f1"] == pytest.approx(best["f1"])  # what answering again with it gives
    nothing = reanswered_threshold(examples_v2(), {qid: "wrong" for qid in spans}, odds)
    assert nothing["f1"] == 40.0 and nothing["f1_thresh"] < 2.0  # below every odds: every answer ""


@pytest.fixture(scope="module")
def squad2_run(backbone, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("squad2")
    squad_file(folder / "train.json", version="v2.0", impossible=True)
    return folder, finetune_qa(backbone, folder / "train.json", folder / "train.json", folder / "out")


def test_a_squad_2_fine_tune_writes_the_official_keys_and_strict_json_null_odds(squad2_run):
    folder, report = squad2_run
    assert all(key in report for key in OFFICIAL_V2), [key for key in OFFICIAL_V2 if key not in report]
    assert report["exact"] == report["exact_match"]
    null_odds = strict((folder / "out" / "null_odds.json").read_text())
    assert len(null_odds) == report["total"] and all(math.isfinite(value) for value in null_odds.values())
    strict((folder / "out" / "eval.json").read_text())


def test_predict_null_threshold_changes_the_empties_as_the_threshold_says(squad2_run, tmp_path):
    folder, report = squad2_run
    odds = json.loads((folder / "out" / "null_odds.json").read_text())
    nbest = json.loads((folder / "out" / "nbest_predictions.json").read_text())
    spans = {qid: next((e["text"] for e in entries if e["start"] is not None), "") for qid, entries in nbest.items()}
    ordered = sorted(odds.values())
    for threshold in (ordered[0] - 1, (ordered[len(ordered) // 2] + ordered[len(ordered) // 2 - 1]) / 2, ordered[-1] + 1):
        out = tmp_path / f"answers-{threshold:.3f}.json"
        predict_file(folder / "out", folder / "train.json", out, device="cpu", precision="fp32", null_threshold=threshold)
        answers = json.loads(out.read_text())
        assert answers == {qid: spans[qid] if odds[qid] <= threshold else "" for qid in odds}, threshold
    assert report["reanswered"]["f1"] >= report["f1"]


def test_the_squad_2_fine_tune_prints_the_best_threshold_and_predict_answers_with_it(backbone, tmp_path, capsys):  # noqa: F811
    from minibert.finetune import main

    squad_file(tmp_path / "train.json", version="v2.0", impossible=True)
    assert main(["--init", str(backbone), "--train", str(tmp_path / "train.json"), "--dev", str(tmp_path / "train.json"),
                 "--out", str(tmp_path / "out"), "--device", "cpu", *QA_FLAGS, "--null-threshold", "-1"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "dev exact match" in line)
    report = json.loads((tmp_path / "out" / "eval.json").read_text())
    best = report["reanswered"]
    assert f"at --null-threshold -1 (the best threshold for these questions: {best['f1_thresh']}, F1 {best['f1']:.2f}" in line
    assert f"--null-threshold {best['f1_thresh']} answers with it" in line
    predict_file(tmp_path / "out", tmp_path / "train.json", tmp_path / "again.json", device="cpu", precision="fp32",
                 null_threshold=best["f1_thresh"])
    again = json.loads((tmp_path / "again.json").read_text())
    assert squad_scores(read_squad(tmp_path / "train.json"), again)["f1"] == pytest.approx(best["f1"])


def test_null_threshold_is_refused_for_a_model_that_never_answers_nothing(backbone, tmp_path, capsys):  # noqa: F811
    from minibert.tools.commands import main

    squad_file(tmp_path / "train.json")
    finetune_qa(backbone, tmp_path / "train.json", tmp_path / "train.json", tmp_path / "out")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "out"), str(tmp_path / "train.json"), "--out", str(tmp_path / "p.json"),
                 "--null-threshold", "2"]) == 2
    error = capsys.readouterr().err.strip()
    assert "SQuAD 1.1" in error and "drop it" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


def test_best_spans_skip_the_null_entry():
    from minibert.finetune.kinds.span_decoding import Decoded

    decoded = Decoded({"q": ""}, {"q": [{"text": "", "start": None}, {"text": "Paris", "start": 3}], "r": [{"text": "", "start": None}]}, {})
    assert best_spans(decoded) == {"q": "Paris", "r": ""}
