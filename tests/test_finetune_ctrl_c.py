"""Ctrl-C during `python train.py finetune`: one line on stderr saying what was kept and how to go
on, exit status 130 as pretraining's (tests/test_reliability.py), never a traceback; and what
the line says is kept is kept: a sweep's finished runs are read back by the same command.

Tiny checkpoints and task files are made here (test_glue_recipes.py's, test_finetune.py's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibert.finetune import job, main
from minibert.finetune.glue import sweep as glue_sweep

from test_finetune import toy_rows, write_tsv
from test_glue_recipes import STEPS, checkpoint, task_folder
from tiny_run import REPO

# A command held at a chosen moment until the test presses Ctrl-C: `hold()` prints HELD on stderr,
# writes the file named by the first argument, and sleeps. HOLD + the code that calls it + the
# command's main is the program `pressed_when_held` runs.
HOLD = """
import sys, time
from pathlib import Path
held = Path(sys.argv.pop(1))
def hold():
    print("HELD", file=sys.stderr, flush=True)
    held.touch()
    time.sleep(120)
"""

# `python train.py finetune ...` with the third run held at its start (its file written, and HELD
# on stderr after the finished runs' progress bars).
HELD_THIRD_RUN = HOLD + """
from minibert.finetune import job
train_steps, runs = job.train_steps, []
def third_held(*args, **kwargs):
    runs.append(1)
    if len(runs) == 3:
        hold()
    return train_steps(*args, **kwargs)
job.train_steps = third_held
import train
sys.exit(train.main(sys.argv[1:]))
"""


def pressed_when_held(program: str, held: Path, argv: list[str]) -> tuple[int, str, str]:
    """Run `python -c program held *argv` as a real process, and press Ctrl-C (a real SIGINT) once it
    is held: (exit status, stdout, stderr after HELD)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", program, str(held), *argv], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not held.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGINT)
    printed, err = process.communicate(timeout=60)
    assert "HELD\n" in err, err
    return process.returncode, printed, err.split("HELD\n", 1)[1]


@pytest.mark.slow
def test_ctrl_c_in_a_sweep_is_one_line_and_the_same_command_reads_back_what_finished(tmp_path, capsys):
    """A real process, a real SIGINT, in the middle of `--glue --against-untrained`: the two
    pretrained seeds have finished, the twin's first is training."""
    glue, init, out, held = task_folder(tmp_path / "glue"), checkpoint(tmp_path / "pre", 0, run_seed=0), tmp_path / "out", tmp_path / "held"
    argv = ["--init", str(init), "--glue", str(glue), "--against-untrained", "--seeds", "0", "1", "--glue-recipe", "bert",
            "--out", str(out), *STEPS]
    returncode, printed, err = pressed_when_held(HELD_THIRD_RUN, held, ["finetune", *argv])
    assert returncode == 130 and "Traceback" not in printed + err
    assert err.splitlines() == [f"python train.py finetune: interrupted; 2 finished runs kept in {out}: the same command "
                                f"reads them back and trains only the rest"]

    assert main(argv) == 0  # the same command
    printed = capsys.readouterr().out
    assert "RTE seed 0: finished earlier" in printed and "RTE seed 1: finished earlier" in printed
    assert "untrained RTE seed 0: dev" in printed and "untrained RTE seed 1: dev" in printed
    assert "gains" in json.loads((out / "glue.json").read_text())


def test_a_sweep_stopped_before_mnli_mismatched_was_scored_scores_it_when_run_again(tmp_path, monkeypatch, capsys):
    """MNLI's model is saved before its second dev set is scored: Ctrl-C in between keeps the run,
    and the same command scores that set on the saved model instead of refusing or retraining it."""
    glue, init, out = task_folder(tmp_path / "glue", tasks=("MNLI",)), checkpoint(tmp_path / "pre", 0), tmp_path / "out"
    argv = ["--init", str(init), "--glue", str(glue), "--glue-recipe", "bert", "--out", str(out), *STEPS]

    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(glue_sweep, "score_mismatched", pressed)
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m minibert.finetune: interrupted; 1 finished run kept in {out}: the same command reads it back and trains only the rest")
    monkeypatch.undo()
    model = out / "MNLI" / "seed-0" / "model.safetensors"
    stamp = model.stat().st_mtime_ns
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "MNLI seed 0: finished earlier" in printed and "dev accuracy on dev_mismatched.tsv" in printed
    assert "accuracy_mismatched" in json.loads((out / "MNLI" / "seed-0" / "eval.json").read_text())
    assert model.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("pressed_at", [1, 2])
def test_ctrl_c_between_task_folders_names_the_models_kept_and_how_to_replace_them(pressed_at, tmp_path, monkeypatch, capsys):
    """--tasks runs start over: the line names the models this command saved, which the same command refuses without --overwrite."""
    folders = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        folders.append(tmp_path / name)
        write_tsv(tmp_path / name / "train.tsv", ["sentence", "label"], toy_rows(16, seed=1))
        write_tsv(tmp_path / name / "dev.tsv", ["sentence", "label"], toy_rows(8, seed=2))
    init, out = checkpoint(tmp_path / "pre", 0), tmp_path / "out"
    argv = ["--init", str(init), "--tasks", *map(str, folders), "--out", str(out), *STEPS]
    train_steps, runs = job.train_steps, []

    def pressed(*args, **kwargs):
        runs.append(1)
        if len(runs) == pressed_at:
            raise KeyboardInterrupt
        return train_steps(*args, **kwargs)

    monkeypatch.setattr(job, "train_steps", pressed)
    assert main(argv) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m minibert.finetune: interrupted before a model was saved; run the same command again" if pressed_at == 1 else
        f"python -m minibert.finetune: interrupted; the model of first kept in {out}: running again starts over, and takes "
        f"--overwrite to replace it")
    monkeypatch.undo()
    assert main(argv) == (0 if pressed_at == 1 else 2)
    if pressed_at == 2:
        assert "--overwrite" in capsys.readouterr().err
        assert main([*argv, "--overwrite"]) == 0
