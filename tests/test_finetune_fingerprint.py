"""Fine-tuning's fingerprint: every task kind, fine-tuned for a few steps with every setting pinned,
must give the weights, scores, files, predictions and printed lines recorded in
tests/finetune_fingerprint.json, so that a change of structure is seen to change nothing a user gets.

Each kind runs through the public entry points alone (`python train.py finetune`'s `main`, `python
-m minibert predict`'s `main`, `load_classifier(...).predict`) on a tiny WordPiece model, in fp32,
without dropout, seed 0, one thread: sentences (one text, and pairs with `--tasks` beside a
regression folder), a tag per word, SQuAD 1.1 and 2.0 spans, and a sentence and a span student of
`--teacher`. What is held: eval.json (but its seconds), metrics.jsonl (but its clocks), the names of
the files in OUT, every parameter (its sum and its dot product with a fixed random vector), each
prediction file (of an n-best list its length and best three), `Classifier.predict`'s answers, and
stdout's lines (paths written as OUT). Numbers
are held to a relative 1e-4 (printed ones to their last digit), everything else exactly.

    MINIBERT_RECORD_FINGERPRINT=1 python -m pytest tests/test_finetune_fingerprint.py   # record it anew

Record it only when a change is meant to change what a user gets, and say so in the commit.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from minibert import Encoder, ModelConfig, save_pretrained
from minibert.finetune import load_classifier
from minibert.finetune import main as finetune
from minibert.tokenizers.wordpiece import WordPieceTokenizer
from minibert.tools.commands import main as command

RECORD = Path(__file__).with_name("finetune_fingerprint.json")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
GOOD, BAD = ["good", "great", "fine"], ["bad", "awful", "poor"]
FILLER = ["the", "a", "movie", "film", "was", "is", "plot", "very"]
QA_WORDS = ["who", "wrote", "it", "?", "book", "written", "by", "ann", "smith", "in", "1990", "when", "what", "read",
            "long", "time", "ago", ".", "and", "then", "some", "more", "words"]
VOCAB = SPECIALS + GOOD + BAD + FILLER + QA_WORDS + ["##s", "##ly", ","]
PINNED = ["--device", "cpu", "--precision", "fp32", "--dropout", "0", "--seed", "0", "--batch-size", "8", "--lr", "3e-3",
          "--warmup", "0.25"]
REL, ABS = 1e-4, 1e-6  # numbers of the files and the weights
PRINTED_REL, PRINTED_ABS = 1e-3, 1.5e-4  # numbers printed with four decimals


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- the data ---------------------------------------------------------------------------------------


def sentence(rng: random.Random, word: str) -> str:
    words = rng.choices(FILLER, k=rng.randint(2, 5))
    words.insert(rng.randint(0, len(words)), word)
    return " ".join(words)


def sentences(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(sentence(rng, rng.choice(GOOD if i % 2 else BAD)), "positive" if i % 2 else "negative") for i in range(n)]


def write_tsv(path: Path, header: list[str], rows) -> Path:
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(row) + "\n" for row in rows))
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def pairs(n: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed + 7)
    return [(str(i), " ".join(rng.choices(FILLER, k=3)), text, label) for i, (text, label) in enumerate(sentences(n, seed))]


def scores(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    values = {"awful": 0.5, "bad": 1.25, "poor": 2.0, "fine": 3.0, "good": 3.75, "great": 4.5}
    return [{"sentence": sentence(rng, word), "label": values[word]} for word in (list(values)[i % 6] for i in range(n))]


def tagged(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = rng.choices(FILLER + GOOD + BAD, k=rng.randint(3, 7))
        tags = ["B-POS" if w in GOOD else "B-NEG" if w in BAD else "O" for w in words]
        rows.append({"tokens": [w + rng.choice(["", "", "s", "ly"]) for w in words], "tags": tags})
    return rows


def write_conll(path: Path, rows: list[dict]) -> Path:
    path.write_text("-DOCSTART- -X- O\n\n" + "".join("".join(f"{w} X {t}\n" for w, t in zip(r["tokens"], r["tags"])) + "\n"
                                                     for r in rows))
    return path


SENTENCES = ["The book was written by Ann Smith in 1990.", "It was a long time ago.", "And then some more words.",
             "Smith wrote the book."]
QUESTIONS = [("Who wrote the book?", "Ann Smith"), ("When was it written?", "1990"), ("What was it?", "a long time ago")]


def squad(path: Path, impossible: bool) -> Path:
    data, n = [], 0
    for article in range(2):
        paragraphs = []
        for shift in range(3):
            context = " ".join(SENTENCES[shift:] + SENTENCES[:shift])
            qas = []
            for question, answer in QUESTIONS:
                n += 1
                qas.append({"id": f"q{n}", "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]})
            if impossible:
                n += 1
                qas.append({"id": f"q{n}", "question": "Who read it?", "answers": [], "is_impossible": True})
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"article {article}", "paragraphs": paragraphs})
    path.write_text(json.dumps({"version": "v2.0" if impossible else "1.1", "data": data}))
    return path


# --- what a run leaves, as numbers and text ----------------------------------------------------------


def normal(value, root: Path):
    """A JSON value with the run's folder written as OUT and tuples as lists."""
    if isinstance(value, dict):
        return {key: normal(item, root) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [normal(item, root) for item in value]
    if isinstance(value, str):
        return value.replace(str(root), "OUT")
    return value


def weights(folder: Path) -> dict:
    """Each parameter's sum and its dot product with a fixed random vector: any change to a weight moves one."""
    found = {}
    with safe_open(str(folder / "model.safetensors"), framework="pt") as tensors:
        for name in sorted(tensors.keys()):
            tensor = tensors.get_tensor(name).double().flatten()
            direction = torch.randn(tensor.numel(), generator=torch.Generator().manual_seed(tensor.numel()), dtype=torch.float64)
            found[name] = [float(tensor.sum()), float(tensor @ direction)]
    return found


def table(path: Path) -> list[list]:
    """A TSV's cells, numbers as numbers."""
    def cell(text: str):
        try:
            return float(text)
        except ValueError:
            return text
    return [[cell(text) for text in line.split("\t")] for line in path.read_text().splitlines()]


def left(out: Path, root: Path) -> dict:
    """What a fine-tune left in `out`."""
    report = json.loads((out / "eval.json").read_text())
    report.pop("seconds")
    log = [{key: value for key, value in json.loads(line).items() if key not in ("elapsed_s", "tokens_per_s")}
           for line in (out / "metrics.jsonl").read_text().splitlines()]
    files = {"eval.json": normal(report, root), "metrics.jsonl": log, "names": sorted(p.relative_to(out).as_posix() for p in out.rglob("*")),
             "weights": weights(out)}
    for name in ("predictions.tsv", "labels.json", "predictions.json", "null_odds.json"):
        if (out / name).is_file():
            files[name] = table(out / name) if name.endswith(".tsv") else json.loads((out / name).read_text())
    if (out / "nbest_predictions.json").is_file():  # each question's list: its length and its best three entries
        nbest = json.loads((out / "nbest_predictions.json").read_text())
        files["nbest_predictions.json"] = {qid: [len(entries), entries[:3]] for qid, entries in nbest.items()}
    return files


def printed(text: str, root: Path) -> list[str]:
    return [line.replace(str(root), "OUT") for line in text.splitlines() if line.strip()]


def fingerprint(tmp_path: Path, capsys) -> dict:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=len(VOCAB), hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64,
                         initializer_range=0.1)
    backbone = save_pretrained(Encoder(config), tmp_path / "backbone", tokenizer=WordPieceTokenizer(VOCAB))
    data = tmp_path / "data"
    for name in ("sentences", "pairs", "scores", "tags"):
        (data / name).mkdir(parents=True)
    write_tsv(data / "sentences" / "train.tsv", ["sentence", "label"], sentences(48, 1))
    write_tsv(data / "sentences" / "dev.tsv", ["sentence", "label"], sentences(20, 2))
    write_tsv(data / "pairs" / "train.tsv", ["index", "sentence1", "sentence2", "label"], pairs(48, 3))
    write_tsv(data / "pairs" / "dev.tsv", ["index", "sentence1", "sentence2", "label"], pairs(20, 4))
    write_jsonl(data / "scores" / "train.jsonl", scores(48, 5))
    write_jsonl(data / "scores" / "dev.jsonl", scores(18, 6))
    write_conll(data / "tags" / "train.conll", tagged(40, 7))
    write_jsonl(data / "tags" / "dev.jsonl", tagged(16, 8))
    squad1, squad2 = squad(data / "squad1.json", False), squad(data / "squad2.json", True)
    qa = ["--max-len", "32", "--doc-stride", "8"]
    runs = {  # name -> (flags, the folders it writes)
        "sentences": (["--train", str(data / "sentences" / "train.tsv"), "--dev", str(data / "sentences" / "dev.tsv"),
                       "--steps", "6", "--eval-every", "3", "--max-len", "16"], [""]),
        "tasks": (["--tasks", str(data / "pairs"), str(data / "scores"), "--steps", "5", "--max-len", "24"], ["pairs", "scores"]),
        "tags": (["--train", str(data / "tags" / "train.conll"), "--dev", str(data / "tags" / "dev.jsonl"), "--steps", "5",
                  "--max-len", "16"], [""]),
        "squad1": (["--train", str(squad1), "--dev", str(squad1), "--steps", "5", *qa], [""]),
        "squad2": (["--train", str(squad2), "--dev", str(squad2), "--steps", "5", "--eval-every", "epoch", *qa], [""]),
        "student": (["--train", str(data / "sentences" / "train.tsv"), "--dev", str(data / "sentences" / "dev.tsv"), "--steps", "4",
                     "--max-len", "16", "--teacher", str(tmp_path / "sentences"), "--alpha", "0.7"], [""]),
        "squad-student": (["--train", str(squad1), "--dev", str(squad1), "--steps", "4", *qa, "--teacher", str(tmp_path / "squad1")],
                          [""]),
    }
    found = {}
    capsys.readouterr()
    for name, (flags, folders) in runs.items():
        out = tmp_path / name
        assert finetune(["--init", str(backbone), "--out", str(out), *PINNED, *flags]) == 0, name
        found[name] = {"stdout": printed(capsys.readouterr().out, tmp_path),
                       **{folder or "out": left(out / folder, tmp_path) for folder in folders}}
    predictions = {  # name -> (the model, the file, extra flags, the file to write)
        "sentences": (tmp_path / "sentences", data / "sentences" / "dev.tsv", [], "p.tsv"),
        "pairs": (tmp_path / "tasks" / "pairs", data / "pairs" / "dev.tsv", [], "p.tsv"),
        "scores": (tmp_path / "tasks" / "scores", data / "scores" / "dev.jsonl", [], "p.tsv"),
        "tags": (tmp_path / "tags", data / "tags" / "dev.jsonl", [], "p.tsv"),
        "squad1": (tmp_path / "squad1", squad1, [], "p.tsv"),
        "squad2": (tmp_path / "squad2", squad2, ["--null-threshold", "0.5"], "p.json"),
    }
    found["predict"] = {}
    for name, (model, file, flags, written) in predictions.items():
        target = tmp_path / f"predict-{name}-{written}"
        assert command(["predict", str(model), str(file), "--out", str(target), "--precision", "fp32", "--device", "cpu",
                        *flags]) == 0, name
        found["predict"][name] = {"stdout": printed(capsys.readouterr().out, tmp_path),
                                  "file": table(target) if written.endswith(".tsv") else json.loads(target.read_text())}
    rows = {"sentences": ["the movie was good", "a bad film"], "pairs": [("the plot", "very good"), ("a film", "awful")],
            "scores": ["the plot was great", "poor movie"], "tags": [["the", "goods", "movie"], ["bad", "plot"]],
            "squad2": [("Who wrote the book?", " ".join(SENTENCES)), ("Who read it?", " ".join(SENTENCES))]}
    models = {"sentences": "sentences", "pairs": "tasks/pairs", "scores": "tasks/scores", "tags": "tags", "squad2": "squad2"}
    found["python"] = {name: normal(load_classifier(tmp_path / models[name]).predict(given, precision="fp32"), tmp_path)
                       for name, given in rows.items()}
    return found


# --- holding it ---------------------------------------------------------------------------------------

NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def differences(recorded, now, where: str = "") -> list[str]:
    """Where `now` differs from `recorded`: numbers beyond the tolerance, anything else at all."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        if recorded.keys() != now.keys():
            return [f"{where}: keys {sorted(set(recorded) ^ set(now))} differ"]
        return [d for key in recorded for d in differences(recorded[key], now[key], f"{where}/{key}")]
    if isinstance(recorded, list) and isinstance(now, list):
        if len(recorded) != len(now):
            return [f"{where}: {len(recorded)} items recorded, {len(now)} now"]
        return [d for n, (a, b) in enumerate(zip(recorded, now)) for d in differences(a, b, f"{where}[{n}]")]
    if isinstance(recorded, float) or isinstance(now, float):
        if isinstance(recorded, (int, float)) and isinstance(now, (int, float)) and not isinstance(now, bool) and \
                (recorded == now or math.isclose(recorded, now, rel_tol=REL, abs_tol=ABS)):
            return []
        return [f"{where}: {recorded!r} recorded, {now!r} now"]
    if isinstance(recorded, str) and isinstance(now, str) and "/stdout" in where:
        return [] if same_line(recorded, now) else [f"{where}: {recorded!r} recorded, {now!r} now"]
    return [] if recorded == now and type(recorded) is type(now) else [f"{where}: {recorded!r} recorded, {now!r} now"]


def same_line(recorded: str, now: str) -> bool:
    """The same words, and the same numbers to their printed precision."""
    if NUMBER.sub("#", recorded) != NUMBER.sub("#", now):
        return False
    return all(math.isclose(float(a), float(b), rel_tol=PRINTED_REL, abs_tol=PRINTED_ABS)
               for a, b in zip(NUMBER.findall(recorded), NUMBER.findall(now)))


def test_every_task_kind_fine_tunes_predicts_and_prints_as_recorded(tmp_path, capsys):
    now = json.loads(json.dumps(fingerprint(tmp_path, capsys)))  # as the file holds it: tuples as lists
    if os.environ.get("MINIBERT_RECORD_FINGERPRINT") == "1":
        RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {RECORD.name}")
    found = differences(json.loads(RECORD.read_text()), now)
    assert not found, f"{len(found)} differences from {RECORD.name}, the first: " + "; ".join(found[:12])


def test_the_fingerprint_sees_a_changed_weight_a_changed_score_and_a_changed_line():
    recorded = json.loads(RECORD.read_text())
    weight = json.loads(json.dumps(recorded))
    name = next(iter(weight["squad1"]["out"]["weights"]))
    weight["squad1"]["out"]["weights"][name][1] *= 1 + 1e-3
    score = json.loads(json.dumps(recorded))
    score["tasks"]["scores"]["eval.json"]["pearson"] += 1e-3
    line = json.loads(json.dumps(recorded))
    line["tags"]["stdout"][-1] = line["tags"]["stdout"][-1].replace("dev", "held-out", 1)
    for changed in (weight, score, line):
        assert differences(recorded, changed)
    assert not differences(recorded, json.loads(json.dumps(recorded)))
