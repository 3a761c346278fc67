"""Predictions on new data (`python -m minibert predict`, `Classifier.predict`): a fine-tuned
model's predictions on its own dev file are the ones its fine-tune wrote to predictions.tsv.

The models are test_finetune's tiny ones, fine-tuned for a few steps: what matters here is
not that they learned, but that predicting again reproduces what the fine-tune predicted.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from minibert.__main__ import main as minibert
from minibert.finetune import load_classifier, main as finetune

from test_finetune_ctrl_c import HOLD, pressed_when_held
from test_finetune import (  # noqa: F401  (minibert_dir, one_thread and piece_model_dir are fixtures)
    NEUTRAL, minibert_dir, one_thread, piece_model_dir, score_rows, tagged_rows, toy_rows, write_conll, write_jsonl, write_tsv,
)

SHORT = ["--steps", "12", "--batch-size", "8", "--lr", "3e-3", "--device", "cpu"]


def fine_tuned(init: Path, train: Path, dev: Path, out: Path, *extra) -> Path:
    assert finetune(["--init", str(init), "--train", str(train), "--dev", str(dev), "--out", str(out), *SHORT, *extra]) == 0
    return out


def table(path: Path) -> list[dict]:
    header, *rows = (line.split("\t") for line in path.read_text().splitlines())
    return [dict(zip(header, row)) for row in rows]


def assert_same_predictions(predicted: list[dict], written: list[dict], score: str = "score") -> None:
    """Same rows and labels exactly, scores within 1e-6 ("-" where a word was cut)."""
    assert len(predicted) == len(written) > 0
    assert [row["prediction"] for row in predicted] == [row["prediction"] for row in written]
    for mine, theirs in zip(predicted, written):
        if theirs[score] == "-":
            assert mine[score] == "-"
        else:
            assert float(mine[score]) == pytest.approx(float(theirs[score]), abs=1e-6)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[Path, Path]:
    """The toy task as sentence pairs: segment A is filler, B carries the label."""
    folder = tmp_path_factory.mktemp("pairs")
    header = ["index", "sentence1", "sentence2", "label"]

    def rows(n, seed):
        return [(str(i), " ".join(NEUTRAL[i % 5:i % 5 + 3]), text, label) for i, (text, label) in enumerate(toy_rows(n, seed))]
    return write_tsv(folder / "train.tsv", header, rows(48, 1)), write_tsv(folder / "dev.tsv", header, rows(30, 2))


@pytest.fixture(scope="module")
def pair_classifier(minibert_dir, pairs, tmp_path_factory) -> Path:
    return fine_tuned(minibert_dir, *pairs, tmp_path_factory.mktemp("pair_classifier"))


def test_predict_on_dev_gives_the_fine_tunes_own_predictions(pair_classifier, pairs, tmp_path):
    out = tmp_path / "p.tsv"
    assert minibert(["predict", str(pair_classifier), str(pairs[1]), "--out", str(out), "--batch-size", "8"]) == 0
    written = table(pair_classifier / "predictions.tsv")
    assert list(written[0]) == ["index", "prediction", "label", "score"]
    predicted = table(out)
    assert list(predicted[0]) == ["index", "prediction", "score"]  # the gold label column is the dev file's, not read
    assert_same_predictions(predicted, written)
    assert [row["index"] for row in predicted] == [str(i) for i in range(30)]
    assert all(0.5 <= float(row["score"]) <= 1 for row in predicted)  # the predicted class's probability, of two


def test_classifier_predict_takes_pairs_and_agrees_with_the_file(pair_classifier, pairs):
    classifier = load_classifier(pair_classifier)
    dev = table(pairs[1])
    predictions = classifier.predict([(row["sentence1"], row["sentence2"]) for row in dev], batch_size=8)
    written = table(pair_classifier / "predictions.tsv")
    assert [p.label for p in predictions] == [row["prediction"] for row in written]
    assert [p.score for p in predictions] == pytest.approx([float(row["score"]) for row in written], abs=1e-6)
    # the batch a row sits in changes nothing that matters (padding is masked)
    one_by_one = classifier.predict([(row["sentence1"], row["sentence2"]) for row in dev[:5]], batch_size=1)
    assert [p.label for p in one_by_one] == [p.label for p in predictions[:5]]
    assert [p.score for p in one_by_one] == pytest.approx([p.score for p in predictions[:5]], abs=1e-5)


def test_regression_writes_the_value_and_unlabelled_jsonl_reads(minibert_dir, tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", score_rows(48, seed=1))
    dev = write_jsonl(tmp_path / "dev.jsonl", score_rows(20, seed=2))
    model = fine_tuned(minibert_dir, train, dev, tmp_path / "regressor")
    unlabelled = write_jsonl(tmp_path / "new.jsonl", [{"id": i, "text": row["sentence"]} for i, row in enumerate(score_rows(20, 2))])
    out = tmp_path / "p.tsv"
    assert minibert(["predict", str(model), str(unlabelled), "--out", str(out)]) == 0
    predicted, written = table(out), table(model / "predictions.tsv")
    assert list(predicted[0]) == ["index", "prediction"]  # a regression prediction is its own score
    assert_same_predictions(predicted, written, score="prediction")
    values = load_classifier(model).predict([row["sentence"] for row in score_rows(20, 2)])
    assert all(p.label is None for p in values)
    assert [p.score for p in values] == pytest.approx([float(row["prediction"]) for row in written], abs=1e-5)


def test_a_tagger_writes_a_tag_per_word_as_its_fine_tune_did(piece_model_dir, tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", tagged_rows(48, seed=1))
    dev = write_conll(tmp_path / "dev.conll", tagged_rows(20, seed=2))
    model = fine_tuned(piece_model_dir, train, dev, tmp_path / "tagger", "--max-len", "8")  # long sentences lose words
    words_only = write_jsonl(tmp_path / "words.jsonl", [{"tokens": row["tokens"]} for row in tagged_rows(20, seed=2)])
    out = tmp_path / "p.tsv"
    assert minibert(["predict", str(model), str(words_only), "--out", str(out), "--max-len", "8"]) == 0
    predicted, written = table(out), table(model / "predictions.tsv")
    assert list(predicted[0]) == ["sentence", "word", "prediction", "score"]
    assert [(r["sentence"], r["word"]) for r in predicted] == [(r["sentence"], r["word"]) for r in written]
    assert any(row["prediction"] == "-" for row in predicted)  # the cut words, as the fine-tune marked them
    assert_same_predictions(predicted, written)
    conll = tmp_path / "words.conll"  # a word alone on its line, no tag
    conll.write_text("".join("".join(f"{word}\n" for word in row["tokens"]) + "\n" for row in tagged_rows(20, seed=2)))
    assert minibert(["predict", str(model), str(conll), "--out", str(tmp_path / "c.tsv"), "--max-len", "8"]) == 0
    assert (tmp_path / "c.tsv").read_text() == out.read_text()
    tagger = load_classifier(model)
    sentences = tagger.predict([row["tokens"] for row in tagged_rows(20, seed=2)], max_len=8)
    assert [p.label or "-" for sentence in sentences for p in sentence] == [row["prediction"] for row in written]
    assert any(math.isnan(p.score) for sentence in sentences for p in sentence)


def test_bad_input_is_one_line_and_nothing_is_replaced(pair_classifier, pairs, minibert_dir, tmp_path, capsys):
    out = tmp_path / "p.tsv"
    out.write_text("kept\n")
    cases = [
        (["predict", str(pair_classifier), str(pairs[1]), "--out", str(out)], "--overwrite"),
        (["predict", str(pair_classifier), str(pairs[1]), "--out", str(tmp_path)], "is a folder"),
        (["predict", str(minibert_dir), str(pairs[1]), "--out", str(tmp_path / "q.tsv")], "no fine-tuned classifier"),
        (["predict", str(pair_classifier), str(tmp_path / "missing.tsv"), "--out", str(tmp_path / "q.tsv")], "missing.tsv"),
        (["predict", str(pair_classifier), str(pairs[1]), "--out", str(tmp_path / "q.tsv"), "--text-columns", "nope"], "no column nope"),
        (["predict", str(pair_classifier), str(pairs[1]), "--out", str(tmp_path / "q.tsv"), "--batch-size", "0"], "--batch-size"),
    ]
    for argv, named in cases:
        assert minibert(argv) == 2, argv
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert out.read_text() == "kept\n" and not (tmp_path / "q.tsv").exists()
    assert minibert(["predict", str(pair_classifier), str(pairs[1]), "--out", str(out), "--overwrite"]) == 0
    assert table(out)[0]["index"] == "0"


def test_python_rows_of_the_wrong_shape_are_refused(pair_classifier):
    classifier = load_classifier(pair_classifier)
    for rows, named in [("one text", "list of rows"), (["a text", ("a", "pair")], "not a mix"), ([("a", "b", "c")], "pairs")]:
        with pytest.raises(ValueError, match=named):
            classifier.predict(rows)
    assert classifier.predict([]) == []


def test_the_label_column_is_ignored(pair_classifier, pairs, tmp_path):
    """Unlabelled rows predict as the same rows with labels do: the label is never read."""
    rows = table(pairs[1])
    bare = write_tsv(tmp_path / "bare.tsv", ["sentence1", "sentence2"], [(r["sentence1"], r["sentence2"]) for r in rows])
    assert minibert(["predict", str(pair_classifier), str(bare), "--out", str(tmp_path / "bare_p.tsv")]) == 0
    assert minibert(["predict", str(pair_classifier), str(pairs[1]), "--out", str(tmp_path / "dev_p.tsv")]) == 0
    assert (tmp_path / "bare_p.tsv").read_text() == (tmp_path / "dev_p.tsv").read_text()


def test_the_fine_tunes_predictions_carry_the_probability_of_the_predicted_class(pair_classifier, pairs):
    """predictions.tsv's score is softmax(logits)[prediction], computed here by hand."""
    classifier = load_classifier(pair_classifier)
    dev = table(pairs[1])[:6]
    batch = classifier.tokenizer.batch([r["sentence1"] for r in dev], [r["sentence2"] for r in dev], max_length=128)
    with torch.no_grad():
        probabilities = classifier.model(**batch).logits.softmax(-1)
    written = table(pair_classifier / "predictions.tsv")[:6]
    names = classifier.labels.names
    assert [names[i] for i in probabilities.argmax(-1).tolist()] == [row["prediction"] for row in written]
    assert probabilities.max(-1).values.tolist() == pytest.approx([float(row["score"]) for row in written], abs=1e-6)
    assert json.loads((pair_classifier / "eval.json").read_text())["examples"] == 30


def test_predict_cuts_rows_where_the_fine_tune_cut_them(minibert_dir, pairs, tmp_path):
    """A model fine-tuned with a short --max-len predicts its dev file as its fine-tune did, without being told the length."""
    classifier = fine_tuned(minibert_dir, *pairs, tmp_path / "short", "--max-len", "6")
    out = tmp_path / "p.tsv"
    assert minibert(["predict", str(classifier), str(pairs[1]), "--out", str(out), "--batch-size", "8"]) == 0
    assert_same_predictions(table(out), table(classifier / "predictions.tsv"))


def test_a_damaged_eval_json_is_one_line_naming_it_and_max_len(pair_classifier, pairs, tmp_path, capsys):
    """predict reads the fine-tune's --max-len from eval.json: a damaged one is refused in one line that
    names it and says to pass --max-len, which then predicts."""
    classifier = tmp_path / "classifier"
    shutil.copytree(pair_classifier, classifier)
    (classifier / "eval.json").write_text('{"args": {"max_len"')  # cut short
    out = tmp_path / "p.tsv"
    assert minibert(["predict", str(classifier), str(pairs[1]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "eval.json" in err and "--max-len" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    assert minibert(["predict", str(classifier), str(pairs[1]), "--out", str(out), "--max-len", "64"]) == 0
    assert_same_predictions(table(out), table(pair_classifier / "predictions.tsv"))


# `python -m minibert predict ...` held in its second batch's forward, until the test presses Ctrl-C.
HELD_SECOND_BATCH = HOLD + """
from minibert.heads import SequenceClassifier
forward, calls = SequenceClassifier.forward, []
def second_held(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        hold()
    return forward(self, *args, **kwargs)
SequenceClassifier.forward = second_held
from minibert.tools.commands import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("existing", [False, True])
def test_ctrl_c_while_predicting_is_one_line_and_leaves_out_as_it_was(existing, pair_classifier, pairs, tmp_path):
    """A real process, a real SIGINT, between two batches: exit status 130, one line on stderr
    after the progress bar, and --out as it was before the command (absent, or an earlier file
    that --overwrite would have replaced), no half-written file beside it."""
    folder = tmp_path / "predictions"
    folder.mkdir()
    out = folder / "p.tsv"
    if existing:
        out.write_text("kept\n")
    argv = ["predict", str(pair_classifier), str(pairs[1]), "--out", str(out), "--batch-size", "4", "--device", "cpu",
            *(["--overwrite"] if existing else [])]
    returncode, printed, err = pressed_when_held(HELD_SECOND_BATCH, tmp_path / "held", argv)
    assert returncode == 130 and "Traceback" not in printed + err
    assert [line for line in err.split("\n") if line.strip()][-1:] == [
        f"python -m minibert predict: interrupted; --out {out} {'left as it was' if existing else 'not written'}"]
    assert len([line for line in err.replace("\r", "\n").split("\n") if "interrupted" in line or "Error" in line]) == 1
    assert sorted(path.name for path in folder.iterdir()) == (["p.tsv"] if existing else [])
    assert not existing or out.read_text() == "kept\n"
