"""Fine-tuning: task files, label mapping, segment ids, the command and its checkpoint.

Models here are tiny and built in the test: a minibert Encoder saved in our format, and a
transformers BertModel saved as a Hugging Face directory, both with a WordPiece vocab.txt
written below. The toy task is separable by one word, so a few dozen steps must solve it.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minibert import Encoder, ModelConfig, save_pretrained
from minibert.finetune.recipes import DROPOUT
from minibert.finetune.kinds.sentence_files import LabelMap, TaskData, read_task, task_of
from minibert.tokenizers.wordpiece import WordPieceTokenizer
from minibert.finetune import (
    classification_metrics, load_classifier, main, model_inputs, pearson, predict, ranks, regression_metrics, save_classifier,
    spearman,
)

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
POSITIVE = ["good", "great", "fine", "nice"]
NEGATIVE = ["bad", "awful", "poor", "sad"]
NEUTRAL = ["the", "a", "movie", "film", "was", "is", "plot", "actor", "very", "quite"]
VOCAB = SPECIALS + POSITIVE + NEGATIVE + NEUTRAL + ["\"", ",", "."]
TINY = dict(vocab_size=len(VOCAB), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
            max_positions=64, hidden_dropout=0.0, attention_dropout=0.0)
FAST = ["--steps", "80", "--batch-size", "16", "--lr", "3e-3", "--warmup", "0.1"]


# --- tiny models and files ------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Matrices this small gain nothing from a second thread; it only adds synchronisation,
    which costs many times the work itself when the cores are busy."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)



@pytest.fixture(scope="module")
def minibert_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path_factory.mktemp("minibert"), tokenizer=WordPieceTokenizer(VOCAB))


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hf_bert")
    transformers.BertModel(config).save_pretrained(directory)
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    return directory


def toy_rows(n: int, seed: int) -> list[tuple[str, str]]:
    """Sentences of filler words with one sentiment word: the label is that word's side."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = "positive" if i % 2 else "negative"
        words = rng.choices(NEUTRAL, k=rng.randint(2, 6))
        words.insert(rng.randint(0, len(words)), rng.choice(POSITIVE if label == "positive" else NEGATIVE))
        rows.append((" ".join(words), label))
    return rows


def write_tsv(path: Path, header: list[str], rows) -> Path:
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("toy")
    return (write_tsv(folder / "train.tsv", ["sentence", "label"], toy_rows(96, seed=1)),
            write_tsv(folder / "dev.tsv", ["sentence", "label"], toy_rows(40, seed=2)))


def run(init, train, dev, out, *extra) -> int:
    return main(["--init", str(init), "--train", str(train), "--dev", str(dev), "--out", str(out), "--device", "cpu", *extra])


@pytest.fixture(scope="module")
def finetuned(minibert_dir, toy, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finetuned")
    assert run(minibert_dir, *toy, out, *FAST) == 0
    return out


# --- the job end to end ---------------------------------------------------------------------


def check_learned(out: Path) -> None:
    report = json.loads((out / "eval.json").read_text())
    assert report["accuracy"] >= 0.95
    assert report["f1"] >= 0.9 and report["mcc"] >= 0.85
    assert report["positive_label"] == "positive" and report["examples"] == 40 and report["steps"] == 80


def test_separable_toy_task_is_learned_in_a_few_steps(finetuned):
    check_learned(finetuned)


def test_bf16_autocast_learns_the_toy_task_too(minibert_dir, toy, tmp_path):
    assert run(minibert_dir, *toy, tmp_path / "bf16", *FAST, "--precision", "bf16") == 0
    check_learned(tmp_path / "bf16")


def test_hugging_face_bert_learns_a_sentence_pair_task(hf_dir, tmp_path):
    """The label is decided by segment B; A is filler. GLUE pair layout: sentence1/sentence2."""
    def pairs(n, seed):
        filler = random.Random(seed + 100)
        return [(" ".join(filler.choices(NEUTRAL, k=3)), text, label) for text, label in toy_rows(n, seed)]

    header = ["index", "sentence1", "sentence2", "label"]
    train = write_tsv(tmp_path / "train.tsv", header, [(str(i), *r) for i, r in enumerate(pairs(96, 1))])
    dev = write_tsv(tmp_path / "dev.tsv", header, [(str(i), *r) for i, r in enumerate(pairs(40, 2))])
    assert run(hf_dir, train, dev, tmp_path / "out", *FAST) == 0
    check_learned(tmp_path / "out")


def test_classifier_loads_again_and_predicts_what_was_written(finetuned, toy):
    classifier = load_classifier(finetuned)
    assert classifier.labels.names == ["negative", "positive"]
    dev = read_task(toy[1])
    predicted = predict(classifier.model, classifier.tokenizer, dev, batch_size=7, max_len=64, device="cpu")
    rows = [line.split("\t") for line in (finetuned / "predictions.tsv").read_text().splitlines()]
    assert rows[0] == ["index", "prediction", "label", "score"]
    assert [r[1] for r in rows[1:]] == [classifier.labels.names[p] for p in predicted]
    assert [r[2] for r in rows[1:]] == dev.labels


def test_out_with_a_checkpoint_is_kept_unless_overwrite(finetuned, toy, tmp_path, capsys):
    out = shutil.copytree(finetuned, tmp_path / "out")
    before = (out / "model.safetensors").read_bytes()
    assert run(out, *toy, out, "--steps", "1") == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "model.safetensors").read_bytes() == before
    # a fine-tuned classifier is itself a valid --init (its encoder, a new head)
    assert run(out, *toy, out, "--steps", "1", "--overwrite") == 0
    assert (out / "model.safetensors").read_bytes() != before and load_classifier(out).labels.names == ["negative", "positive"]


def test_epochs_set_the_number_of_steps(minibert_dir, toy, tmp_path):
    assert run(minibert_dir, *toy, tmp_path, "--epochs", "0.5", "--batch-size", "32") == 0
    assert json.loads((tmp_path / "eval.json").read_text())["steps"] == 2  # ceil(0.5 * ceil(96 / 32))


# --- reading task files ------------------------------------------------------------------------


def test_three_formats_read_the_same_pairs(tmp_path):
    rows = [('"Quoted" start, with comma', "b one", "entailment"), ("a two", 'b "two"', "not_entailment")]
    tsv = write_tsv(tmp_path / "d.tsv", ["index", "sentence1", "sentence2", "label"], [(str(i), *r) for i, r in enumerate(rows)])
    csv_text = "sentence1,sentence2,label\n" + "".join(",".join('"' + f.replace('"', '""') + '"' for f in r) + "\n" for r in rows)
    (tmp_path / "d.csv").write_text(csv_text)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(dict(zip(["sentence1", "sentence2", "label"], r))) + "\n" for r in rows))
    for path in (tsv, tmp_path / "d.csv", tmp_path / "d.jsonl"):
        data = read_task(path)
        assert (data.texts, data.pairs, data.labels) == ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]), path


def test_jsonl_accepts_text_and_integer_labels(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "fine", "label": 1}\n\n{"text": "bad", "label": 0, "extra": [1]}\n')
    data = read_task(path)
    assert (data.texts, data.pairs, data.labels, data.lines) == (["fine", "bad"], None, ["1", "0"], [1, 3])


def test_integer_labels_keep_their_values_in_every_format(tmp_path):
    train = write_tsv(tmp_path / "t.tsv", ["sentence", "label"], [("a", "10"), ("b", "9"), ("c", "2")])
    dev = tmp_path / "d.jsonl"
    dev.write_text('{"sentence": "x", "label": 9}\n{"sentence": "y", "label": "10"}\n')
    labels = LabelMap.from_labels(read_task(train).labels)
    assert labels.names == [2, 9, 10]  # numeric order, not "10" < "2" < "9"
    assert labels.encode(read_task(dev)) == [1, 2]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["neg", "pos", "neutral", "0", "1", "x y"]), min_size=2).filter(lambda ls: len(set(ls)) > 1),
       st.randoms(use_true_random=False))
def test_label_map_round_trips_and_ignores_order(labels, rng):
    shuffled = rng.sample(labels, len(labels))
    first, second = LabelMap.from_labels(labels), LabelMap.from_labels(shuffled)
    assert first.names == second.names and len(first) == len(set(labels))
    data = TaskData(Path("dev.tsv"), ["t"] * len(shuffled), None, shuffled, list(range(2, len(shuffled) + 2)))
    assert [str(first.names[i]) for i in first.encode(data)] == shuffled


def test_real_glue_files_read_as_documented(datasets_dir):
    sst2, rte = read_task(datasets_dir / "sst2" / "dev.tsv"), read_task(datasets_dir / "rte" / "train.tsv")
    assert len(sst2) == 872 and sst2.pairs is None and LabelMap.from_labels(sst2.labels).names == [0, 1]
    assert len(rte) == 2490 and len(rte.pairs) == 2490
    assert LabelMap.from_labels(rte.labels).names == ["entailment", "not_entailment"]
    assert any(t.startswith('"') for t in rte.texts + rte.pairs)  # quotes kept verbatim


# --- pairs get segment ids -----------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.lists(st.sampled_from(NEUTRAL), min_size=1, max_size=6),
                          st.lists(st.sampled_from(POSITIVE), min_size=1, max_size=6)), min_size=1, max_size=4))
def test_pair_inputs_mark_segment_b_with_type_id_1(pairs):
    tokenizer = WordPieceTokenizer(VOCAB)
    data = TaskData(Path("p.tsv"), [" ".join(a) for a, _ in pairs], [" ".join(b) for _, b in pairs], ["x"] * len(pairs), [])
    rows = list(range(len(pairs)))
    inputs = model_inputs(tokenizer, ModelConfig(**TINY), data, rows, 64, "cpu")
    for row, (a, b) in enumerate(pairs):
        ids, types, mask = (inputs[k][row].tolist() for k in ("input_ids", "token_type_ids", "attention_mask"))
        n = len(a) + len(b) + 3
        assert types[:n] == [0] * (len(a) + 2) + [1] * (len(b) + 1) and mask[:n] == [1] * n
        assert all(ids[i] in [VOCAB.index(w) for w in POSITIVE] for i in range(len(a) + 2, n - 1))
        assert not any(types[n:]) and not any(mask[n:])
    # a model without a second segment embedding (RoBERTa, DistilBERT) gets zeros, not an index error
    one_segment = model_inputs(tokenizer, ModelConfig(**TINY, type_vocab_size=1), data, rows, 64, "cpu")
    assert not one_segment["token_type_ids"].any()


# --- metrics --------------------------------------------------------------------------------------


def test_binary_metrics_on_known_cases():
    labels = LabelMap(["neg", "pos"])
    assert classification_metrics([0, 1, 1, 0], [0, 1, 1, 0], labels) | {"positive_label": 0} == {"accuracy": 1.0, "f1": 1.0, "mcc": 1.0, "positive_label": 0}
    assert classification_metrics([1, 0], [0, 1], labels)["mcc"] == -1.0
    constant = classification_metrics([1, 1, 1, 1], [0, 1, 1, 0], labels)
    assert constant["accuracy"] == 0.5 and constant["mcc"] == 0.0 and constant["f1"] == pytest.approx(2 / 3)
    # tp=2 fp=1 fn=1 tn=1: mcc = (2·1 − 1·1) / sqrt(3·3·2·2) = 1/6
    assert classification_metrics([1, 1, 0, 1, 0], [1, 1, 1, 0, 0], labels)["mcc"] == pytest.approx(1 / 6)
    assert set(classification_metrics([0, 2], [0, 1], LabelMap(["a", "b", "c"]))) == {"accuracy"}


# --- every bad input: one line, exit code 2 ------------------------------------------------------


# case -> (train file, dev file, extra flags, words the message must contain); a file is the toy
# task's (None), a missing one (name, None) or written from (name, text or bytes).
BAD_INPUTS = {
    "missing file": (("nope.tsv", None), None, [], ["no such file", "nope.tsv"]),
    "empty file": (("empty.tsv", ""), None, [], ["empty.tsv is empty"]),
    "header only": (("header.tsv", "sentence\tlabel\n"), None, [], ["no examples"]),
    "missing columns": (("cols.tsv", "index\tsentence1\tlabel\n0\ta\t1\n"), None, [],
                        ["found columns index, sentence1, label", "expected", "sentence1, sentence2, label"]),
    "malformed row": (("row.tsv", "sentence\tlabel\nfine\t1\nno label here\n"), None, [], ["row.tsv line 3", "1 fields"]),
    "empty label": (("nolabel.tsv", "sentence\tlabel\nfine\t1\nbad\t \n"), None, [], ["line 3", "label is empty"]),
    "bad json": (("bad.jsonl", '{"text": "a", "label": 1}\n{"text": \n'), None, [], ["bad.jsonl line 2", "JSON"]),
    "scores against class names": (("float.jsonl", '{"text": "a", "label": 0.5}\n'), None, [],
                                   ["dev.tsv line 2", "'negative' is not a number", "--task classification"]),
    "class names as scores": (None, None, ["--task", "regression"], ["train.tsv line 2", "is not a number"]),
    "boolean label": (("bool.jsonl", '{"text": "a", "label": true}\n'), None, [], ["line 1", "'label' is true", "strings or numbers"]),
    "unknown format": (("data.txt", "x"), None, [], ["unknown format", ".jsonl"]),
    "not utf-8": (("latin.tsv", "sentence\tlabel\ncafé\t1\n".encode("latin-1")), None, [], ["latin.tsv is not UTF-8"]),
    "bad csv": (("huge.csv", "sentence,label\n" + "x" * 200_000 + ",1\n"), None, [], ["huge.csv is not well-formed CSV"]),
    "one label": (("one.tsv", "sentence\tlabel\na\tx\nb\tx\n"), None, [], ["at least 2 distinct labels"]),
    "unseen dev label": (None, ("dev2.tsv", "sentence\tlabel\ngood\tpositive\nmeh\tneutral\n"), [],
                         ["dev2.tsv line 3", "'neutral'", "negative, positive"]),
    "pairs vs single": (None, ("pairs.tsv", "sentence1\tsentence2\tlabel\na\tb\tpositive\n"), [], ["sentence pairs", "single texts"]),
    "zero steps": (None, None, ["--steps", "0"], ["--steps must be positive"]),
    "negative epochs": (None, None, ["--epochs", "-1"], ["--epochs must be positive"]),
    "zero batch": (None, None, ["--batch-size", "0"], ["--batch-size must be positive"]),
    "warmup above 1": (None, None, ["--warmup", "2"], ["--warmup", "between 0 and 1"]),
    "dropout of 1": (None, None, ["--dropout", "1"], ["--dropout is a probability in [0, 1), got 1.0"]),
    "too long": (None, None, ["--max-len", "999"], ["--max-len 999 exceeds the 64 positions"]),
    "diverging": (None, None, ["--lr", "1e30", "--steps", "10"], ["loss became NaN/Inf at step", "a lower --lr (now 1e+30)", "--skip-nonfinite"]),
    "steps and epochs": (None, None, ["--steps", "5", "--epochs", "1"], ["--epochs", "not allowed with", "--steps"]),
    "not a number": (None, None, ["--steps", "ten"], ["invalid int value: 'ten'"]),
    "fp16 on a cpu": (None, None, ["--precision", "fp16"], ["--precision fp16 needs a CUDA GPU", "use --precision bf16 or fp32"]),
    "grid without lr": (None, None, ["--recipe", "grid"], ["--recipe grid chooses each GLUE task's lr", "--glue", "add --lr LR"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_code_2(case, toy, minibert_dir, tmp_path, capsys):
    def file(spec, default):
        if spec is None:
            return default
        name, text = spec
        if isinstance(text, bytes):
            (tmp_path / name).write_bytes(text)
        elif text is not None:
            (tmp_path / name).write_text(text)
        return tmp_path / name

    train, dev, extra, words = BAD_INPUTS[case]
    assert run(minibert_dir, file(train, toy[0]), file(dev, toy[1]), tmp_path / "out", *extra) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("python -m minibert.finetune: error: ")]
    assert "Traceback" not in err and errors == lines[-1:]
    assert len(lines) == 1 or case == "diverging"  # only a run that began training shows a progress bar first
    err = errors[0]
    for word in words:
        assert word in err, (case, err)
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_bad_init_and_debug_traceback(toy, tmp_path, capsys):
    assert run(tmp_path / "missing", *toy, tmp_path / "out") == 2
    assert "--init" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        run(tmp_path / "missing", *toy, tmp_path / "out", "--debug")


# --- regression -------------------------------------------------------------------------------------

SCORES = {"awful": 0.0, "bad": 1.0, "sad": 1.5, "fine": 3.0, "good": 3.5, "great": 4.5}  # one word decides the score


def score_rows(n: int, seed: int) -> list[dict]:
    """Filler sentences with one scored word; the target is that word's score (STS-B-like floats)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        word = list(SCORES)[i % len(SCORES)]
        words = rng.choices(NEUTRAL, k=rng.randint(2, 6))
        words.insert(rng.randint(0, len(words)), word)
        rows.append({"sentence": " ".join(words), "label": SCORES[word]})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    """A task folder in GLUE's layout whose labels are float scores."""
    folder = tmp_path_factory.mktemp("scored")
    write_jsonl(folder / "train.jsonl", score_rows(96, seed=1))
    write_jsonl(folder / "dev.jsonl", score_rows(36, seed=2))
    return folder


def test_a_learnable_score_is_regressed_with_high_correlation(minibert_dir, scored, tmp_path):
    out = tmp_path / "out"
    steps = ["--steps", "160", "--batch-size", "16", "--lr", "3e-3"]  # a score from 0 to 4.5 takes longer than a class
    assert run(minibert_dir, scored / "train.jsonl", scored / "dev.jsonl", out, *steps) == 0  # --task auto: floats
    report = json.loads((out / "eval.json").read_text())
    assert report["task"] == "regression" and "accuracy" not in report and report["examples"] == 36
    assert report["pearson"] >= 0.95 and report["spearman"] >= 0.9 and report["mse"] < 0.5, report
    losses = [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert losses[-1] < 0.2 * losses[0]  # the loop's log: the MSE falls
    # the saved regressor loads again, has no class names, and predicts what predictions.tsv says
    model, tokenizer, labels = load_classifier(out)
    assert labels is None and model.num_labels == 1
    predicted = predict(model, tokenizer, read_task(scored / "dev.jsonl"), batch_size=5, max_len=64, device="cpu")
    rows = [line.split("\t") for line in (out / "predictions.tsv").read_text().splitlines()[1:]]
    assert [float(r[1]) for r in rows] == pytest.approx(predicted, abs=1e-4)
    assert [float(r[2]) for r in rows] == [row["label"] for row in score_rows(36, seed=2)]
    assert regression_metrics(predicted, [float(r[2]) for r in rows])["pearson"] == pytest.approx(report["pearson"], abs=1e-4)


def test_sts_b_layout_reads_as_a_regression_pair_task(tmp_path):
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"]
    rows = [("0", "main-captions", "MSRvid", "2012test", "0001", "none", "none", "A plane takes off.", "An air plane is taking off.", "5.000"),
            ("1", "main-captions", "MSRvid", "2012test", "0004", "none", "none", "A man plays a flute.", "A man plays the flute.", "3.800")]
    data = read_task(write_tsv(tmp_path / "dev.tsv", header, rows))
    assert data.pairs == ["An air plane is taking off.", "A man plays the flute."] and task_of(data) == "regression"
    from minibert.finetune.kinds.sentence_files import regression_targets

    assert regression_targets(data) == [5.0, 3.8]


@pytest.mark.parametrize("labels, task", [(["0", "1", "1"], "classification"), (["3.8", "1", "0"], "regression"),
                                          (["2.5e-1", "-3"], "regression"), (["pos", "1.5"], "classification"),
                                          (["nan", "1.5"], "classification")])
def test_regression_is_recognised_by_fractional_numbers(labels, task):
    assert task_of(TaskData(Path("t.tsv"), ["x"] * len(labels), None, labels, list(range(len(labels))))) == task


# --- correlation metrics ----------------------------------------------------------------------------

def test_correlations_on_hand_computed_cases():
    assert ranks([10, 20, 20, 30]).tolist() == [1, 2.5, 2.5, 4]
    assert ranks([3.0, -1.0, 3.0, 3.0]).tolist() == [3, 1, 3, 3]
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0) and pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [5, 5, 5]) == 0.0  # a constant has no correlation with anything
    # x = 1..4, y = 1, 3, 2, 4: centred x (-1.5, -.5, .5, 1.5), y (-1.5, .5, -.5, 1.5); r = 4 / 5
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 2, 3, 4], [1, 10, 100, 1000]) == pytest.approx(1.0)  # monotone, far from linear
    assert pearson([1, 2, 3, 4], [1, 10, 100, 1000]) < 0.9
    assert regression_metrics([1.0, 2.0], [1.5, 2.0])["mse"] == pytest.approx(0.125)


floats = st.lists(st.integers(-10**6, 10**6).map(lambda i: i / 1000), min_size=3, max_size=30)


def brute_force_ranks(values: list[float]) -> list[float]:
    """1 + the number of smaller values + half the number of other equal ones."""
    return [1 + sum(w < v for w in values) + (sum(w == v for w in values) - 1) / 2 for v in values]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_pearson_matches_numpy_and_spearman_is_pearson_of_ranks(data):
    np = pytest.importorskip("numpy")
    x = data.draw(floats)
    y = data.draw(st.lists(st.integers(-10**6, 10**6).map(lambda i: i / 1000), min_size=len(x), max_size=len(x)))
    assert ranks(x).tolist() == brute_force_ranks(x)
    if len(set(x)) > 1 and len(set(y)) > 1:
        assert pearson(x, y) == pytest.approx(float(np.corrcoef(x, y)[0, 1]), abs=1e-9)
        assert spearman(x, y) == pytest.approx(float(np.corrcoef(brute_force_ranks(x), brute_force_ranks(y))[0, 1]), abs=1e-9)
    assert spearman(x, y) == pearson(ranks(x), ranks(y))
    assert -1 - 1e-12 <= pearson(x, y) <= 1 + 1e-12 and spearman(x, y) == pytest.approx(spearman(y, x))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=3, max_size=30), st.lists(st.integers(-1000, 1000), min_size=30, max_size=30),
       st.sampled_from([lambda v: v ** 3 + v, lambda v: 2.5 * v - 7, lambda v: (v + 1000) ** 0.5]))
def test_spearman_ignores_increasing_transforms_and_flips_under_decreasing_ones(x, y, increasing):
    y = y[:len(x)]
    transformed = [increasing(v) for v in x]
    assert spearman(transformed, y) == spearman(x, y)
    assert spearman([-v for v in transformed], y) == pytest.approx(-spearman(x, y), abs=1e-12)


# --- several task folders, one table ----------------------------------------------------------------


def test_every_task_folder_is_fine_tuned_and_gets_one_row(minibert_dir, toy, scored, tmp_path, capsys):
    sentiment = tmp_path / "sentiment"
    sentiment.mkdir()
    for path in toy:
        shutil.copy(path, sentiment / path.name)
    out = tmp_path / "out"
    assert main(["--init", str(minibert_dir), "--tasks", str(sentiment), str(scored), "--out", str(out), "--device", "cpu",
                 "--steps", "3", "--batch-size", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("| task"))):]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    rows = {cells[0]: dict(zip(header, cells)) for cells in ([c.strip() for c in line.strip("|").split("|")] for line in table[2:])}
    assert header[:4] == ["task", "kind", "dev", "steps"] and set(table[1]) <= {"|", "-"}
    assert len(table) == 4 and set(rows) == {"sentiment", scored.name}
    assert rows["sentiment"]["kind"] == "classification" and rows[scored.name]["kind"] == "regression"
    for name, row in rows.items():
        report = json.loads((out / name / "eval.json").read_text())
        assert row["dev"] == str(report["examples"]) and row["steps"] == "3"
        assert all(row[metric] == (f"{report[metric]:.4f}" if metric in report else "-")
                   for metric in ("accuracy", "f1", "mcc", "pearson", "spearman"))


def bad_folders(tmp_path: Path, toy) -> dict[str, tuple[list[str], list[str]]]:
    """case -> (--tasks arguments, words of the one-line error)."""
    good = tmp_path / "good"
    good.mkdir()
    for path in toy:
        shutil.copy(path, good / path.name)
    no_dev = tmp_path / "no_dev"
    no_dev.mkdir()
    shutil.copy(toy[0], no_dev / "train.tsv")
    two_train = tmp_path / "two_train"
    shutil.copytree(good, two_train)
    shutil.copy(toy[0], two_train / "train.csv")
    twin = tmp_path / "twin" / "good"
    shutil.copytree(good, twin)
    (tmp_path / "file.tsv").write_text("x")
    return {
        "missing folder": ([str(good), str(tmp_path / "nope")], ["nope is not a folder"]),
        "a file": ([str(tmp_path / "file.tsv")], ["file.tsv is not a folder"]),
        "no dev file": ([str(no_dev)], ["needs exactly one dev file", "found none"]),
        "two train files": ([str(two_train)], ["exactly one train file", "train.csv and train.tsv"]),
        "same name twice": ([str(good), str(twin)], ["more than one folder called good"]),
        "with --train": ([str(good), "--train", str(toy[0])], ["drop --train and --dev"]),
    }


@pytest.mark.parametrize("case", ["missing folder", "a file", "no dev file", "two train files", "same name twice", "with --train"])
def test_a_bad_task_folder_is_one_line_and_nothing_is_trained(case, minibert_dir, toy, tmp_path, capsys):
    tasks, words = bad_folders(tmp_path, toy)[case]
    out = tmp_path / "out"
    assert main(["--init", str(minibert_dir), "--tasks", *tasks, "--out", str(out), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m minibert.finetune: error: --"), err
    assert all(word in err for word in words), (case, err)
    assert not out.exists()  # checked before anything is trained


def test_no_data_named_is_one_line(minibert_dir, tmp_path, capsys):
    assert main(["--init", str(minibert_dir), "--out", str(tmp_path), "--train", "x.tsv"]) == 2
    assert "--train FILE --dev FILE, or --tasks DIR" in capsys.readouterr().err


# --- token classification ---------------------------------------------------------------------------

TAG_OF = {**{w: "B-POS" for w in POSITIVE}, **{w: "B-NEG" for w in NEGATIVE}}
PIECES = VOCAB + ["##s", "##ly"]  # so that some words split into two sub-tokens: "goods" -> good ##s


def tagged_rows(n: int, seed: int) -> list[dict]:
    """Sentences of filler and sentiment words, some with a suffix piece; each sentiment word
    is an entity of its side (B-POS / B-NEG), the rest O."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = rng.choices(NEUTRAL + POSITIVE + NEGATIVE, k=rng.randint(3, 8))
        tags = [TAG_OF.get(w, "O") for w in words]
        words = [w + rng.choice(["", "", "s", "ly"]) for w in words]
        rows.append({"tokens": words, "tags": tags})
    return rows


def write_conll(path: Path, rows: list[dict]) -> Path:
    path.write_text("-DOCSTART- -X- O\n\n" + "".join("".join(f"{w} X {t}\n" for w, t in zip(r["tokens"], r["tags"])) + "\n"
                                                     for r in rows))
    return path


@pytest.fixture(scope="module")
def piece_model_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_pretrained(Encoder(ModelConfig(**{**TINY, "vocab_size": len(PIECES)})), tmp_path_factory.mktemp("pieces"),
                           tokenizer=WordPieceTokenizer(PIECES))


def test_tags_are_learned_at_each_words_first_sub_token(piece_model_dir, tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", tagged_rows(96, seed=1))
    dev = write_conll(tmp_path / "dev.conll", tagged_rows(30, seed=2))
    out = tmp_path / "out"
    assert run(piece_model_dir, train, dev, out, *FAST) == 0  # --task auto: "tokens" in the JSONL
    report = json.loads((out / "eval.json").read_text())
    gold = tagged_rows(30, seed=2)
    assert report["task"] == "tokens" and report["examples"] == 30 and report["words"] == sum(len(r["tokens"]) for r in gold)
    assert report["accuracy"] >= 0.95 and report["f1"] >= 0.9, report
    model, tokenizer, labels = load_classifier(out)
    assert type(model).__name__ == "TokenClassifier" and labels.names == ["B-NEG", "B-POS", "O"]
    from minibert.finetune.kinds.tags import read_tagged

    predicted = predict(model, tokenizer, read_tagged(dev), batch_size=4, max_len=64, device="cpu")
    rows = [line.split("\t") for line in (out / "predictions.tsv").read_text().splitlines()[1:]]
    assert [r[1] for r in rows] == [w for r in gold for w in r["tokens"]] and [r[3] for r in rows] == [t for r in gold for t in r["tags"]]
    assert [r[2] for r in rows] == [labels.names[i] for p in predicted for i in p]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NEUTRAL + POSITIVE), st.sampled_from(["", "s", "ly", "sly"])), min_size=1, max_size=12),
       st.integers(4, 20))
def test_word_inputs_read_each_tag_at_the_words_first_piece(words, max_len):
    from minibert.finetune.kinds.tags import TaggedData
    from minibert.finetune.kinds.tags import word_inputs
    from minibert.heads import IGNORE_INDEX

    tokenizer = WordPieceTokenizer(PIECES)
    words = [w + suffix for w, suffix in words]
    tags = list(range(len(words)))
    data = TaggedData(Path("t.jsonl"), [words], [[str(t) for t in tags]], [[1] * len(words)])
    inputs, starts = word_inputs(tokenizer, data, [0], max_len, [tags])
    ids, labels = inputs["input_ids"][0].tolist(), inputs["labels"][0].tolist()
    pieces = [tokenizer.tokenize_to_ids(w) for w in words]
    kept = len(starts[0])
    assert sum(len(p) for p in pieces[:kept]) + 2 <= max_len  # [CLS] words [SEP] fit
    assert kept == len(words) or sum(len(p) for p in pieces[:kept + 1]) + 2 > max_len  # only what does not fit is cut
    assert ids == [tokenizer.cls_id, *(i for p in pieces[:kept] for i in p), tokenizer.sep_id]
    assert starts[0] == [1 + sum(len(p) for p in pieces[:j]) for j in range(kept)]
    assert [labels[s] for s in starts[0]] == tags[:kept]
    assert sum(label != IGNORE_INDEX for label in labels) == kept  # later pieces, [CLS] and [SEP] are not read


def test_entities_and_tagging_scores_on_hand_computed_cases():
    from minibert.finetune.kinds.scores import entities, tagging_metrics

    assert entities(["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC"]) == {(0, 2, "PER"), (3, 6, "LOC")}
    assert entities(["O", "I-ORG", "I-ORG"]) == {(1, 3, "ORG")}  # a stray I- starts an entity, as conlleval reads it
    assert entities(["B-PER", "I-LOC", "B-PER", "B-PER"]) == {(0, 1, "PER"), (1, 2, "LOC"), (2, 3, "PER"), (3, 4, "PER")}
    labels = LabelMap(["B-LOC", "B-PER", "I-PER", "O"])
    gold, predicted = [[1, 2, 3, 0]], [[1, 3, 3, 0]]  # PER cut short: one entity right, one wrong, one missed
    assert tagging_metrics(predicted, gold, labels) == {"accuracy": 0.75, "words": 4, "f1": 0.5}
    assert tagging_metrics([[1, 2]], gold, labels) == {"accuracy": 1.0, "words": 2, "f1": 1.0}  # words cut by --max-len are not scored
    assert "f1" not in tagging_metrics([[0, 1]], [[0, 0]], LabelMap(["NOUN", "VERB"]))  # no BIO tags: no entities


@pytest.mark.parametrize("name, text, words", [
    ("lengths.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n', ["line 1", "2 tokens but 1 tags"]),
    ("strings.jsonl", '{"tokens": ["a"], "tags": [1]}\n', ["line 1", "two lists of strings"]),
    ("untagged.conll", "good B-POS\nmovie\n", ["untagged.conll line 2", "has no tag"]),
    ("blank.conll", "-DOCSTART- O\n\n", ["holds no sentences"]),
])
def test_bad_tagged_file_is_one_line(name, text, words, piece_model_dir, tmp_path, capsys):
    (tmp_path / name).write_text(text)
    good = write_jsonl(tmp_path / "good.jsonl", tagged_rows(4, seed=1))
    assert run(piece_model_dir, good, tmp_path / name, tmp_path / "out", "--task", "tokens") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(word in err for word in words), err


def test_a_rotary_model_fine_tunes_beyond_its_pretraining_length(toy, tmp_path):
    """Rotary positions have no table: --max-len may exceed what the model was pretrained on,
    and the fine-tuned model keeps the longer limit. A learned table cannot grow ("too long")."""
    torch.manual_seed(0)
    rotary = save_pretrained(Encoder(ModelConfig(**{**TINY, "position_encoding": "rotary", "max_positions": 8})),
                             tmp_path / "rotary", tokenizer=WordPieceTokenizer(VOCAB))
    assert run(rotary, *toy, tmp_path / "out", "--steps", "2", "--max-len", "24") == 0
    assert load_classifier(tmp_path / "out").model.config.max_positions == 24


def test_dropout_is_the_recipes_unless_asked(minibert_dir, toy, tmp_path):
    """The pretraining recipe trains without dropout; fine-tuning takes the recipe's (BERT's and
    ELECTRA's 0.1), not the checkpoint's 0, and --dropout sets it for fine-tuning alone."""
    assert TINY["hidden_dropout"] != DROPOUT
    assert run(minibert_dir, *toy, tmp_path / "same", "--steps", "2") == 0
    config = load_classifier(tmp_path / "same").model.config
    assert (config.hidden_dropout, config.attention_dropout) == (DROPOUT, DROPOUT)
    assert run(minibert_dir, *toy, tmp_path / "drop", "--steps", "2", "--dropout", "0.2") == 0
    config = load_classifier(tmp_path / "drop").model.config
    assert (config.hidden_dropout, config.attention_dropout) == (0.2, 0.2)


def test_saving_over_a_folder_removes_any_earlier_tokenizer(finetuned, tmp_path):
    """load_tokenizer takes the first tokenizer file it finds, so an earlier model's (here an
    ALBERT spiece.model) must not survive a save into the same folder."""
    classifier = load_classifier(finetuned)
    (tmp_path / "spiece.model").write_bytes(b"an earlier model's vocabulary")
    save_classifier(classifier.model, classifier.tokenizer, classifier.labels, tmp_path)
    assert not (tmp_path / "spiece.model").exists()
    assert type(load_classifier(tmp_path).tokenizer) is type(classifier.tokenizer)


def test_mean_pooling_learns_and_is_kept_with_the_model(minibert_dir, toy, tmp_path):
    """--pooling mean: the head reads the mean of the last layer; the saved model keeps it, and
    the loaded model's logits are the head applied to that mean, computed by hand."""
    out = tmp_path / "mean"
    assert run(minibert_dir, *toy, out, *FAST, "--pooling", "mean") == 0
    assert json.loads((out / "eval.json").read_text())["accuracy"] >= 0.9
    model, tokenizer, _ = load_classifier(out)
    assert model.pooling == "mean"
    batch = tokenizer.batch(["the movie was good", "bad"])
    with torch.no_grad():
        hidden = model.encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        by_hand = model.head((hidden * mask).sum(1) / mask.sum(1))
        torch.testing.assert_close(model(**batch).logits, by_hand)
    assert load_classifier(tmp_path / "mean").model.pooling == "mean"
    assert run(minibert_dir, *toy, tmp_path / "cls", "--steps", "2") == 0
    assert load_classifier(tmp_path / "cls").model.pooling == "cls"  # BERT's, the default


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4), extra=st.integers(1, 6), seed=st.integers(0, 99))
def test_mean_pooling_ignores_padding(lengths, extra, seed):
    """Padding a batch further changes no sequence's mean-pooled logits (nor its [CLS] logits)."""
    from minibert.heads import SequenceClassifier

    torch.manual_seed(seed)
    for pooling in ("mean", "cls"):
        model = SequenceClassifier(ModelConfig(**TINY), 3, pooling=pooling).eval()
        ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, n in enumerate(lengths):
            ids[row, :n] = torch.randint(5, len(VOCAB), (n,))
            mask[row, :n] = 1
        longer = torch.nn.functional.pad(ids, (0, extra)), torch.nn.functional.pad(mask, (0, extra))
        with torch.no_grad():
            torch.testing.assert_close(model(ids, mask).logits, model(*longer).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("flags, refused", [(["--pooling", "mean"], "--pooling is for sentence tasks"),
                                            (["--max-train-examples", "5"], "--max-train-examples subsamples sentence tasks")])
def test_a_sentence_task_flag_is_refused_for_a_tagging_task(flags, refused, piece_model_dir, tmp_path, capsys):
    """Refused in one line, not ignored: a tagging task reads every token's own vector and is never subsampled."""
    train = write_jsonl(tmp_path / "train.jsonl", tagged_rows(20, seed=1))
    dev = write_conll(tmp_path / "dev.conll", tagged_rows(10, seed=2))
    assert run(piece_model_dir, train, dev, tmp_path / "out", "--steps", "2", *flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and refused in err, err
    assert not (tmp_path / "out" / "eval.json").exists()


def test_with_tasks_a_tagging_folder_refuses_a_sentence_flag_before_anything_is_trained(piece_model_dir, toy, tmp_path, capsys):
    """The sentence folder comes first; the tagging folder's refusal must not wait for its turn."""
    sentiment, tags = tmp_path / "sentiment", tmp_path / "tags"
    sentiment.mkdir(), tags.mkdir()
    for path in toy:
        shutil.copy(path, sentiment / path.name)
    write_jsonl(tags / "train.jsonl", tagged_rows(20, seed=1)), write_conll(tags / "dev.conll", tagged_rows(10, seed=2))
    out = tmp_path / "out"
    assert main(["--init", str(piece_model_dir), "--tasks", str(sentiment), str(tags), "--out", str(out), "--device", "cpu",
                 "--steps", "2", "--max-train-examples", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-train-examples subsamples sentence tasks; the tagging task tags is never" in err, err
    assert not (out / "sentiment" / "eval.json").exists()


def test_a_checkpoint_whose_default_pooling_is_the_mean_still_tags_words(piece_model_dir, tmp_path, capsys):
    """The pooling a checkpoint's pretraining calls for is a sentence task's: a tagging task on a
    checkpoint pretrained without NSP/SOP is not refused for a --pooling it was never given, and
    no pooling line is printed."""
    init = shutil.copytree(piece_model_dir, tmp_path / "init")
    (init / "run.json").write_text(json.dumps({"settings": {"layout": "full_sentences"}}))
    train = write_jsonl(tmp_path / "train.jsonl", tagged_rows(20, seed=1))
    dev = write_conll(tmp_path / "dev.conll", tagged_rows(10, seed=2))
    assert run(init, train, dev, tmp_path / "out", "--steps", "2") == 0
    assert "pooling" not in capsys.readouterr().out
    assert json.loads((tmp_path / "out" / "eval.json").read_text())["args"]["pooling"] is None
