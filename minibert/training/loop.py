"""The one training loop — every variant, one process or many, CPU or GPU — and what it trains.

    for each optimizer step, until --steps are done (or the --budget deadline is reached):
        lr ← warm-up, then linear decay (of the step, or of the seconds spent)
        for each of the grad_accum micro-batches:
            loss, metrics = module(batch)         # the objectives of the variant, summed
            backward(loss / grad_accum)
        clip the gradient norm; a NaN/Inf loss or gradient stops the run (or skips the step)
        AdamW step (optimizer.py)
        now and then: a line in metrics.jsonl, held-out evaluation (evaluate.py), a checkpoint

`module` is whatever is trained: anything that maps a batch to (loss, metrics) — a
`Pretrainer` (below: the kept model and its objectives, summed), or a task model's loss
(minibert/finetune); nothing here knows, or asks, which variant or task it trains. What the
loop reads of a run is `LoopSettings`: pretraining fills it from its `Settings`, fine-tuning
from its flags.

The loop is handed, and never builds, what surrounds the step: the processes it runs in
(`dist`: one, or DDP under torchrun), the number format (`amp`: an autocast context, and the
gradient scaler of fp16's loss scaling), where the records go (`log`), what a held-out
evaluation shows and checks (`report`), and how a checkpoint is written (`save`). The run
(runs/run.py) or a fine-tuning job builds them; the Protocols below say what the loop reads of
each. Mixed precision is PyTorch's own recipe, read in place: each `amp.scaler` call is the
plain operation unless --precision fp16 turns loss scaling on (operations/precision.py).
"""

from __future__ import annotations

import functools
import math
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, fields
from typing import Callable, Protocol

import torch
from torch import nn
from tqdm import tqdm

from ..objectives import Objective
from .evaluate import evaluate


class NonFiniteLoss(RuntimeError):
    """A run whose loss or gradient became NaN/Inf; the message names the step and the ways out."""


class Processes(Protocol):
    """Where the loop runs: one process, or one of several under torchrun (operations/distributed.py)."""

    enabled: bool  # more than one process: DDP averages the gradients during backward
    is_main: bool  # the one process that writes and prints
    world_size: int

    def wrap(self, module: torch.nn.Module, device: torch.device) -> torch.nn.Module: ...
    def sum(self, tensor: torch.Tensor) -> torch.Tensor: ...
    def broadcast_float(self, value: float) -> float: ...


class MixedPrecision(Protocol):
    """The number format of the step (operations/precision.py): PyTorch's mixed-precision recipe."""

    device: torch.device  # where the batches go
    autocast: AbstractContextManager  # around each forward pass: matmuls in bf16/fp16, or a no-op for fp32
    scaler: torch.amp.GradScaler  # fp16's loss scaling; each call is the plain operation in other formats
    scales: bool  # fp16: gradients are scaled, so a step whose gradients overflowed is skipped by design

    def verdict(self, bad_loss: bool, bad_grad: bool, metrics: dict) -> Step:
        """A step whose NaN/Inf flags are read before its update: taken or not, and what it logs."""


class Log(Protocol):
    def write(self, record: dict) -> None: ...  # one record of metrics.jsonl (runs/metrics.py)


class Evaluations(Protocol):
    """What a held-out evaluation shows and checks (runs/report.py)."""

    baselines: dict  # the guesses the model is measured against, logged once at step 0

    def line(self, record: dict) -> str: ...  # the evaluation as one line
    def check(self, record: dict, fraction: float) -> None: ...  # warn when the run, `fraction` done, falls behind


class Pretrainer(nn.Module):
    """The module a pretraining run trains: the kept model plus the objectives around it (objectives/).

        loss = Σ objective(model, batch, output)

    `model` is the part that survives pretraining (a `MaskedLM`, or the discriminator
    `ReplacedTokenDetector` for ELECTRA); the objectives add what is thrown away afterwards
    (the NSP/SOP head, ELECTRA's generator, DistilBERT's teacher). Those that read the kept
    model's pass over the masked batch (MLM and SOP for ALBERT) share ONE encoder forward,
    whose last layer runs only at the positions one of them reads.
    """

    def __init__(self, model: nn.Module, objectives: dict[str, Objective]):
        super().__init__()
        if not objectives:
            raise ValueError("a pretraining run needs at least one objective")
        self.model = model
        self.objectives = nn.ModuleDict(objectives)
        self.readers = [objective for objective in objectives.values() if objective.reads_output]
        # a pooler that no objective reads gets no gradient: DDP must be told (operations/distributed.py)
        self.unused_parameters = model.encoder.pooler is not None and not any(o.reads_pooler for o in objectives.values())

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        output = self.model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                                    needed=self.needed(batch)) if self.readers else None  # one pass for all readers
        losses = [objective(self.model, batch, output) for objective in self.objectives.values()]
        return sum(loss for loss, _ in losses), {name: value for _, metrics in losses for name, value in metrics.items()}

    def needed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Where the encoder's last layer must run: every position a reader reads ([B, T] bool),
        or None (everywhere) when one of them reads them all."""
        needed = [objective.needed_positions(batch) for objective in self.readers]
        return None if any(n is None for n in needed) else functools.reduce(torch.logical_or, needed)


def learning_rate(done: float, total: float, *, peak: float, warmup: float, schedule: str = "linear",
                  min_lr: float = 0.0, wsd_decay: float = 0.2) -> float:
    """A linear warm-up from 0 to `peak` over the first `warmup` share of `total` (Adam's
    moment estimates are noisy in the first steps, and big early updates can wreck post-LN
    training), then the `schedule`'s way down to `min_lr` at `total`:

        linear   straight down (BERT's)
        cosine   half a cosine: slow, fast, slow
        wsd      warmup-stable-decay: the peak held until the last `wsd_decay` share of the
                 run, then straight down (ModernBERT's): a run can be extended from any
                 checkpoint of its stable phase

    `done` and `total` count optimizer steps, or seconds under --budget (the schedule is then
    stretched to end at the deadline, as the academic-budget BERT recipe does). With W warm-up
    units (round(warmup · total)), unit k of the warm-up gets (k + 1)/W of the peak: the first
    already gets 1/W, so no step is wasted at lr 0.
    """
    warmup_units = round(warmup * total)
    if done < warmup_units:
        return peak * min(1.0, (done + 1) / warmup_units)
    return min_lr + (peak - min_lr) * SCHEDULES[schedule](done, total, warmup_units, wsd_decay)


def linear(done: float, total: float, warmup_units: int, wsd_decay: float) -> float:
    """The share of the way from `min_lr` to the peak left after warm-up: 1 -> 0, straight."""
    return max(0.0, (total - done) / max(1, total - warmup_units))


def cosine(done: float, total: float, warmup_units: int, wsd_decay: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * min(1.0, 1 - linear(done, total, warmup_units, wsd_decay))))


def wsd(done: float, total: float, warmup_units: int, wsd_decay: float) -> float:
    return max(0.0, min(1.0, (total - done) / max(1, round(wsd_decay * total))))


SCHEDULES = {"linear": linear, "cosine": cosine, "wsd": wsd}


@dataclass(frozen=True)
class LoopSettings:
    """Everything the loop (and the optimizer it steps) reads of a run, and nothing else.

    Pretraining's `Settings` holds these among its many flags (`LoopSettings.of`);
    fine-tuning sets them from its own few flags, so both run the same step, schedule,
    clipping, NaN policy and metrics log.
    """

    steps: int  # optimizer steps (unless budget_seconds is set)
    lr: float  # peak learning rate
    warmup: float  # share of the run spent warming the learning rate up
    weight_decay: float  # AdamW's, on matrices only
    clip: float  # gradient-norm clip (0 = none)
    seed: int  # the run's seed (fine-tuning's batch order)
    log_every: int  # a metrics.jsonl line every N steps (and at the end)
    eval_every: int  # held-out evaluation every N steps (and at the end)
    save_every: int  # a checkpoint every N steps (and at the end)
    eval_batches: int = 0  # held-out batches per evaluation
    skip_nonfinite: bool = False  # skip (and count) NaN/Inf steps instead of stopping
    budget_seconds: float | None = None  # train for this long instead of `steps`
    out: str | None = None  # where the run's checkpoints are, for the NaN message
    schedule: str = "linear"  # the learning rate after warm-up: a name in SCHEDULES
    min_lr: float = 0.0  # where the schedule ends
    wsd_decay: float = 0.2  # wsd: the final share of the run spent decaying
    stop_at: int | None = None  # end this part of the run at this step (a first phase); the schedule runs over `steps`

    @classmethod
    def of(cls, settings) -> "LoopSettings":
        """The loop's part of a pretraining run's `Settings` (same names)."""
        return cls(**{field.name: getattr(settings, field.name) for field in fields(cls)})


@dataclass
class Progress:
    step: int = 0  # optimizer steps done
    skipped_steps: int = 0  # steps skipped for a NaN/Inf loss (--skip-nonfinite)
    saved_step: int | None = None  # the newest checkpoint
    elapsed: float = 0.0  # seconds spent in the loop, over every resumed part of the run

    def position(self, settings: LoopSettings) -> tuple[float, float]:
        """(done, total) in the run's own unit: optimizer steps, or seconds of its --budget."""
        budget = settings.budget_seconds
        return (self.step, settings.steps) if budget is None else (self.elapsed, budget)

    def running(self, settings: LoopSettings) -> bool:
        """Not at the end yet: of the steps (or the --budget), or of this phase (--stop-at)."""
        done, total = self.position(settings)
        return done < total and self.step < (settings.stop_at or math.inf)


@dataclass
class Step:
    """What one optimizer step left. `taken` is False when a NaN/Inf loss or gradient was found
    before the update, which then did not happen; `metrics` (device tensors) go into the logged
    means, and are empty when nothing of the step does (not taken, or an fp16 overflow)."""

    metrics: dict[str, torch.Tensor] = field(default_factory=dict)
    taken: bool = True


def train(module, optimizer, streams, eval_batches, settings: LoopSettings, progress: Progress, *, dist: Processes,
          device: torch.device, amp: MixedPrecision, log: Log, report: Evaluations | None = None,
          save: Callable[[Progress], None] | None = None) -> dict:
    """Run optimizer steps until `settings.steps` (or the --budget deadline, or --stop-at);
    return the last logged record. `streams`: one batch iterator per micro-step.
    `eval_batches`: the held-out batches, shown and checked by `report` (None: no evaluation).
    `save(progress)` writes a checkpoint (None: the run keeps none, as fine-tuning)."""
    model = dist.wrap(module, device)  # DDP under torchrun; the module itself in one process
    window, record = Window(), {}
    if progress.step == 0 and eval_batches is not None:  # where learning starts from
        record = {"step": 0, "elapsed_s": 0.0, **report.baselines}
        held_out(record, 0.0, module, eval_batches, settings, device, amp, report, dist)
        if dist.is_main:
            log.write(record)
    started, elapsed_before = time.perf_counter(), progress.elapsed
    schedule = dict(peak=settings.lr, warmup=settings.warmup, schedule=settings.schedule, min_lr=settings.min_lr,
                    wsd_decay=settings.wsd_decay)
    model.train()  # evaluate() switches back to training mode after each evaluation
    with progress_bar(progress, settings, dist) as bar:
        while progress.running(settings):
            lr = learning_rate(*progress.position(settings), **schedule)
            if not train_step(model, optimizer, streams, lr, settings, dist, amp, window).taken:
                if not settings.skip_nonfinite:
                    raise nonfinite_loss(progress.step + 1, progress, settings, resumable=save is not None)
                progress.skipped_steps += 1
            progress.step += 1
            progress.elapsed = elapsed_before + time.perf_counter() - started
            if settings.budget_seconds is not None:  # every process must agree when the run ends: rank 0's clock decides
                progress.elapsed = dist.broadcast_float(progress.elapsed)
            done, total = progress.position(settings)
            bar.update(min(bar.total, round(done)) - bar.n)

            log_now, evaluate_now, save_now = due(progress, settings, save is not None)
            if (log_now or save_now) and (bad := window.first_nonfinite(progress.step, dist)):
                raise nonfinite_loss(bad, progress, settings, resumable=save is not None)  # before any record or save
            if log_now:
                record = {"step": progress.step, "elapsed_s": round(progress.elapsed, 2), **window.summary(dist), "lr": lr,
                          "skipped_steps": progress.skipped_steps}
                if evaluate_now and eval_batches is not None:
                    held_out(record, done / total, module, eval_batches, settings, device, amp, report, dist)
                if dist.is_main:
                    log.write(record)
                    bar.set_postfix(postfix(record))
            if save_now:
                save(progress)
                progress.saved_step = progress.step
    return record


def train_step(model, optimizer, streams, lr: float, settings: LoopSettings, dist: Processes, amp: MixedPrecision,
               window: Window) -> Step:
    """One optimizer step over len(streams) micro-batches, whose gradients add up (gradient accumulation)."""
    for group in optimizer.param_groups:  # the schedule's learning rate for this step
        group["lr"] = lr * group.get("lr_scale", 1.0)  # fine-tuning's layer-wise decay (build_optimizer's lr_scales)
    metrics: dict[str, torch.Tensor] = {}
    for micro, stream in enumerate(streams):
        batch = window.read(next(stream), amp.device)
        sync_gradients(model, dist, micro == len(streams) - 1)
        with amp.autocast:
            loss, values = model(batch)  # forward: the loss of each objective, and their sum
        amp.scaler.scale(loss / len(streams)).backward()  # backward (fp16: of the loss times the loss scale)
        metrics = {n: metrics.get(n, 0.0) + v.detach().float() / len(streams) for n, v in {"loss": loss, **values}.items()}
    amp.scaler.unscale_(optimizer)  # fp16: the gradients divided back, so that clipping sees the true norm
    metrics["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip or math.inf)
    step = window.check(metrics, dist, amp, now=settings.skip_nonfinite or amp.scales)
    if step.taken:
        amp.scaler.step(optimizer)  # the optimizer's step (fp16 after an overflow: none, and a smaller loss scale)
        amp.scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return step


def sync_gradients(model, dist: Processes, now: bool) -> None:
    """DDP averages the gradients during backward; with gradient accumulation, on the last micro-step
    only (`now`): the others add to each process's own gradients, with no communication."""
    if dist.enabled:
        model.require_backward_grad_sync = now


class Window:
    """The steps since the last log line: each taken step's metrics, and the tokens read.

    The host never waits for the device in a step: the tokens are counted before the batch is
    copied, and whether a step's loss or gradient was NaN/Inf stays on the device, in
    `nonfinite`, until the next logging or saving step reads it (`first_nonfinite`: `train`
    then stops the run, before any record or checkpoint). Only --skip-nonfinite and fp16 read
    it at once (`check`): they must decide before the update.
    """

    def __init__(self):
        self.metrics: list[dict[str, torch.Tensor]] = []
        self.tokens = 0
        self.nonfinite: list[torch.Tensor] = []  # each step's [loss, gradient] NaN/Inf flags not read yet, on the device
        self.started = time.perf_counter()

    def read(self, batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
        """The batch on the device, its real tokens counted on the host, before the copy."""
        self.tokens += int(batch["attention_mask"].sum())
        return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}

    def check(self, metrics: dict[str, torch.Tensor], dist: Processes, amp: MixedPrecision, now: bool) -> Step:
        """The step as taken, its NaN/Inf flags kept for later; or, `now`, decided by one read of the device."""
        flags = (~torch.isfinite(torch.stack([metrics["loss"], metrics["grad_norm"].float()]))).float()  # [loss, gradient]
        if now:
            return self.decide(flags, metrics, dist, amp)
        self.nonfinite.append(flags)
        self.metrics.append(metrics)
        return Step(metrics)

    def decide(self, flags: torch.Tensor, metrics: dict[str, torch.Tensor], dist: Processes, amp: MixedPrecision) -> Step:
        """The step decided before its update (--skip-nonfinite, fp16): one read of the device,
        where one process's NaN/Inf decides for all of them; what it means is the format's (`amp.verdict`)."""
        step = amp.verdict(*(dist.sum(flags) > 0).tolist(), metrics)
        if step.metrics:
            self.metrics.append(step.metrics)
        return step

    def first_nonfinite(self, step: int, dist: Processes) -> int | None:
        """The first step since the last look (`step` being the newest) whose loss or gradient
        was NaN/Inf in any process, or None: one read of the device for all of them."""
        flags = dist.sum(torch.stack(self.nonfinite)).amax(1).tolist() if self.nonfinite else []
        self.nonfinite = []
        return next((step - len(flags) + 1 + i for i, flag in enumerate(flags) if flag), None)

    def summary(self, dist: Processes) -> dict[str, float]:
        """Means over the window and over all processes; starts a new window."""
        result = {}
        if self.metrics:
            names = sorted(self.metrics[0])
            means = torch.stack([torch.stack([step[n] for step in self.metrics]).mean() for n in names])
            result = dict(zip(names, (dist.sum(means) / dist.world_size).tolist()))
        result["tokens_per_s"] = self.tokens * dist.world_size / max(time.perf_counter() - self.started, 1e-9)
        self.__init__()
        return result


def due(progress: Progress, settings: LoopSettings, saves: bool) -> tuple[bool, bool, bool]:
    """What the step just done is due for: (a log line, a held-out evaluation, a checkpoint).
    Each comes every so many steps, and all three at the end (an evaluation is logged too)."""
    last = not progress.running(settings)
    evaluate_now = progress.step % settings.eval_every == 0 or last
    save_now = saves and (progress.step % settings.save_every == 0 or last)
    return progress.step % settings.log_every == 0 or evaluate_now, evaluate_now, save_now


def progress_bar(progress: Progress, settings: LoopSettings, dist: Processes) -> tqdm:
    """The bar on rank 0, in steps, or in seconds of the --budget."""
    unit, total = ("step", settings.steps) if settings.budget_seconds is None else ("s", round(settings.budget_seconds))
    return tqdm(total=total, initial=min(total, round(progress.position(settings)[0])), disable=not dist.is_main,
                unit=unit, dynamic_ncols=True)


def held_out(record: dict, fraction: float, module, batches, settings: LoopSettings, device: torch.device,
             amp: MixedPrecision, report: Evaluations, dist: Processes) -> None:
    """A held-out evaluation into `record`, shown in one line (above the progress bar: the
    curve stays on screen) and checked by `report`; `fraction`: the share of the run done."""
    record.update(evaluate(module, batches, settings.eval_batches, device, amp.autocast))
    if dist.is_main:
        tqdm.write(report.line(record))
        sys.stdout.flush()
    report.check(record, fraction)


def nonfinite_loss(step: int, progress: Progress, settings: LoopSettings, resumable: bool) -> NonFiniteLoss:
    """The error that stops a run whose loss or gradient became NaN/Inf at `step`, with the ways out."""
    if not resumable:
        return NonFiniteLoss(f"the loss became NaN/Inf at step {step}. Lower --lr (now {settings.lr:g}) or "
                             f"raise --warmup, or pass --skip-nonfinite to skip such steps")
    kept = f"the last good checkpoint (step {progress.saved_step})" if progress.saved_step else "no checkpoint yet"
    return NonFiniteLoss(
        f"the loss became NaN/Inf at step {step}; {settings.out} keeps {kept}. "
        f"Lower --lr (or raise --warmup) and rerun with --resume, or pass --skip-nonfinite to skip such steps"
    )


def postfix(record: dict) -> dict[str, str]:
    """The progress bar's numbers: the training loss and throughput (evaluations get a line of their own)."""
    return {"loss": f"{record.get('loss', math.nan):.3f}", "tok_s": f"{record['tokens_per_s']:.0f}"}
