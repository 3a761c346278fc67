"""The output folder of a run: never clobbered by accident, never written by two runs.

* A folder that already holds a checkpoint is only trained into with `--resume`
  (continue it) or `--overwrite` (replace it); otherwise the run refuses and touches nothing.
* While a run trains it holds an exclusive lock on OUT/.lock (`flock`). The kernel drops
  the lock when the process dies, however it dies, so a lock file nobody holds is stale:
  it is taken over with a warning. The file is removed on a clean exit.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from .checkpoint import Checkpoints
from .errors import TrainingError, warn

# What a training run writes into OUT. A run that starts afresh removes the leftovers of one
# that never reached a checkpoint (the first three); --overwrite removes all of them.
RUN_FILE = "run.json"  # what `python train.py` was asked, beside the model it left (runs/run.py)
LAUNCHED_FROM = "launched_from"  # run.json's key for the folder the run was started in (its relative paths' base)
LEFTOVERS = (RUN_FILE, "metrics.jsonl", "tokenizer.model")
RUN_FILES = LEFTOVERS + ("config.json", "model.safetensors", "vocab.txt")
GENERATOR_DIR = "generator"  # ELECTRA's generator, beside the discriminator (for --init-generator)
LOCK = ".lock"


class OutputDir:
    def __init__(self, path: str | Path, *, resume: bool = False, overwrite: bool = False):
        self.path = Path(path)
        self.resume, self.overwrite = resume, overwrite
        self.checkpoints_dir = self.path / "checkpoints"
        self._fd: int | None = None

    def __enter__(self) -> "OutputDir":
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"--out {self.path} is a file; choose a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            steps = Checkpoints(self.checkpoints_dir).steps()
            holds = bool(steps) or (self.path / "model.safetensors").exists()
            if holds and not (self.resume or self.overwrite):
                raise FileExistsError(
                    f"{self.path} already holds a checkpoint; pass --resume to continue that run, "
                    f"--overwrite to replace it, or choose another --out"
                )
            if holds and self.resume and not steps and not self.overwrite:
                raise FileExistsError(f"{self.path} holds a model but no training checkpoint to resume; pass --overwrite to replace it or choose another --out")
            if self.overwrite or not holds:
                for directory in (self.checkpoints_dir, self.path / GENERATOR_DIR):
                    shutil.rmtree(directory, ignore_errors=True)
                for name in RUN_FILES if self.overwrite else LEFTOVERS:
                    (self.path / name).unlink(missing_ok=True)
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._unlock()

    def _lock(self) -> None:
        path = self.path / LOCK
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise TrainingError(
                    f"another training run (pid {holder}) is writing to {self.path}; wait for it to finish or choose another --out"
                ) from None
            try:  # the holder we waited on may have removed the file: lock the one that is there
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = os.read(fd, 64).decode(errors="replace").strip()
        if previous:
            warn(f"removing a stale lock in {self.path} left by pid {previous}, which is no longer running")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def _unlock(self) -> None:
        if self._fd is not None:
            (self.path / LOCK).unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None
