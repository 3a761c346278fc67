"""A fine-tune's steps: pretraining's loop (training/loop.py) with pretraining's run tools.

    OUT            claimed by one run at a time (operations/outdir.py: the lock)
    the batches    every epoch a new order of the training rows (the --seed's); each global batch
                   split into processes × --grad-accum micro-batches
    the loop       schedule, clipping, NaN policy, precision, metrics.jsonl, and the dev
                   evaluations of evaluations.py
    checkpoints    OUT/checkpoints (operations/checkpoint.py) at each evaluation (without
                   --eval-every: each epoch): runs/resume.py's training state (weights, optimizer,
                   every random generator, the data position) and the evaluations so far;
                   --resume goes on from the newest as if never stopped, and refuses other flags;
                   a full disk ends the run in one line, as pretraining's
    --compile      the layers compiled, as in pretraining (runs/levers.py)

Under torchrun every process runs the command; DDP averages the gradients
(operations/distributed.py) and only rank 0 writes. The checkpoints go once the model is saved.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path

import torch.distributed

from ...operations.checkpoint import Checkpoints
from ...operations.distributed import Distributed
from ...operations.outdir import OutputDir
from ...operations.tensor_files import SAFETENSORS_FILE
from ...operations.state import rng_state
from ...operations.errors import warn
from ...runs.levers import use_levers
from ...runs.metrics import MetricsLog
from ...runs.resume import restore, training_state
from ...runs.run import disk_full_is_one_line
from ...training.loop import Progress, train
from ...training.optimizer import build_optimizer
from ...training.settings import LoopSettings, flag
from ..layer_decay import layer_lr_scales
from ..settings import FinetuneSettings
from .evaluations import Evaluations

METRICS_FILE = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
KEEP = 2  # checkpoints kept: the newest, and one before it should the newest be damaged
# flags --resume may change: how, not what, the run computes (--skip-nonfinite: the way on from a NaN/Inf step)
OPERATIONAL = ("resume", "device", "grad_accum", "compile", "skip_nonfinite")


class TaskBatches:
    """Endless batches of training-row indices for one micro-step stream: every epoch one new
    random order of the rows (a generator seeded by --seed, so every process draws the same),
    cut into global batches of `batch_size` (the last one smaller), of which this stream serves
    every `world_size`-th row from its `rank` on. A last batch too small to give every stream a
    row is left out. `epoch` and `position` (global batches served) are what a checkpoint holds."""

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1):
        self.n, self.batch_size, self.seed, self.rank, self.world_size = n, batch_size, seed, rank, world_size
        self.epoch = self.position = 0

    def __len__(self) -> int:
        """Batches per epoch."""
        full, rest = divmod(self.n, self.batch_size)
        return full + (rest >= self.world_size)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed)
        for _ in range(self.epoch):  # the orders of the epochs already served: the generator as it was
            torch.randperm(self.n, generator=generator)
        while True:
            order = torch.randperm(self.n, generator=generator).tolist()
            while self.position < len(self):
                start, self.position = self.position * self.batch_size, self.position + 1  # a checkpoint now resumes after it
                yield order[start:start + self.batch_size][self.rank::self.world_size]
            self.epoch, self.position = self.epoch + 1, 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "world_size": self.world_size}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = state["epoch"], state["position"]


def task_streams(n: int, batch_size: int, seed: int, grad_accum: int, dist: Distributed) -> list[TaskBatches]:
    """This process's --grad-accum streams out of processes × --grad-accum, each a share of every global batch."""
    streams = dist.world_size * grad_accum
    if batch_size % streams:
        raise ValueError(f"--batch-size {batch_size} cannot be split into {streams} equal micro-batches (processes × "
                         f"--grad-accum); use a multiple of {streams}")
    return [TaskBatches(n, batch_size, seed, dist.rank * grad_accum + i, streams) for i in range(grad_accum)]


def processes() -> Distributed:
    """The processes this fine-tune runs in: those torchrun started (joined by run.py:run, through
    operations/distributed.py:setup), or this one."""
    if not torch.distributed.is_initialized():
        return Distributed()
    return Distributed(torch.distributed.get_rank(), torch.distributed.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an --out that is a file, or that holds a model already (unless `overwrite`)."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; choose a folder")
    if (out / SAFETENSORS_FILE).exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a checkpoint; pass --overwrite to replace it, or choose another --out")


def check_unfinished(out: Path, overwrite: bool) -> None:
    """Refuse, before anything is trained, an OUT holding an interrupted fine-tune's checkpoints
    (unless `overwrite`): a run without --resume would otherwise only be refused there in its turn."""
    if not overwrite and Checkpoints(out / CHECKPOINTS).steps():
        raise FileExistsError(f"{out} holds the checkpoints of an unfinished run; pass --resume to continue it, "
                              f"--overwrite to replace it, or choose another --out")


@contextlib.contextmanager
def claimed(out: Path, settings: FinetuneSettings, dist: Distributed):
    """OUT held by this run alone while it writes (rank 0 holds the lock; the others wait for it)."""
    with OutputDir(out, resume=settings.resume, overwrite=settings.overwrite) if dist.is_main else contextlib.nullcontext():
        dist.barrier()
        yield
        dist.barrier()


def train_steps(objective, batches: list, streams: list[TaskBatches], loop: LoopSettings, settings: FinetuneSettings,
               amp, out: Path, evaluations: Evaluations, recorded: dict, dist: Distributed) -> float:
    """The loop's steps on `batches` (one iterator per stream of `streams`, which it reads),
    dev scored by `evaluations`, from OUT's newest checkpoint with --resume. `settings.layer_decay`:
    each encoder layer below the top at that factor of the lr above it (layer_decay.py);
    `recorded`: the flags a checkpoint records; `dist`: the processes it runs in (processes()).
    Returns the mean loss of the last logged window."""
    scales = None if settings.layer_decay is None else layer_lr_scales(objective, objective.model.encoder, settings.layer_decay)
    optimizer = build_optimizer(objective, lr=loop.lr, weight_decay=loop.weight_decay, lr_scales=scales)
    checkpoints, progress, log = Checkpoints(out / CHECKPOINTS, KEEP), Progress(), MetricsLog(out / METRICS_FILE)
    if settings.resume and checkpoints.steps():
        state, path = checkpoints.load()
        changed = [f"--{flag(name)} {state['args'].get(name)!r} -> {value!r}" for name, value in recorded.items()
                   if name not in OPERATIONAL and state["args"].get(name) != value]
        if changed:  # --resume continues the run in OUT: flags that would make it another run are refused
            raise ValueError(f"--resume continues the run checkpointed in {path.parent}, but these flags differ from it: "
                             f"{'; '.join(changed)}; rerun with the original flags or start a new --out")
        progress = restore(state, objective, optimizer, amp, streams, dist)
        evaluations.load_state_dict(state["evaluations"])
        if dist.is_main:
            log.keep_until(progress.step)
            print(f"resuming from {path} (step {progress.step})", flush=True)
    elif settings.resume and dist.is_main:  # a new run: OutputDir (`claimed`) removed an earlier log
        warn(f"nothing to resume in {out} yet; starting from step 0")

    def save(progress: Progress) -> None:
        if progress.finished(loop):
            return  # the model and eval.json follow at once, and the checkpoints go then
        ranks = dist.gather({"rng": rng_state(), "data": [stream.state_dict() for stream in streams]})
        if dist.is_main:
            with disk_full_is_one_line(progress, checkpoints, objective):
                checkpoints.save(progress.step, {**training_state(progress, objective, optimizer, amp, ranks), "args": recorded,
                                                 "evaluations": evaluations.state_dict(progress.step)})

    objective.unused_parameters = unused_parameters(objective.model)
    use_levers(objective, compile=settings.compile)
    record = train(objective, optimizer, batches, None, loop, progress, dist=dist, device=amp.device, amp=amp, log=log,
                   save=save, evaluation=lambda record, fraction: evaluations(record, progress))
    return record.get("loss", math.nan)  # NaN if every step of the last window was skipped


def unused_parameters(model) -> bool:
    """Whether a parameter gets no gradient (DDP must then look for it): a pooler the head does not read."""
    return model.encoder.pooler is not None and getattr(model, "pooling", None) != "cls"


def done(out: Path, dist: Distributed) -> None:
    """The model and eval.json are written: the training state has served its purpose."""
    if dist.is_main:
        shutil.rmtree(out / CHECKPOINTS, ignore_errors=True)
