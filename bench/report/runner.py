"""Training and fine-tuning runs in a subprocess, cached in their output folders.

A run is a command line — `python train.py ...` or `python -m minibert.finetune ...`, run as a
user would run it, so each table row can show the exact command that reproduces it — and the
folder it writes to. The folder is the cache: `report-run.json` in it records the command and
whether it finished. A re-run of the report finds the same command done and reuses it, finds
it unfinished and resumes it (pretraining), or finds another command (a changed budget, seed or
flag) and starts the folder over. Seeds and wall-clock budgets need nothing more: they are
flags of the command (`--seed`, `--budget`), and a section that repeats a run over seeds names
each folder after its seed (`recipes.seeded`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from minibert.operations.files import read_json_lines, read_json_object

from .budget import FINETUNE_BATCH, REPO, THREADS


T = TypeVar("T")


class NotRun(Exception):
    """A section that cannot run yet; the message says why and goes into the report."""


def shell(args: list[str]) -> str:
    """A command line as a user would type it."""
    return " ".join(shlex.quote(str(a)) for a in args)


class Runner:
    """Runs commands in `runs` (a path relative to the repository, as in the commands shown)."""

    MARKER = "report-run.json"

    def __init__(self, runs: Path, jobs: int = 1):
        self.runs = runs
        self.jobs = jobs  # commands run at once by `parallel` (each with THREADS threads)
        self.seconds = 0.0  # wall time of every run this section used, cached or not: its cost to reproduce
        self._lock = threading.Lock()
        (REPO / runs / "logs").mkdir(parents=True, exist_ok=True)

    def parallel(self, tasks: Sequence[Callable[[], T]]) -> list[T]:
        """Call each task (a chain of runs, e.g. one seed's pretraining and its fine-tunings),
        `jobs` at a time, and return their results in order. The tasks only wait on their
        subprocesses, so threads are enough; the first failure is raised once all have ended."""
        if self.jobs == 1:
            return [task() for task in tasks]
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(task) for task in tasks]
            return [future.result() for future in futures]

    def _call(self, name: str, args: list[str]) -> float:
        shown = self.runs / "logs" / f"{name}.log"  # relative to the repository, as in the commands
        log = REPO / shown
        print(f"  running {name}: python {shell(args)}", flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        with open(log, "w", encoding="utf-8") as output:
            code = subprocess.call([sys.executable, *args], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
        if code:
            tail = [line for line in log.read_text(encoding="utf-8").replace("\r", "\n").splitlines() if line.strip()]
            raise NotRun(f"`{name}` failed (exit {code}): {tail[-1] if tail else 'no output'} (log: {shown})")
        return time.perf_counter() - start

    def run(self, name: str, out: Path, args: list[str], resumable: bool) -> dict:
        """Run `python ARGS` unless the same command already finished in `out`; its marker
        {command, done, seconds}."""
        command = shell(["python", *args])
        marker = REPO / out / self.MARKER
        previous = read_json_object(marker, "delete it to run again") if marker.exists() else {}
        if previous.get("command") == command and previous.get("done"):
            self._count(previous["seconds"])
            return previous
        if previous.get("command") == command and resumable:
            again = ["--resume"]
        else:
            again = ["--overwrite"] if (REPO / out).exists() else []
        (REPO / out).mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"command": command, "done": False}) + "\n")
        seconds = self._call(name, args + again)
        record = {"command": command, "done": True, "seconds": seconds}
        marker.write_text(json.dumps(record) + "\n")
        self._count(seconds)
        return record

    def _count(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds

    def pretrain(self, name: str, args: list[str]) -> dict:
        """`python train.py ARGS --out runs/pretrain/NAME`; with its config, its held-out
        evaluations ({step, elapsed_s, metrics...} each) and the last of them."""
        out = self.runs / "pretrain" / name
        record = self.run(name, out, ["train.py", *args, "--out", str(out)], resumable=True)
        evals = [m for m in read_json_lines(REPO / out / "metrics.jsonl") if any(k.startswith("eval_") for k in m)]
        run = read_json_object(REPO / out / "run.json", "delete the folder to run it again")
        return {**record, "out": str(out), "config": run["config"], "final_eval": evals[-1] if evals else {},
                "evals": evals}

    def finetune(self, name: str, init: str, train_file: Path, dev_file: Path, steps: int, lr: float, max_len: int,
                 seed: int, pooling: str, *extra: str) -> dict:
        """`python -m minibert.finetune` from `init` on a task's training and held-out files (plus
        `extra` flags, e.g. a --teacher); with the held-out accuracy and the last training loss.
        The report's protocol names its own lr, steps and pooling, and BERT's recipe for the rest
        (--recipe bert: every layer at the lr), whatever the command's defaults."""
        out = self.runs / "finetune" / name
        args = ["-m", "minibert.finetune", "--init", init, "--train", str(train_file), "--dev", str(dev_file),
                "--out", str(out), "--recipe", "bert", "--steps", str(steps), "--batch-size", str(FINETUNE_BATCH),
                "--lr", f"{lr:g}", "--max-len", str(max_len), "--seed", str(seed), "--device", "cpu", "--pooling", pooling, *extra]
        record = self.run(name, out, args, resumable=False)
        result = read_json_object(REPO / out / "eval.json", "delete the folder to run it again")
        return {**record, "out": str(out), "accuracy": result["accuracy"], "train_loss": result["train_loss"]}
