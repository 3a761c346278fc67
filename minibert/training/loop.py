"""The one training loop — every variant, one process or many, CPU or GPU — and what it trains.

    for each optimizer step, until --steps are done (or the --budget deadline is reached):
        lr ← warm-up, then the --schedule's way down: linear, cosine, or warmup-stable-decay
             (of the step, or of the seconds spent)
        for each of the grad_accum micro-batches:
            loss, metrics = module(batch)         # the objectives of the variant, summed
            backward(loss / grad_accum)
        clip the gradient norm
        AdamW step (optimizer.py), taken even after a NaN/Inf loss or gradient: the next log or
             save step finds it and stops the run, naming that step, before it writes anything
             (--skip-nonfinite, and fp16, look before the update: NonfiniteCheck)
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
(runs/run.py) or a fine-tuning job builds them, and they are named by what provides them:
`dist` is an operations/distributed.py:Distributed, `amp` an operations/precision.py:Precision,
`log` a runs/metrics.py:MetricsLog, `report` a runs/report.py:HeldOutReport (the chapter imports
none of that machinery).
"""

from __future__ import annotations

import functools
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from tqdm import tqdm

from ..objectives import Objective
from .evaluate import evaluate
from .settings import LoopSettings


class NonFiniteLoss(RuntimeError):
    """A run whose loss or gradient became NaN/Inf; the message names the step and the ways out."""


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
        self.sharing_pass = [objective for objective in objectives.values() if objective.shares_pass]
        # a pooler that no objective reads gets no gradient: DDP must be told (operations/distributed.py)
        self.unused_parameters = model.encoder.pooler is not None and not any(o.reads_pooler for o in objectives.values())

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        output = self.model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                                    needed=self.needed(batch)) if self.sharing_pass else None  # one pass, shared
        losses = [objective(self.model, batch, output) for objective in self.objectives.values()]
        return sum(loss for loss, _ in losses), {name: value for _, metrics in losses for name, value in metrics.items()}

    def needed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Where the encoder's last layer must run: every position an objective sharing the pass
        reads ([B, T] bool), or None (everywhere) when one of them reads them all."""
        needed = [objective.needed_positions(batch) for objective in self.sharing_pass]
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


@dataclass
class Progress:
    step: int = 0  # optimizer steps done
    skipped_steps: int = 0  # steps skipped for a NaN/Inf loss (--skip-nonfinite)
    saved_step: int | None = None  # the newest checkpoint
    elapsed: float = 0.0  # seconds spent in the loop, over every resumed part of the run
    stopped: bool = False  # an evaluation ended the run before its steps (fine-tuning's --patience)

    def position(self, settings: LoopSettings) -> tuple[float, float]:
        """(done, total) in the run's own unit: optimizer steps, or seconds of its --budget."""
        return (self.step, settings.steps) if settings.budget_seconds is None else (self.elapsed, settings.budget_seconds)

    def finished(self, settings: LoopSettings) -> bool:
        """At the end: of the steps (or the --budget), or of this phase (--stop-at)."""
        done, total = self.position(settings)
        return self.stopped or done >= total or self.step >= (settings.stop_at or math.inf)


def train(module, optimizer, micro_batches, eval_batches, settings: LoopSettings, progress: Progress, *, dist,
          device: torch.device, amp, log, report=None, save: Callable[[Progress], None] | None = None,
          evaluation: Callable[[dict, float], None] | None = None) -> dict:
    """Run optimizer steps until `settings.steps` (or the --budget deadline, or --stop-at);
    return the last logged record. `micro_batches`: one batch iterator per micro-step.
    `eval_batches`: the held-out batches, shown and checked by `report` (None: `evaluation`, if
    given, else no evaluation). `save(progress)` writes a checkpoint (None: the run keeps none).
    `evaluation(record, fraction)`: a held-out evaluation of the run's own, used when there are no
    `eval_batches` (fine-tuning's dev scores)."""
    pretrainer = dist.wrap(module, device)  # DDP under torchrun; the module itself in one process
    if eval_batches is not None:
        evaluation = functools.partial(evaluate_held_out, module, eval_batches, settings.eval_batches, device, amp, report, dist)
    logbook = Logbook(log, dist, evaluation)
    nonfinite = NonfiniteCheck(progress, settings, dist, amp, resumable=save is not None)
    micro_batches = [map(logbook.count_tokens, batches) for batches in micro_batches]  # each batch's tokens counted as it is read
    record = logbook.write_start(report.baselines) if progress.step == 0 and eval_batches is not None else {}
    clock = Clock(progress, settings, dist)
    schedule = dict(peak=settings.lr, warmup=settings.warmup, schedule=settings.schedule, min_lr=settings.min_lr,
                    wsd_decay=settings.wsd_decay)
    pretrainer.train()  # evaluate() switches back to training mode after each evaluation
    with progress_bar(progress, settings, dist) as bar:
        while not progress.finished(settings):
            lr = learning_rate(*progress.position(settings), **schedule)
            logbook.add(train_step(pretrainer, optimizer, micro_batches, lr, settings, dist, amp, nonfinite))  # its metrics
            progress.step, progress.elapsed = progress.step + 1, clock.seconds()
            bar.update(min(bar.total, round(progress.position(settings)[0])) - bar.n)
            log_now, evaluate_now, save_now = what_is_due(progress, settings, saves=save is not None)
            if log_now or save_now:
                nonfinite.stop_if_any()  # a NaN/Inf since the last look stops the run before any record or save
                if log_now:
                    record = logbook.write(progress, lr, settings, evaluate_now, bar)
                if save_now:
                    save(progress)
                    progress.saved_step = progress.step
    return record


def train_step(pretrainer, optimizer, micro_batches, lr: float, settings: LoopSettings, dist, amp,
               nonfinite: NonfiniteCheck) -> dict[str, torch.Tensor] | None:
    """One optimizer step over len(micro_batches) micro-batches, whose gradients add up (gradient
    accumulation). `pretrainer`: the module trained, batch -> (loss, metrics), wrapped in DDP under
    torchrun (a `Pretrainer`, or fine-tuning's task objective), not the kept model inside it;
    `micro_batches`: one batch iterator per micro-step.
    Returns the step's metrics (device tensors, averaged into the next log line), or None when a NaN/Inf
    loss or gradient was found before the update, which then did not happen: a step skipped under
    --skip-nonfinite (`NonfiniteCheck` stops the run otherwise)."""
    for group in optimizer.param_groups:
        group["lr"] = lr  # the schedule's learning rate for this step
    metrics: dict[str, torch.Tensor] = {}
    for micro, batches in enumerate(micro_batches):
        batch = {name: tensor.to(amp.device, non_blocking=True) for name, tensor in next(batches).items()}
        if dist.enabled:  # DDP averages the gradients during backward: on the last micro-step only (the others add up)
            pretrainer.require_backward_grad_sync = micro == len(micro_batches) - 1
        # amp is the number format (operations/precision.py). In fp32 it changes nothing: autocast is a no-op, and each
        # amp.scaler call below is the plain operation (scale(x) is x, step(optimizer) is optimizer.step()); bf16 and
        # fp16 run the forward's matmuls in 16 bits, and fp16 alone scales the loss
        with amp.autocast:
            loss, values = pretrainer(batch)  # forward: the loss of each objective, and their sum
        amp.scaler.scale(loss / len(micro_batches)).backward()  # backward (fp16: of the loss times the loss scale)
        metrics = {n: metrics.get(n, 0.0) + v.detach().float() / len(micro_batches) for n, v in {"loss": loss, **values}.items()}
    amp.scaler.unscale_(optimizer)  # fp16: the gradients divided back, so that clipping sees the true norm
    metrics["grad_norm"] = torch.nn.utils.clip_grad_norm_(pretrainer.parameters(), settings.clip or math.inf)
    metrics = nonfinite.check(metrics)  # None: a NaN/Inf found now, step skipped; by default looked at later, with no wait for the GPU
    if metrics is not None:
        amp.scaler.step(optimizer)  # the update (fp16 after an overflow: none, and a smaller loss scale)
        amp.scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return metrics


class NonfiniteCheck:
    """What the loop does about a NaN/Inf loss or gradient: stop the run, naming the step, before any
    record or checkpoint; or, under --skip-nonfinite, leave the step's update out and count it.

    When it looks is a GPU speed trick. Reading a device value on the host (`.item()`, `.tolist()`,
    `if tensor:`) makes the host wait until the GPU has run everything queued so far, and the GPU
    then idles while the host prepares the next step: a stall every step. So, by default, a step's
    NaN/Inf flags stay on the device (`kept`), its update is taken, and the next logging or saving
    step reads all of them at once (`stop_if_any`): the host never waits for the GPU within a step.
    Two cases must decide before the update, and read the flags at once, one wait a step:
    --skip-nonfinite, which leaves a faulty step's update out, and fp16 (`amp.scales`), whose loss
    scaling must tell a gradient overflow from a fault.
    """

    def __init__(self, progress: Progress, settings: LoopSettings, dist, amp, resumable: bool):
        self.progress, self.settings, self.dist, self.amp, self.resumable = progress, settings, dist, amp, resumable
        self.at_once = settings.skip_nonfinite or amp.scales
        self.kept: list[torch.Tensor] = []  # each step's [loss, gradient] NaN/Inf flags since the last look, on the device

    def check(self, metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """The step's metrics to log (none: {}), or None when its update must not happen (a skipped step)."""
        self.kept.append((~torch.isfinite(torch.stack([metrics["loss"], metrics["grad_norm"].float()]))).float())
        return self.decide_now(metrics) if self.at_once else metrics  # deferred: no read of the device, no wait

    def decide_now(self, metrics: dict[str, torch.Tensor]) -> dict[str, torch.Tensor] | None:
        """The flags just kept, read at once: one read of the device, where one process's NaN/Inf
        decides for all of them.

        A NaN/Inf loss is a fault in every format: no update. So is a NaN/Inf gradient, except under
        fp16's loss scaling: with a finite loss it means that the scaled gradients overflowed, and the
        scaler's step leaves the update out and lowers the scale. That is loss scaling at work, not a
        fault: the step goes on, and none of its metrics goes into the logged means. A taken fp16
        step logs its loss scale.

        A faulty step stops the run there, or under --skip-nonfinite is counted and skipped (None)."""
        bad_loss, bad_gradient = (self.dist.sum(self.kept.pop()) > 0).tolist()
        if bad_loss or (bad_gradient and not self.amp.scales):
            if not self.settings.skip_nonfinite:
                raise nonfinite_loss(self.progress.step + 1, self.progress, self.settings, self.resumable)
            self.progress.skipped_steps += 1
            return None
        if bad_gradient:
            return {}
        return {**metrics, "loss_scale": torch.tensor(self.amp.scaler.get_scale())} if self.amp.scales else metrics

    def stop_if_any(self) -> None:
        """Stop the run at the first step since the last look (`progress.step` the newest) whose loss
        or gradient was NaN/Inf in any process: one read of the device for all of them."""
        flags = self.dist.sum(torch.stack(self.kept)).amax(1).tolist() if self.kept else []
        self.kept = []
        bad = next((self.progress.step - len(flags) + 1 + i for i, flag in enumerate(flags) if flag), None)
        if bad is not None:
            raise nonfinite_loss(bad, self.progress, self.settings, self.resumable)


class Logbook:
    """The log side of the loop: the records of metrics.jsonl, each over the steps since the last one.

    Between two records it keeps each step's metrics (device tensors, averaged only when a record
    is written: no step waits for the device) and counts the real tokens of each batch as it is
    read (`count_tokens`, on the host, before the batch is copied to the device), for tokens_per_s.
    """

    def __init__(self, log, dist, evaluation: Callable[[dict, float], None] | None):
        self.log, self.dist, self.evaluation = log, dist, evaluation  # evaluation(record, fraction): evaluate_held_out
        self.restart()

    def restart(self) -> None:
        """The next record begins: no steps, no tokens, its clock at now."""
        self.steps: list[dict[str, torch.Tensor] | None] = []
        self.tokens, self.since = 0, time.perf_counter()

    def count_tokens(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch, its real tokens counted: a host tensor, so no wait for the device."""
        self.tokens += int(batch["attention_mask"].sum())
        return batch

    def add(self, metrics: dict[str, torch.Tensor] | None) -> None:
        """A step's metrics; a step with none (skipped: None; an fp16 overflow: {}) adds nothing to the means."""
        self.steps.append(metrics)

    def write_start(self, baselines: dict) -> dict:
        """Step 0's record: where learning starts from, on the held-out batches, beside the baselines."""
        record = {"step": 0, "elapsed_s": 0.0, **baselines}
        self.evaluation(record, 0.0)
        if self.dist.is_main:
            self.log.write(record)
        return record

    def write(self, progress: Progress, lr: float, settings: LoopSettings, evaluate: bool, bar: tqdm) -> dict:
        """The record of the step just done: the means since the last one, and a held-out evaluation if `evaluate`."""
        record = {"step": progress.step, "elapsed_s": round(progress.elapsed, 2), **self.means(), "lr": lr,
                  "skipped_steps": progress.skipped_steps}
        if evaluate and self.evaluation is not None:
            done, total = progress.position(settings)
            self.evaluation(record, done / total)
        if self.dist.is_main:
            self.log.write(record)
            bar.set_postfix(postfix(record))
        return record

    def means(self) -> dict[str, float]:
        """The metrics' means over the steps since the last record and over all processes (one read of
        the device), and the tokens read per second; starts the next record."""
        result, steps = {}, [metrics for metrics in self.steps if metrics]
        if steps:
            names = sorted(steps[0])
            means = torch.stack([torch.stack([step[n] for step in steps]).mean() for n in names])
            result = dict(zip(names, (self.dist.sum(means) / self.dist.world_size).tolist()))
        result["tokens_per_s"] = self.tokens * self.dist.world_size / max(time.perf_counter() - self.since, 1e-9)
        self.restart()
        return result


def evaluate_held_out(module, batches, count: int, device: torch.device, amp, report,
                      dist, record: dict, fraction: float) -> None:
    """A held-out evaluation (evaluate.py) into `record`, shown in one line (above the progress bar:
    the curve stays on screen) and checked by `report`; `fraction`: the share of the run done."""
    record.update(evaluate(module, batches, count, device, amp.autocast))
    if dist.is_main:
        tqdm.write(report.line(record))
        sys.stdout.flush()
    report.check(record, fraction)


class Clock:
    """The seconds the run has spent in the loop, over every resumed part of it. Under --budget they
    decide when the run ends, and every process must agree: rank 0's clock decides."""

    def __init__(self, progress: Progress, settings: LoopSettings, dist):
        self.started, self.before = time.perf_counter(), progress.elapsed
        self.budget, self.dist = settings.budget_seconds, dist

    def seconds(self) -> float:
        seconds = self.before + time.perf_counter() - self.started
        return seconds if self.budget is None else self.dist.broadcast_float(seconds)


def what_is_due(progress: Progress, settings: LoopSettings, saves: bool) -> tuple[bool, bool, bool]:
    """Whether the step just done is due for (a log line, a held-out evaluation, a checkpoint). Each
    comes every so many steps, and all three at the end (an evaluation is logged too)."""
    last = progress.finished(settings)
    log_now, evaluate_now, save_now = (progress.step % every == 0 or last for every in (settings.log_every, settings.eval_every, settings.save_every))
    return log_now or evaluate_now, evaluate_now, saves and save_now


def progress_bar(progress: Progress, settings: LoopSettings, dist) -> tqdm:
    """The bar on rank 0, in steps, or in seconds of the --budget."""
    unit, total = ("step", settings.steps) if settings.budget_seconds is None else ("s", round(settings.budget_seconds))
    return tqdm(total=total, initial=min(total, round(progress.position(settings)[0])), disable=not dist.is_main,
                unit=unit, dynamic_ncols=True)


def nonfinite_loss(step: int, progress: Progress, settings: LoopSettings, resumable: bool) -> NonFiniteLoss:
    """The error that stops a run whose loss or gradient became NaN/Inf at `step`, with the ways out
    (a --resume must keep --lr and --warmup, and may add --skip-nonfinite)."""
    lower = f"a lower --lr (now {settings.lr:g}) or a longer --warmup"
    if not resumable:
        return NonFiniteLoss(f"the loss became NaN/Inf at step {step}. Rerun with {lower}, or pass --skip-nonfinite to skip such steps")
    if not progress.saved_step:
        return NonFiniteLoss(f"the loss became NaN/Inf at step {step}; {settings.out} keeps no checkpoint yet. "
                             f"Start over (--overwrite) with {lower}, or with --skip-nonfinite to skip such steps")
    return NonFiniteLoss(
        f"the loss became NaN/Inf at step {step}; {settings.out} keeps the last good checkpoint (step {progress.saved_step}). "
        f"Go on from it skipping such steps (--resume --skip-nonfinite), or start over (--overwrite) with {lower}"
    )


def postfix(record: dict) -> dict[str, str]:
    """The progress bar's numbers: the training loss and throughput (evaluations get a line of their own)."""
    return {"loss": f"{record.get('loss', math.nan):.3f}", "tok_s": f"{record['tokens_per_s']:.0f}"}
