"""Fine-tuning with pretraining's run tools: dev evaluated while training (the best model kept,
--patience), --resume (bit for bit, other flags refused), the OUT lock, a full disk in one line,
--grad-accum, and torchrun. Tiny models and the toy task of test_finetune.py."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from minibert.finetune import load_classifier, main, predict
from minibert.finetune.run_tools.evaluations import Evaluations
from minibert.finetune.kinds.sentence_files import read_task
from minibert.operations.checkpoint import Checkpoints
from minibert.operations.distributed import Distributed
from minibert.operations.outdir import OutputDir
from minibert.training.loop import Progress

from test_finetune import FAST, minibert_dir, one_thread, run, toy  # noqa: F401 (fixtures)
from tiny_run import REPO, kill_at_random_moments

DROPOUT = ["--dropout", "0.1"]  # dropout draws random numbers: a resume must restore the generators too


def read_report(out) -> dict:
    return json.loads((out / "eval.json").read_text())


def one_line_error(capsys, code: int, *words: str) -> None:
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    line = [line for line in err.splitlines() if "error:" in line][-1]
    assert all(word in line for word in words), line


def test_the_best_evaluation_is_kept_and_patience_stops_after_k_without_a_better_one():
    """Scripted scores: the weights of the best evaluation come back at the end, not the last
    ones; two evaluations without a better score stop the run; a checkpoint's state restores it all."""
    model = nn.Linear(2, 1)
    scores = iter([0.5, 0.7, 0.6, 0.7, 0.9])
    evaluations = Evaluations(model, lambda: ({"accuracy": next(scores)}, [0]), "accuracy", patience=2, dist=Distributed())
    progress, weights = Progress(), {}
    while not progress.stopped:
        progress.step += 10
        with torch.no_grad():
            model.weight.fill_(progress.step)  # training moved the weights
        weights[progress.step] = model.weight.clone()
        evaluations({}, progress)
        if progress.step == 20:
            saved = evaluations.state_dict(progress.step)
    assert progress.step == 40  # 0.6 and 0.7 did not better 0.7: stopped at the second, 0.9 never reached
    resumed = Evaluations(model, lambda: None, "accuracy", patience=2, dist=Distributed())
    kept = evaluations.keep_best()
    assert kept["kept_step"] == 20 and kept["accuracy"] == 0.7 and [e["step"] for e in kept["evaluations"]] == [10, 20, 30, 40]
    assert torch.equal(model.weight, weights[20])
    with torch.no_grad():
        model.weight.fill_(20)
    resumed.load_state_dict(saved)  # the best weights were the model's own at step 20: not stored twice
    assert saved["best"]["weights"] is None and torch.equal(resumed.best["weights"]["weight"], weights[20])


def test_eval_every_writes_every_evaluation_and_the_kept_model_is_the_best(minibert_dir, toy, tmp_path):
    out = tmp_path / "out"
    assert run(minibert_dir, *toy, out, *FAST, "--eval-every", "10", "--patience", "2") == 0
    report = read_report(out)
    steps = [evaluation["step"] for evaluation in report["evaluations"]]
    assert steps == list(range(10, 10 * len(steps) + 1, 10)) and steps[-1] < 80  # the toy task is solved: patience stopped it
    best = max(report["evaluations"], key=lambda evaluation: evaluation["accuracy"])  # the first of equal ones
    assert report["kept_step"] == best["step"] == steps[-3] and report["accuracy"] == best["accuracy"]
    assert report["selected_by"] == "accuracy" and not (out / "checkpoints").exists()
    classifier = load_classifier(out)
    dev = read_task(toy[1])
    predicted = predict(classifier.model, classifier.tokenizer, dev, 16, 64, "cpu")
    written = [line.split("\t")[1] for line in (out / "predictions.tsv").read_text().splitlines()[1:]]
    assert [classifier.labels.names[p] for p in predicted] == written  # predictions.tsv is the kept model's
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "eval_accuracy" in r] == steps


def test_resume_goes_on_as_if_never_stopped_and_refuses_other_flags(minibert_dir, toy, tmp_path, capsys, monkeypatch):
    """Stopped after the checkpoint of step 40, resumed: the weights, evaluations and kept step of
    a run never stopped. Started again without --resume, or resumed with other flags: refused."""
    flags = [*FAST, *DROPOUT, "--eval-every", "20", "--grad-accum", "2"]
    assert run(minibert_dir, *toy, tmp_path / "whole", *flags) == 0
    out, save = tmp_path / "resumed", Checkpoints.save

    def save_then_stop_at_40(self, step, state):
        save(self, step, state)
        if step == 40:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Checkpoints, "save", save_then_stop_at_40)
        assert run(minibert_dir, *toy, out, *flags) == 130
    assert "with --resume goes on" in capsys.readouterr().err
    assert [path.name for path in Checkpoints(out / "checkpoints").steps()] == ["step-00000040", "step-00000020"]
    one_line_error(capsys, run(minibert_dir, *toy, out, *flags), "--resume")  # not started over by accident
    other = [flag if flag != "20" else "10" for flag in flags]
    one_line_error(capsys, run(minibert_dir, *toy, out, *other, "--resume"), "--eval-every 20 -> 10")
    assert run(minibert_dir, *toy, out, *flags, "--resume") == 0
    assert (out / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()
    whole, resumed = read_report(tmp_path / "whole"), read_report(out)
    assert resumed["evaluations"] == whole["evaluations"] and resumed["kept_step"] == whole["kept_step"]


def test_a_task_folder_with_an_unfinished_run_is_refused_before_anything_is_trained(minibert_dir, toy, tmp_path, capsys):
    """--tasks, the second task's OUT holding an interrupted run's checkpoints: without --resume
    refused in one line up front, the first task not trained."""
    folders = [tmp_path / "first", tmp_path / "second"]
    for folder in folders:
        folder.mkdir()
        for path in toy:
            (folder / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "out"
    (out / "second" / "checkpoints" / "step-00000010").mkdir(parents=True)
    flags = ["--init", str(minibert_dir), "--tasks", *map(str, folders), "--out", str(out), "--device", "cpu", *FAST]
    one_line_error(capsys, main(flags), "second", "--resume", "--overwrite")
    assert not (out / "first").exists()


def test_a_second_run_on_one_out_and_a_full_disk_are_one_line_and_lose_nothing(minibert_dir, toy, tmp_path, capsys,
                                                                               monkeypatch):
    out = tmp_path / "out"
    with OutputDir(out):  # another run holds OUT
        one_line_error(capsys, run(minibert_dir, *toy, out, *FAST), "another training run")

    def full(self, step, state):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Checkpoints, "save", full)
    one_line_error(capsys, run(minibert_dir, *toy, out, *FAST, "--eval-every", "20"), "no space left", "step 20")
    assert not (out / "model.safetensors").exists() and not (out / ".lock").exists()


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_is_bit_identical(minibert_dir, toy, tmp_path):
    """A real process, killed with SIGKILL at random moments (mid-step, mid-checkpoint), resumed
    each time: the model saved at the end is an uninterrupted run's, byte for byte."""
    flags = ["--init", str(minibert_dir), "--train", str(toy[0]), "--dev", str(toy[1]), "--device", "cpu", *FAST, *DROPOUT,
             "--eval-every", "5"]
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    killed = tmp_path / "killed"
    command = [sys.executable, str(REPO / "train.py"), "finetune", *flags, "--out", str(killed)]
    kill_at_random_moments(command, killed / "metrics.jsonl", latest=0.3)
    assert Checkpoints(killed / "checkpoints").steps() and not (killed / "model.safetensors").exists()  # killed mid-run
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command + ["--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert (killed / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert read_report(killed)["evaluations"] == read_report(tmp_path / "whole")["evaluations"]


@pytest.mark.slow
def test_two_processes_match_one_process_that_accumulates_the_same_micro_batches(minibert_dir, toy, tmp_path):
    """torchrun, two CPU processes (gloo), against one process with --grad-accum 2: the same global
    batches split the same way (no dropout, whose masks each process draws on its own), so the same
    weights up to the order of floating-point sums."""
    flags = ["--init", str(minibert_dir), "--train", str(toy[0]), "--dev", str(toy[1]), "--device", "cpu", *FAST,
             "--dropout", "0", "--eval-every", "40"]
    assert main([*flags, "--grad-accum", "2", "--out", str(tmp_path / "one")]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          str(REPO / "train.py"), "finetune", *flags, "--out", str(tmp_path / "two")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("step 40: dev accuracy") == 1  # rank 0 alone prints
    one, other = (read_report(tmp_path / name) for name in ("one", "two"))
    assert [e["step"] for e in other["evaluations"]] == [40, 80]
    assert other["accuracy"] >= 0.95
    a, b = (load_classifier(tmp_path / name).model.state_dict() for name in ("one", "two"))
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-5, msg=name)
    assert not (tmp_path / "two" / ".lock").exists() and not (tmp_path / "two" / "checkpoints").exists()


def test_the_last_steps_evaluation_keeps_the_model_as_it_is_without_a_copy(monkeypatch):
    """A best evaluation at the run's last step is the model's own weights: no copy of them is
    taken (a base model's would be hundreds of MB), and keeping the best leaves the model as it is."""
    import minibert.finetune.run_tools.evaluations as selection
    copies = []
    monkeypatch.setattr(selection, "snapshot", lambda model: copies.append(model) or {"weight": model.weight.clone()})
    model = nn.Linear(2, 1)
    scores = iter([0.5, 0.9])
    evaluations = Evaluations(model, lambda: ({"accuracy": next(scores)}, [0]), "accuracy", patience=None, dist=Distributed(),
                              last_step=20)
    progress = Progress()
    for step in (10, 20):
        progress.step = step
        with torch.no_grad():
            model.weight.fill_(step)
        evaluations({}, progress)
    assert len(copies) == 1  # the step-10 best, which training went on from; none at the last step
    assert evaluations.keep_best()["kept_step"] == 20 and torch.equal(model.weight, torch.full_like(model.weight, 20))


def test_under_torchrun_each_process_predicts_its_share_of_dev_and_every_process_gets_all_of_it():
    """Dev read once in all: process r of w predicts rows r, r + w, ...; the gathered shares come back in order."""
    from minibert.operations.distributed import in_shards

    asked = {}

    class Processes:  # the shares every process would give, as torch.distributed's all_gather_object returns them
        def __init__(self, rank, world_size):
            self.rank, self.world_size = rank, world_size

        def gather(self, value):
            return [value if rank == self.rank else predict(list(range(rank, 7, self.world_size)), rank)
                    for rank in range(self.world_size)]

    def predict(rows, rank=None):
        asked.setdefault(rank, []).append(rows)
        return [f"row {row}" for row in rows]

    for world_size in (1, 2, 3):
        asked.clear()
        assert in_shards(7, predict, Processes(0, world_size)) == [f"row {row}" for row in range(7)]
        assert asked[None] == [list(range(0, 7, world_size))]  # this process predicted its share alone
