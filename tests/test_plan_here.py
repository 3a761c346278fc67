"""A plan on a CPU (`python train.py ... --plan`): its wall time from a step of the run's own model
timed here, plus its evaluations and its corpus build (runs/plan.py); and a plan never takes the
machine down: it times a slice of the micro-batch that fits the memory available (here a pretended
one, `available_memory` patched), or says in one line that the machine cannot run the recipe."""

from __future__ import annotations

import math
import re

import torch

from minibert.runs import run as run_module
from minibert.runs.cli import main
from minibert.runs import plan
from minibert.runs.plan import StepTiming, available_memory, random_batch, saved_bytes, sequence_estimate, time_step
from minibert.variants import build_pretrainer, get_variant, run_architecture, with_layout

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
        return StepTiming(threads, 0.5, 4, 4, 1, 1e6, 1e5, 10**10)

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
    monkeypatch.setattr(run_module, "time_step", lambda *a: StepTiming(1, math.nan, 4, 4, 1, 1e6, 1e5, 10**10))
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
        timing = time_step(variant, settings, config, threads=1)
        assert 0 < timing.seconds < 60 and timing.timed == timing.micro == 4 and not timing.note()


def tiny(name: str = "bert", **settings):
    variant = get_variant(name)
    settings = with_layout(variant, variant.default_settings(**{"batch_size": 8, "seq_len": 16, **settings}))
    return variant, settings, run_architecture(variant, settings, dict(vocab_size=120, hidden_size=32, num_heads=2,
                                                                      intermediate_size=64, num_layers=2))


def test_a_micro_batch_that_does_not_fit_is_timed_on_a_slice_and_scaled():
    """With room for 4 of the micro-batch's 8 sequences in half the memory available, 4 are timed
    (their forward and backward scaled by 8 / 4), and the plan's line says so and why."""
    whole = time_step(*tiny(), threads=1, available=10**12)
    assert whole.timed == whole.micro == 8 and whole.why == "" and whole.note() == ""
    assert whole.state_bytes == 16 * sum(p.numel() for p in build_pretrainer(*tiny()).parameters())
    room = 2 * (whole.state_bytes + 4.5 * whole.sequence_bytes)  # half of it holds 4 sequences and a half
    sliced = time_step(*tiny(), threads=1, available=int(room))
    assert (sliced.timed, sliced.micro, sliced.why) == (4, 8, "memory") and sliced.seconds > 0
    note = sliced.note()
    assert note.startswith("  timed on 4 of the 8 sequences of a micro-batch and scaled") and "\n" not in note
    assert "more than half of the" in note and "needs about" in note and "the run itself" not in note  # 8 fit in all of it


def test_grad_accum_times_one_micro_batch_and_counts_them_all():
    timing = time_step(*tiny(batch_size=8, grad_accum=4), threads=1, available=10**12)
    assert (timing.timed, timing.micro, timing.accum) == (2, 2, 4)
    assert timing.note() == "  timed on one micro-batch of 2 sequences, × 4 micro-batches a step (--grad-accum)"


def test_a_slow_step_is_timed_on_a_slice_to_keep_the_plan_quick(monkeypatch):
    monkeypatch.setattr(plan, "SLICE_SECONDS", 1e-9)
    timing = time_step(*tiny(), threads=1, available=10**12)
    assert (timing.timed, timing.why) == (1, "time") and "to keep --plan quick" in timing.note()


def test_a_machine_without_room_for_one_sequence_says_so_in_one_line(monkeypatch, tmp_path, capsys):
    """Not even one sequence fits: nothing is built or timed, and the plan says plainly that this
    machine cannot run the recipe, with the memory it needs; where it fits all of the memory but
    not the half a plan may take, the plan says the step was not timed, and why."""
    monkeypatch.setattr(plan, "available_memory", lambda: 200_000)
    built = []
    monkeypatch.setattr(plan, "build_pretrainer", lambda *a: built.append(build_pretrainer(*a)) or built[-1])
    assert main(["--variant", "bert", *SMALL, "--out", str(tmp_path / "o"), "--plan"]) == 0
    printed = capsys.readouterr().out
    [line] = [line for line in printed.splitlines() if "wall time" in line]
    assert re.fullmatch(r"  wall time here: none, this machine cannot run this recipe: a training step needs at least "
                        r"[\d.]+ (MB|GB) of memory \(.*\), and 200.0 kB is available", line), line
    assert [next(model.parameters()).device.type for model in built] == ["meta"]  # counted, not built
    monkeypatch.undo()
    variant, settings, config = tiny()
    needs = time_step(variant, settings, config, threads=1, available=10**12).needs(1)
    timing = time_step(variant, settings, config, threads=1, available=int(needs * 1.5))
    assert timing.seconds is None and "not timed" in timing.untimed() and "the run itself may fit" in timing.untimed()


def test_the_estimate_of_a_sequence_bounds_what_autograd_keeps_of_it():
    """`sequence_estimate`, which decides whether the one sequence measured first fits, is above
    the bytes autograd saves for it (`saved_bytes`), for every family, the naive attention's
    materialised weights, pre-LN with rotary positions, and two lengths."""
    for name in ("bert", "roberta", "albert", "electra"):
        for fields in ({}, {"reference": True}, {"position_encoding": "rotary", "norm": "pre"}):
            for seq_len in (16, 64):
                variant = get_variant(name)
                settings = with_layout(variant, variant.default_settings(batch_size=1, seq_len=seq_len))
                config = run_architecture(variant, settings, dict(vocab_size=120, hidden_size=32, num_heads=2,
                                                                  intermediate_size=64, num_layers=2, **fields))
                batch = random_batch(variant, settings, config, torch.Generator().manual_seed(0))
                _, saved = saved_bytes(build_pretrainer(variant, settings, config), batch)
                assert saved < sequence_estimate(variant, settings, config), (name, fields, seq_len)


def test_the_memory_available_is_read_from_the_machine():
    assert 10**7 < available_memory() < 10**15
