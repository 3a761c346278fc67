"""A plan on a CPU (`python train.py ... --plan`): its wall time from a step of the run's own model
timed here, plus its evaluations and its corpus build (runs/plan.py)."""

from __future__ import annotations

import math
import re

import torch

from minibert.runs import run as run_module
from minibert.runs.cli import main
from minibert.runs.plan import random_batch, time_step
from minibert.variants import get_variant, run_architecture, with_layout

SMALL = ["--hidden-size", "32", "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "2", "--vocab-size", "300",
         "--seq-len", "32", "--batch-size", "4", "--device", "cpu"]


def planned_minutes(printed: str) -> float:
    match = re.search(r"wall time here: about ([\d.]+) (min|h)", printed)
    assert match, printed
    return float(match.group(1)) * (60 if match.group(2) == "h" else 1)


def test_the_cpu_plan_is_the_steps_at_the_timed_rate_plus_the_evaluations(monkeypatch, tmp_path, capsys):
    """The plan times the run's own model (its width, its threads) and adds the held-out evaluations
    (at step 0, every --eval-every steps and at the last, a third of a step per batch)."""
    seen = []

    def fake_time_step(variant, settings, config, threads):
        seen.append((variant.name, config.hidden_size, threads))
        return 0.5

    monkeypatch.setattr(run_module, "time_step", fake_time_step)
    flags = [*SMALL, "--steps", "3000", "--eval-every", "1000", "--eval-batches", "6", "--threads", "1", "--out", str(tmp_path / "o")]
    assert main(["--variant", "electra", *flags, "--plan"]) == 0
    printed = capsys.readouterr().out
    assert seen == [("electra", 32, 1)]
    # 3000 × 0.5 s = 25 min of steps; 4 evaluations (steps 0, 1000, 2000, 3000) × 6 batches × 0.5 s / 3 = 4 s
    assert "25 min of steps at 0.500 s a step" in printed and "4 held-out evaluations" in printed
    assert main(["--variant", "electra", *flags[:-2], "--steps", "2500", "--out", str(tmp_path / "o"), "--plan"]) == 0
    assert "4 held-out evaluations" in capsys.readouterr().out  # steps 0, 1000, 2000 and the last, 2500
    assert planned_minutes(printed) == 25 and not (tmp_path / "o").exists()
    assert main(["--variant", "electra", *flags[:-2], "--steps", "6000", "--out", str(tmp_path / "o"), "--plan"]) == 0
    assert planned_minutes(capsys.readouterr().out) == 50  # twice the steps, twice the time


def test_a_gpu_plan_and_a_budget_time_no_step(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(run_module, "time_step", lambda *a: math.nan)
    assert main(["--variant", "bert", *SMALL, "--plan", "--plan-for", "h100", "--out", str(tmp_path / "o")]) == 0
    assert "wall time on one H100 SXM" in capsys.readouterr().out
    assert main(["--variant", "bert", *SMALL, "--budget", "40m", "--plan", "--out", str(tmp_path / "o")]) == 0
    assert "wall time here: the --budget, 40 min" in capsys.readouterr().out


def test_the_timed_step_runs_the_run_s_model_and_objectives_on_a_batch_of_its_shape():
    for name in ("albert", "electra", "roberta"):
        variant = get_variant(name)
        settings = with_layout(variant, variant.default_settings(batch_size=4, seq_len=16))
        config = run_architecture(variant, settings, dict(vocab_size=120, hidden_size=32, num_heads=2, intermediate_size=64))
        batch = random_batch(variant, settings, config, torch.Generator().manual_seed(0))
        assert batch["input_ids"].shape == (4, 16) and ("sentence_label" in batch) == (name == "albert")
        assert 0 < (batch["labels"] != -100).float().mean() < 1
        seconds = time_step(variant, settings, config, threads=1)
        assert 0 < seconds < 60
