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
from minibert.data.tasks import LabelMap, read_task
from minibert.data.wordpiece import WordPieceTokenizer
from minibert.finetune import classification_metrics, load_classifier, main, model_inputs, predict

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
    assert rows[0] == ["index", "prediction", "label"]
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
    from minibert.data.tasks import TaskData

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
    from minibert.data.tasks import TaskData

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
    "float label": (("float.jsonl", '{"text": "a", "label": 0.5}\n'), None, [], ["line 1", "regression"]),
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
    "too long": (None, None, ["--max-len", "999"], ["--max-len 999 exceeds the 64 positions"]),
    "diverging": (None, None, ["--lr", "1e30", "--steps", "10"], ["loss became NaN/Inf at step", "Lower --lr (now 1e+30)", "--skip-nonfinite"]),
    "steps and epochs": (None, None, ["--steps", "5", "--epochs", "1"], ["--epochs", "not allowed with", "--steps"]),
    "not a number": (None, None, ["--steps", "ten"], ["invalid int value: 'ten'"]),
    "fp16 on a cpu": (None, None, ["--precision", "fp16"], ["--precision fp16 needs a CUDA GPU", "use --precision bf16 or fp32"]),
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
