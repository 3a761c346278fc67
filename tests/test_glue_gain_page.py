"""bench/glue_gain.py's page: what it reads from the sweeps' glue.json, and its verdict on the
learner's hour (both medians at least the bar, every pretraining seed ahead)."""

from __future__ import annotations

import argparse
import importlib.util
import json

import pytest

from tiny_run import REPO

spec = importlib.util.spec_from_file_location("glue_gain", REPO / "bench" / "glue_gain.py")
glue_gain = importlib.util.module_from_spec(spec)
spec.loader.exec_module(glue_gain)

METRICS = dict(CoLA="mcc", **{"SST-2": "accuracy"}, MRPC="f1", **{"STS-B": "spearman"}, RTE="accuracy")


def checkpoint(average_gain: float, sst2_gain: float) -> dict:
    """One checkpoint's glue.json as the sweep writes it (gains of tasks as fractions, of averages in points)."""
    tasks = {task: {metric: {"median": (sst2_gain if task == "SST-2" else 1.0) / 100}} for task, metric in METRICS.items()}
    return {"averages": {"electra_dev": {"score": 40 + average_gain}}, "untrained": {"averages": {"electra_dev": {"score": 40.0}}},
            "gains": {"tasks": tasks, "averages": {"electra_dev": {"median": average_gain}}}}


def several(pairs: list[tuple[float, float]]) -> dict:
    """Several checkpoints' glue.json: each one's, and their gains across pretraining seeds."""
    checkpoints = {f"hour-seed{i}": checkpoint(*pair) for i, pair in enumerate(pairs)}
    samples = lambda get: {name: get(c) for name, c in checkpoints.items()}
    tasks = {task: {metric: {"checkpoints": samples(lambda c: c["gains"]["tasks"][task][metric]["median"])}}
             for task, metric in METRICS.items()}
    average = {"checkpoints": samples(lambda c: c["gains"]["averages"]["electra_dev"]["median"]), "low": 1.0, "high": 9.0}
    return {"checkpoints": checkpoints, "gains": {"tasks": tasks, "averages": {"electra_dev": average}}}


def page_of(tmp_path, hour: dict) -> str:
    (tmp_path / "glue" / "hour").mkdir(parents=True)
    (tmp_path / "glue" / "hour" / "glue.json").write_text(json.dumps(hour))
    args = argparse.Namespace(glue="GLUE", out=str(tmp_path), only=list(glue_gain.PARTS), pretrain_seeds=[0, 1, 2], seeds=[0],
                              max_train_examples=2000, page="docs/glue-gain.md", dry_run=True, text=None, wikitext=None, levers=None)
    (tmp_path / "glue-train.txt").write_text("text\n")
    return glue_gain.page(args, [])


@pytest.mark.parametrize("pairs, verdict", [
    ([(6.0, 7.0), (5.0, 5.5), (8.0, 4.0)], "cleared"),  # medians 6.0 and 5.5, every seed ahead
    ([(6.0, 7.0), (5.0, 5.5), (8.0, -1.0)], "cleared"),  # a seed behind on SST-2 ...
    ([(4.0, 7.0), (5.0, 5.5), (8.0, 6.0)], "cleared"),   # a seed under the bar, the median still at it
    ([(4.0, 7.0), (4.5, 5.5), (8.0, 6.0)], "not cleared"),  # the average's median under the bar
])
def test_the_verdict_needs_both_medians_at_the_bar_and_every_seed_ahead(tmp_path, pairs, verdict):
    text = page_of(tmp_path, several(pairs))
    behind = any(a <= 0 or s <= 0 for a, s in pairs)
    expected = "not cleared" if behind else verdict
    assert f"is {expected}." in text


def test_a_row_shows_the_median_its_range_and_the_interval(tmp_path):
    text = page_of(tmp_path, several([(6.0, 7.0), (5.0, 5.5), (8.0, 4.0)]))
    row = next(line for line in text.splitlines() if line.startswith("| learner's hour"))
    assert "**+6.0** (+5.0 to +8.0); 95% interval +1.0 to +9.0" in row and "| +5.5 (+4.0 to +7.0) |" in row
    assert "| 46.0 | 40.0 |" in row  # the medians of the two sides' averages
    glance = next(line for line in text.splitlines() if line.startswith("**At a glance.**"))
    assert "by +6.0 (+5.0 to +8.0) points on ELECTRA's dev average (95% interval +1.0 to +9.0)" in glance
    assert "Not measured yet: default `bert` run" in text  # the parts not run are named, not left out silently


def test_only_the_every_row_lever_fine_tunes_on_whole_training_sets(tmp_path):
    args = argparse.Namespace(glue="GLUE", out=str(tmp_path), only=["ablation"], pretrain_seeds=[0], seeds=[0],
                              max_train_examples=2000, text=None, wikitext=None, levers=None)
    sweeps = {name: command for _, name, command, _ in glue_gain.plan(args) if name.endswith("-glue")}
    every_row = {f"lever{n}-glue" for n, (*_, flags) in enumerate(glue_gain.ABLATION, 1) if glue_gain.EVERY_ROW in flags}
    assert len(every_row) == 1 and len(sweeps) == len(glue_gain.ABLATION)
    for name, command in sweeps.items():
        assert glue_gain.EVERY_ROW not in command
        assert ("--max-train-examples" in command) == (name not in every_row), name
