"""GLUE by name (`finetune --glue`): every task's own files, columns and labels, GLUE's metrics,
the two averages, several seeds, the submission files; and no text column silently dropped.

The files are written here in each task's layout as GLUE's download script leaves them (CoLA
without a header line, MRPC with a byte-order mark, MNLI's two dev and two test files, the
diagnostic set), a few rows each; the real six tasks are read too when ../shared is present.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

import pytest
import torch

from minibert import Encoder, ModelConfig, save_pretrained
from minibert.finetune import main, model_inputs
from minibert.finetune.glue.sweep import summary
from minibert.finetune.glue.tasks import GLUE_TASKS, present_tasks
from minibert.finetune.kinds.sentence_files import Columns, read_task
from minibert.tokenizers.wordpiece import WordPieceTokenizer
from minibert.variants import VARIANTS

from test_finetune import NEGATIVE, NEUTRAL, POSITIVE, TINY, VOCAB

STEPS = ["--steps", "1", "--batch-size", "8", "--device", "cpu"]


def sentence(rng: random.Random, word: str) -> str:
    return " ".join(rng.choices(NEUTRAL, k=2) + [word])


def layout(task: str, split: str, n: int, seed: int) -> tuple[str, list[tuple[str, str | None, str]]]:
    """A file of `task` in GLUE's layout (`split` train, dev or test: no labels), and its (text, pair, label) rows.
    The first text of every row is positive or negative by one word, the label follows it."""
    rng = random.Random(seed)
    names = GLUE_TASKS[task].labels or [0, 1]
    rows = []
    for i in range(n):
        good = i % 2 == 0
        label = str(names[0 if good else 1]) if task != "STS-B" else f"{4.5 if good else 0.5:.3f}"
        rows.append((sentence(rng, rng.choice(POSITIVE if good else NEGATIVE)), sentence(rng, "the"), label))
    test = split == "test"

    def lines(header, cells):
        body = ["\t".join(cells(i, a, b, y)) for i, (a, b, y) in enumerate(rows)]
        return "".join(line + "\n" for line in ([] if header is None else ["\t".join(header)]) + body)

    if task == "CoLA":
        text = (lines(["index", "sentence"], lambda i, a, b, y: [str(i), a]) if test else
                lines(None, lambda i, a, b, y: ["gj04", y, "" if y == "1" else "*", a]))  # no header line
        return text, [(a, None, y) for a, b, y in rows]
    if task == "SST-2":
        return lines(["index", "sentence"] if test else ["sentence", "label"],
                     lambda i, a, b, y: [str(i), a] if test else [a, y]), [(a, None, y) for a, b, y in rows]
    if task == "MRPC":
        first = "index" if test else "Quality"
        text = lines([first, "#1 ID", "#2 ID", "#1 String", "#2 String"],
                     lambda i, a, b, y: [str(i) if test else y, str(100 + i), str(200 + i), a, b])
        return ("" if test else "\ufeff") + text, rows
    if task == "STS-B":
        header = ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2"]
        return lines(header + [] if test else header + ["score"],
                     lambda i, a, b, y: [str(i), "main-news", "headlines", "2015", str(i), "none", "none", a, b] + ([] if test else [y])), rows
    if task == "QQP":
        header = ["id", "question1", "question2"] if test else ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
        return lines(header, lambda i, a, b, y: [str(i), a, b] if test else [str(i), str(2 * i), str(2 * i + 1), a, b, y]), rows
    if task == "MNLI":
        parses = ["sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse", "sentence2_parse"]
        header = ["index", "promptID", "pairID", "genre", *parses, "sentence1", "sentence2"] + ([] if test else ["label1", "gold_label"])
        return lines(header, lambda i, a, b, y: [str(i), str(i), f"{i}e", "fiction", f"( {a} )", f"( {b} )", f"(S {a})", f"(S {b})", a, b]
                     + ([] if test else [y, y])), rows
    if task == "QNLI":
        return lines(["index", "question", "sentence"] + ([] if test else ["label"]),
                     lambda i, a, b, y: [str(i), a, b] + ([] if test else [y])), rows
    return lines(["index", "sentence1", "sentence2"] + ([] if test else ["label"]),  # RTE, WNLI
                 lambda i, a, b, y: [str(i), a, b] + ([] if test else [y])), rows


def seed_of(file: str) -> int:
    return sum(map(ord, file))  # each file its own rows


def write_glue(folder: Path, n_train: int = 12, n_dev: int = 6, n_test: int = 5) -> Path:
    """Every GLUE task in its layout, its test files and the diagnostic set included."""
    for name, task in GLUE_TASKS.items():
        (folder / name).mkdir(parents=True)
        files = {"train.tsv": ("train", n_train), task.dev: ("dev", n_dev),
                 **({task.mismatched: ("dev", n_dev)} if task.mismatched else {}), **{test: ("test", n_test) for test, _ in task.tests}}
        for file, (split, n) in files.items():
            (folder / name / file).write_text(layout(name, split, n, seed=seed_of(file))[0], encoding="utf-8")
    (folder / "diagnostic").mkdir()
    (folder / "diagnostic" / "diagnostic.tsv").write_text(layout("RTE", "test", 4, seed=9)[0])
    return folder


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory) -> Path:
    return write_glue(tmp_path_factory.mktemp("glue_data"))


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path_factory.mktemp("tiny"), tokenizer=WordPieceTokenizer(VOCAB))


# --- every layout reads its own columns ---------------------------------------------------------


@pytest.mark.parametrize("task", list(GLUE_TASKS))
def test_every_glue_layout_reads_each_text_and_label_it_was_written_with(task, glue_dir):
    spec = GLUE_TASKS[task]
    for file, split in [("train.tsv", "train"), (spec.dev, "dev"), (spec.tests[0][0], "test")]:
        data = read_task(glue_dir / task / file, labelled=split != "test",
                         columns=spec.columns._replace(names=None) if split == "test" else spec.columns)
        rows = layout(task, split, len(data), seed=seed_of(file))[1]
        assert data.texts == [a for a, _, _ in rows]  # QNLI: the question, MRPC: #1 String, CoLA: the sentence
        assert data.pairs == (None if rows[0][1] is None else [b for _, b, _ in rows])
        if split != "test":
            assert data.labels == [y for _, _, y in rows]


def test_a_qnli_style_file_outside_glue_is_refused_until_its_text_columns_are_named(tmp_path, tiny_dir, capsys):
    """The bug this guards: `question` passed over, QNLI trained on `sentence` alone."""
    train = tmp_path / "train.tsv"
    train.write_text(layout("QNLI", "train", 8, seed=1)[0])
    with pytest.raises(ValueError, match="question would not be read.*--text-columns question sentence"):
        read_task(train)
    data = read_task(train, columns=Columns(("question", "sentence")))
    assert data.texts[0] != data.pairs[0] and any(word in data.texts[0] for word in POSITIVE + NEGATIVE)
    argv = ["--init", str(tiny_dir), "--train", str(train), "--dev", str(train), "--out", str(tmp_path / "out"), *STEPS]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "question" in err and "--text-columns" in err and "Traceback" not in err
    assert main([*argv, "--text-columns", "question", "sentence"]) == 0
    # the files the existing readers take still read: ids, genres and STS-B's bookkeeping are passed over
    read_task(glue_dir_file(tmp_path, "STS-B"))


def glue_dir_file(folder: Path, task: str) -> Path:
    path = folder / f"{task}.tsv"
    path.write_text(layout(task, "dev", 4, seed=0)[0])
    return path


def test_a_missing_task_is_skipped_with_one_line(tmp_path, capsys):
    folder = tmp_path / "glue"
    (folder / "RTE").mkdir(parents=True)
    (folder / "RTE" / "train.tsv").write_text(layout("RTE", "train", 4, seed=0)[0])
    (folder / "RTE" / "dev.tsv").write_text(layout("RTE", "dev", 4, seed=1)[0])
    assert [task.name for task in present_tasks(folder, ["RTE", "QQP"])] == ["RTE"]
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("QQP: skipped")


def test_a_task_without_its_test_file_says_it_gets_no_submission_file(tmp_path, capsys):
    from minibert.finetune.glue.tasks import write_submission

    (tmp_path / "glue" / "RTE").mkdir(parents=True)  # train and dev only, as the shipped RTE
    assert write_submission([GLUE_TASKS["RTE"]], {"RTE": {"median_seed": 0}}, tmp_path / "glue", tmp_path / "out",
                            None, "cpu", None) == {}
    assert "RTE: no test.tsv in " in capsys.readouterr().out and not (tmp_path / "out").exists()


def test_the_median_seed_is_the_middle_of_the_task_scores():
    scores = {0: {"f1": 0.9, "accuracy": 0.8}, 1: {"f1": 0.5, "accuracy": 0.6}, 2: {"f1": 0.7, "accuracy": 0.7}, 3: {"f1": 0.1, "accuracy": 0.2}}
    from minibert.finetune.settings import FinetuneSettings

    args = FinetuneSettings(lr=2e-5, weight_decay=0.01, dropout=0.1, batch_size=32, epochs=3.0)
    result = summary(GLUE_TASKS["MRPC"], scores, args)
    assert result["metrics"]["f1"] == {"median": 0.6, "min": 0.1, "max": 0.9, "seeds": {str(s): v["f1"] for s, v in scores.items()}}
    assert result["median_seed"] == 1  # task scores 0.85, 0.55, 0.7, 0.15: the lower middle of four is 0.55
    assert result["recipe"]["epochs"] == 3.0 and result["recipe"]["lr"] == 2e-5


# --- the command end to end ------------------------------------------------------------------------


def test_glue_runs_every_task_per_seed_and_writes_the_table_the_json_and_the_submission(glue_dir, tiny_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--init", str(tiny_dir), "--glue", str(glue_dir), "--seeds", "0", "1", "--max-train-examples", "8",
                 "--out", str(out), *STEPS]) == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "glue.json").read_text())
    assert list(result["tasks"]) == list(GLUE_TASKS) and result["seeds"] == [0, 1]
    for name, task in GLUE_TASKS.items():
        metrics = result["tasks"][name]["metrics"]
        assert list(metrics) == list(task.metrics)
        for seed in (0, 1):
            report = json.loads((out / name / f"seed-{seed}" / "eval.json").read_text())
            assert report["args"]["seed"] == seed and report["steps"] == 1
            for metric, value in metrics.items():
                assert value["seeds"][str(seed)] == report[metric]
        for value in metrics.values():
            assert value["median"] == statistics.median(value["seeds"].values())
        assert f"training on 8 of the 12 examples" in printed
    medians = {name: {m: v["median"] for m, v in task["metrics"].items()} for name, task in result["tasks"].items()}
    electra, glue = result["averages"]["electra_dev"], result["averages"]["glue_score"]
    assert electra["tasks"] == [n for n in GLUE_TASKS if n != "WNLI"] and not electra["missing"]
    assert electra["score"] == pytest.approx(100 * statistics.mean(
        medians[n][GLUE_TASKS[n].electra] for n in electra["tasks"]))
    assert glue["score"] == pytest.approx(100 * statistics.mean(statistics.mean(m.values()) for m in medians.values()))
    assert "ELECTRA's dev average" in printed and "GLUE score" in printed and "| MNLI | accuracy_mismatched |" in printed

    expected = {"CoLA": 5, "SST-2": 5, "MRPC": 5, "STS-B": 5, "QQP": 5, "MNLI-m": 5, "MNLI-mm": 5, "QNLI": 5, "RTE": 5, "WNLI": 5, "AX": 4}
    assert sorted(path.stem for path in (out / "submission").iterdir()) == sorted(expected)
    for name, rows in expected.items():
        lines = (out / "submission" / f"{name}.tsv").read_text().splitlines()
        assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(rows)]
        predictions = {line.split("\t")[1] for line in lines[1:]}
        if name in ("MNLI-m", "MNLI-mm", "AX"):
            assert predictions <= {"entailment", "neutral", "contradiction"}
        elif name in ("QNLI", "RTE"):
            assert predictions <= {"entailment", "not_entailment"}
        elif name == "STS-B":
            assert all(float(p) == float(p) for p in predictions)
        else:
            assert predictions <= {"0", "1"}



def test_under_torchrun_only_the_first_process_writes_the_sweep_s_files(glue_dir, tiny_dir, tmp_path, monkeypatch):
    """Every process trains each run (DDP); glue.json, the submission files and MNLI's mismatched
    predictions, and the test-set predictions behind them, are the first process's alone. Here the
    sweep runs as process 1 of 2."""
    import minibert.finetune.run as finetune_run
    from minibert.operations.distributed import Distributed

    monkeypatch.setattr(finetune_run.distributed, "setup", lambda *_, **__: Distributed(rank=1, world_size=2))
    out = tmp_path / "out"
    assert main(["--init", str(tiny_dir), "--glue", str(glue_dir), "--glue-tasks", "SST-2", "MNLI", "--out", str(out), *STEPS]) == 0
    assert (out / "SST-2" / "seed-0" / "eval.json").is_file()  # the run itself (one process here: it writes)
    assert not (out / "glue.json").exists() and not (out / "submission").exists()
    assert not (out / "MNLI" / "seed-0" / "predictions_mismatched.tsv").exists()  # MNLI's second dev set: scored, not written


def test_a_sweep_holding_an_unfinished_run_is_refused_before_anything_is_trained(glue_dir, tiny_dir, tmp_path, capsys):
    """An interrupted run's checkpoints in the second task's folder: without --resume refused in one
    line up front (as --tasks is), the first task not trained."""
    out = tmp_path / "out"
    (out / "SST-2" / "seed-0" / "checkpoints" / "step-00000010").mkdir(parents=True)
    assert main(["--init", str(tiny_dir), "--glue", str(glue_dir), "--glue-tasks", "CoLA", "SST-2", "--out", str(out), *STEPS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SST-2" in err and "--resume" in err and "--overwrite" in err, err
    assert not (out / "CoLA").exists()


def test_a_sweep_run_again_with_more_seeds_trains_only_the_missing_runs(glue_dir, tiny_dir, tmp_path, capsys):
    out, tasks = tmp_path / "out", ["--glue-tasks", "RTE", "MNLI"]
    argv = ["--init", str(tiny_dir), "--glue", str(glue_dir), *tasks, "--out", str(out), *STEPS]
    assert main([*argv, "--seeds", "0"]) == 0
    first = json.loads((out / "glue.json").read_text())
    model = out / "RTE" / "seed-0" / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    capsys.readouterr()
    assert main([*argv, "--seeds", "0", "1"]) == 0
    printed = capsys.readouterr().out
    assert "RTE seed 0: finished earlier" in printed and "MNLI seed 0: finished earlier" in printed
    assert "RTE seed 1: dev" in printed and model.stat().st_mtime_ns == stamp  # seed 0 read back, not retrained
    again = json.loads((out / "glue.json").read_text())
    for task in ("RTE", "MNLI"):
        for metric, value in first["tasks"][task]["metrics"].items():
            assert again["tasks"][task]["metrics"][metric]["seeds"]["0"] == value["seeds"]["0"]
        assert set(again["tasks"][task]["metrics"]["accuracy"]["seeds"]) == {"0", "1"}
    assert main([*argv, "--seeds", "0", "--lr", "1e-3"]) == 2  # other settings: refused, nothing replaced
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "other settings (--lr)" in err and "--overwrite" in err and model.stat().st_mtime_ns == stamp
    assert main([*argv, "--glue-tasks", "RTE", "--seeds", "0", "--lr", "1e-3", "--overwrite"]) == 0  # as the refusal says
    assert "RTE seed 0: dev" in capsys.readouterr().out and model.stat().st_mtime_ns != stamp

# --- every family on a pair task -----------------------------------------------------------------

HF = {  # family -> (transformers config class, model class, sizes and extras)
    "bert": ("BertConfig", "BertModel", {}),
    "roberta": ("RobertaConfig", "RobertaModel", {"pad_token_id": 1, "max_position_embeddings": 66, "type_vocab_size": 1}),
    "albert": ("AlbertConfig", "AlbertModel", {"embedding_size": 16}),
    "distilbert": ("DistilBertConfig", "DistilBertModel", {}),
    "electra": ("ElectraConfig", "ElectraModel", {"embedding_size": 32}),
}


def family_dir(family: str, source: str, folder: Path) -> Path:
    torch.manual_seed(0)
    if source == "minibert":
        fields = {**TINY, **{k: v for k, v in VARIANTS[family].model_fields.items() if k != "embedding_size"}}
        return save_pretrained(Encoder(ModelConfig(**fields)), folder, tokenizer=WordPieceTokenizer(VOCAB))
    transformers = pytest.importorskip("transformers")
    config_class, model_class, extra = HF[family]
    sizes = ({"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64} if family == "distilbert" else
             {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64})
    config = getattr(transformers, config_class)(vocab_size=len(VOCAB), **{"max_position_embeddings": 64, **sizes, **extra})
    getattr(transformers, model_class)(config).save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    return folder


@pytest.mark.parametrize("source", ["minibert", "hugging face"])
@pytest.mark.parametrize("family", list(HF))
def test_every_family_fine_tunes_on_a_pair_task_with_both_texts(family, source, glue_dir, tmp_path):
    init = family_dir(family, source, tmp_path / "init")
    assert main(["--init", str(init), "--glue", str(glue_dir), "--glue-tasks", "qnli", "--out", str(tmp_path / "out"), *STEPS]) == 0
    from minibert.finetune import load_classifier

    model, tokenizer, _ = load_classifier(tmp_path / "out" / "QNLI" / "seed-0")
    data = read_task(glue_dir / "QNLI" / "dev.tsv", columns=GLUE_TASKS["QNLI"].columns)
    inputs = model_inputs(tokenizer, model.config, data, [0], 64)
    ids = inputs["input_ids"][0].tolist()
    question, answer = (tokenizer.batch([text])["input_ids"][0][1:-1].tolist() for text in (data.texts[0], data.pairs[0]))
    assert ids[1:1 + len(question)] == question  # segment A is the question ...
    separators = ids.count(VOCAB.index("[SEP]"))
    assert ids[len(question) + 2:len(question) + 2 + len(answer)] == answer and separators == 2  # ... and B the sentence
    one_segment = model.config.type_vocab_size < 2  # RoBERTa, DistilBERT: the separators alone tell A from B
    assert (inputs["token_type_ids"][0].sum() == 0) == one_segment


# --- the six real tasks, when ../shared is here ------------------------------------------------------

REAL = {"CoLA": (8551, 1043, 1063), "SST-2": (67349, 872, None), "MRPC": (3668, 408, 1725), "STS-B": (5749, 1500, 1379),
        "RTE": (2490, 277, None), "WNLI": (635, 71, 146)}


@pytest.mark.parametrize("task", list(REAL))
def test_the_six_shipped_tasks_read_in_full_with_their_label_sets(task, datasets_dir):
    spec, (n_train, n_dev, n_test) = GLUE_TASKS[task], REAL[task]
    folder = datasets_dir / "glue" / task
    train, dev = (read_task(folder / file, columns=spec.columns) for file in ("train.tsv", "dev.tsv"))
    assert (len(train), len(dev)) == (n_train, n_dev)
    assert (train.pairs is None) == (len(spec.columns.texts) == 1)
    if spec.labels is None:
        assert all(0 <= float(label) <= 5 for label in train.labels + dev.labels)
    else:
        assert {label for label in train.labels + dev.labels} == {str(name) for name in spec.labels}
    if n_test:
        assert len(read_task(folder / "test.tsv", labelled=False, columns=spec.columns._replace(names=None))) == n_test
