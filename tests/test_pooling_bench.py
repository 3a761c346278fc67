"""bench/pooling.py: the commands it runs and the table it reads back, on a run folder and
eval.json files written here (nothing is trained)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

from minibert.variants import VARIANTS, with_layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pooling", ROOT / "bench" / "pooling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments(tmp_path: Path, **changes) -> argparse.Namespace:
    return argparse.Namespace(**{"glue": str(tmp_path / "glue"), "out": str(tmp_path / "out"), "runs": None, "seeds": [0, 1],
                                 "page": None, "dry_run": False, **changes})


def test_every_run_is_fine_tuned_with_both_poolings_at_every_seed_and_distilbert_distils_the_bert_run(bench, tmp_path):
    args = arguments(tmp_path)
    planned = bench.runs(args)
    assert [run.name for run, _ in planned] == ["bert-600", "bert", "roberta", "albert", "electra", "distilbert"]
    assert planned[0][1][1:] == ["train.py", "--variant", "bert", "--steps", "600", "--out",
                                 str(tmp_path / "out" / "runs" / "bert-600"), "--resume"]
    assert "--teacher" in planned[-1][1] and planned[-1][1][planned[-1][1].index("--teacher") + 1] == str(planned[1][0])
    commands = [command for _, command in bench.finetunes(args, planned[0][0])]
    asked = {(c[c.index("--train") + 1].split("/")[-2], c[c.index("--pooling") + 1], c[c.index("--seed") + 1]) for c in commands}
    assert asked == {(task, pooling, seed) for task in ("SST-2", "RTE") for pooling in ("cls", "mean") for seed in ("0", "1")}
    assert all(("--max-train-examples" in c) == ("SST-2" in c[c.index("--train") + 1]) for c in commands)
    assert all(word.startswith(("OUT", "GLUE_DIR")) or str(tmp_path) not in word
               for c in commands for word in bench.shown(args, c).split())


def test_the_table_gives_the_recorded_sentence_accuracy_the_default_pooling_and_both_scores(bench, tmp_path):
    args = arguments(tmp_path)
    run = tmp_path / "out" / "runs" / "bert-600"
    run.mkdir(parents=True)
    settings = with_layout(VARIANTS["bert"], VARIANTS["bert"].default_settings())
    (run / "run.json").write_text(json.dumps({"settings": settings.to_dict()}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 600, "eval_nsp_accuracy": 0.731}) + "\n")
    for (pooling, seed), accuracy in {("cls", 0): 0.52, ("cls", 1): 0.55, ("mean", 0): 0.61, ("mean", 1): 0.62}.items():
        folder = bench.finetune_folder(args, run, "SST-2", 2000, pooling, seed)
        folder.mkdir(parents=True)
        (folder / "eval.json").write_text(json.dumps({"accuracy": accuracy}))
    rows = [line for line in bench.table(args) if line.startswith("| bert-600")]
    assert rows == ["| bert-600 | nsp 0.731 (step 600) | mean | SST-2 (2000) | 0.520 / 0.550 | 0.610 / 0.620 | +0.080 |"]
