"""The one training loop — every variant, one process or many, CPU or GPU — with its optimizer.

    for each optimizer step, until --steps are done (or the --budget deadline is reached):
        lr ← warm-up, then linear decay (of the step, or of the seconds spent)
        for each of the grad_accum micro-batches:
            loss, metrics = module(batch)         # the objectives of the variant, summed
            backward(loss / grad_accum)
        clip the gradient norm; a NaN/Inf loss or gradient stops the run (or skips the step)
        AdamW step
        now and then: a line in metrics.jsonl, held-out evaluation, a checkpoint

`module` is whatever is trained: anything that maps a batch to (loss, metrics) — a
`Pretrainer` (the kept model and its objectives), or a task model's loss (minibert/finetune);
nothing here knows, or asks, which variant or task it trains. What the loop reads of a run is
`LoopSettings`: pretraining fills it from its `Settings`, fine-tuning from its flags.

Two operations read in place and cost nothing where they do nothing: mixed precision is
PyTorch's own recipe (an autocast context, and a GradScaler whose calls pass straight through
unless --precision fp16 turns loss scaling on: operations/precision.py), and DDP
(operations/distributed.py) averages gradients during backward, on the last micro-step only.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, fields

import torch
from tqdm import tqdm

from ..corpus.pipeline import EVAL_SEED
from ..operations.distributed import Distributed
from ..operations.precision import Precision
from ..runs.errors import NonFiniteLoss
from .lamb import Lamb
from ..runs.levers import use_levers
from ..runs.metrics import MetricsLog
from ..runs.report import BehindWarning, evaluation_line


def build_optimizer(model: torch.nn.Module, *, lr: float, weight_decay: float, optimizer: str = "adamw",
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, lr_scales: dict | None = None) -> torch.optim.Optimizer:
    """AdamW (or ALBERT's LAMB, lamb.py) at peak `lr`, decaying the matrices by `weight_decay` and nothing else.

    Weight decay pulls weights towards zero, which regularises matrices; but biases and
    LayerNorm gains only shift and scale, and decaying them just fights the normalisation.
    They are exactly the 1-D parameters, so they form the no-decay group (BERT's exclusions).
    `betas` and `eps` are Adam's (RoBERTa: β2 0.98, for stability at large batches).
    `lr_scales`: {parameter name: lr factor} (fine-tuning's layer-wise decay), each group's "lr_scale".
    """
    trainable = [((lr_scales or {}).get(name, 1.0), p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for s, p in trainable if s == scale and (p.ndim >= 2) == matrix],  # not matrix: biases, LayerNorm
               "weight_decay": weight_decay if matrix else 0.0, **({"lr_scale": scale} if lr_scales else {})}
              for scale in dict.fromkeys(s for s, _ in trainable) for matrix in (True, False)]  # two groups per lr factor
    kind = Lamb if optimizer == "lamb" else torch.optim.AdamW
    return kind(groups, lr=lr, betas=tuple(betas), eps=eps)


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
    clipping, NaN policy, precision and metrics log.
    """

    steps: int  # optimizer steps (unless budget_seconds is set)
    lr: float  # peak learning rate
    warmup: float  # share of the run spent warming the learning rate up
    weight_decay: float  # AdamW's, on matrices only
    clip: float  # gradient-norm clip (0 = none)
    seed: int  # the run's seed (fine-tuning's batch order)
    precision: str  # a name in precision.PRECISIONS
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
    compile: bool = False  # the layers under torch.compile (runs/levers.py)
    checkpoint_activations: bool = False  # each layer's activations recomputed in the backward (runs/levers.py)

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


def train(module, optimizer, streams, eval_batches, settings: LoopSettings, progress: Progress, *,
          dist: Distributed, device: torch.device, save=None, log: MetricsLog, baselines: dict | None = None,
          amp: Precision | None = None, behind: BehindWarning | None = None) -> dict:
    """Run optimizer steps until `settings.steps` (or the `--budget` deadline); return the
    last logged record. `streams`: one batch iterator per micro-step. `save(progress)`
    writes a checkpoint (None: the run keeps none, as fine-tuning). `baselines`: the
    held-out accuracies of the unigram and neighbour-count guesses (corpus/baselines.py),
    logged once at step 0 and shown beside the model's. `amp`: the run's --precision (its
    loss scale goes into checkpoints), else made here. `behind`: the run's check against its
    variant's default band (runs/report.py); by default the plateau check alone."""
    # DDP under torchrun (the module itself in one process); some modules leave a parameter unused
    use_levers(module, compile=settings.compile, checkpoint_activations=settings.checkpoint_activations)
    model = dist.wrap(module, device, find_unused_parameters=getattr(module, "unused_parameters", False))
    amp = amp or Precision.of(settings.precision, device)  # --precision: autocast, and loss scaling for fp16
    window, record, baselines = Window(), {}, baselines or {}
    behind = behind or BehindWarning(baselines)
    if progress.step == 0 and eval_batches is not None:  # where learning starts from
        record = {"step": 0, "elapsed_s": 0.0, **baselines, **evaluate(module, eval_batches, settings, device, amp)}
        log.write(record)
        if dist.is_main:
            print(evaluation_line(record, baselines), flush=True)
    unit, total = ("step", settings.steps) if settings.budget_seconds is None else ("s", round(settings.budget_seconds))
    started, elapsed_before = time.perf_counter(), progress.elapsed
    stop_at = settings.stop_at or math.inf  # a first phase ends before its schedule does
    schedule = dict(peak=settings.lr, warmup=settings.warmup, schedule=settings.schedule, min_lr=settings.min_lr,
                    wsd_decay=settings.wsd_decay)
    model.train()  # evaluate() switches back to training mode after each evaluation
    with tqdm(total=total, initial=min(total, round(progress.position(settings)[0])), disable=not dist.is_main,
              unit=unit, dynamic_ncols=True) as bar:
        while (position := progress.position(settings))[0] < position[1] and progress.step < stop_at:
            lr = learning_rate(*position, **schedule)
            for group in optimizer.param_groups:
                group["lr"] = lr * group.get("lr_scale", 1.0)  # layer-wise decay (build_optimizer's lr_scales)
            metrics = train_step(model, optimizer, streams, settings, dist, amp, window)
            if metrics is None:  # a NaN/Inf loss or gradient, found before the update (--skip-nonfinite, fp16)
                if not settings.skip_nonfinite:
                    raise nonfinite_loss(progress.step + 1, progress, settings, resumable=save is not None)
                progress.skipped_steps += 1
            if metrics:  # taken, and not an fp16 overflow: into the logged means
                window.metrics.append(metrics)
            progress.step += 1
            progress.elapsed = elapsed_before + time.perf_counter() - started
            if settings.budget_seconds is not None:  # every process must agree when the run ends: rank 0's clock decides
                progress.elapsed = dist.broadcast_float(progress.elapsed)
            (done, _), step = progress.position(settings), progress.step
            bar.update(min(total, round(done)) - bar.n)

            last = done >= position[1] or step >= stop_at
            evaluate_now = step % settings.eval_every == 0 or last
            save_now = save is not None and (step % settings.save_every == 0 or last)
            if (step % settings.log_every == 0 or evaluate_now or save_now) and (bad := window.first_nonfinite(step)):
                raise nonfinite_loss(bad, progress, settings, resumable=save is not None)  # before any record or save
            if step % settings.log_every == 0 or evaluate_now:
                record = {"step": step, "elapsed_s": round(progress.elapsed, 2), **window.summary(dist), "lr": lr,
                          "skipped_steps": progress.skipped_steps}
                if evaluate_now and eval_batches is not None:
                    record.update(evaluate(module, eval_batches, settings, device, amp))
                    if dist.is_main:
                        bar.write(evaluation_line(record, baselines))  # above the bar: the curve stays on screen
                    behind.check(record, done / position[1])
                if dist.is_main:
                    log.write(record)
                    bar.set_postfix(postfix(record))
            if save_now:
                save(progress)
                progress.saved_step = step
    return record


def train_step(model, optimizer, streams, settings: LoopSettings, dist: Distributed, amp: Precision,
               window: "Window") -> dict[str, torch.Tensor] | None:
    """One optimizer step over len(streams) micro-batches: its metrics (empty after an fp16
    overflow), or None when it was not taken (a NaN/Inf loss or gradient).

    The host never waits for the device here: the tokens are counted before the batch is
    copied, and whether the loss or gradient was NaN/Inf stays on the device, in
    `window.nonfinite`, until the next logging or saving step reads it (`train` then stops
    the run, before any record or checkpoint). Only --skip-nonfinite and fp16 read it now
    (one read): they must decide before the update.

    With fp16, the scaler multiplies the loss before backward and divides the gradients back
    before clipping; a step whose scaled gradients overflowed (with a finite loss) is skipped
    by the scaler, which lowers the loss scale: that is loss scaling at work, so it counts as
    taken, not as a NaN/Inf fault, and stays out of the logged means."""
    metrics: dict[str, torch.Tensor] = {}
    for micro, stream in enumerate(streams):
        batch = next(stream)
        window.tokens += int(batch["attention_mask"].sum())  # on the host, before the copy
        batch = {name: tensor.to(amp.device, non_blocking=True) for name, tensor in batch.items()}
        if dist.enabled:  # DDP averages the gradients during backward: on the last micro-step only
            model.require_backward_grad_sync = micro == len(streams) - 1
        with amp.autocast:
            loss, values = model(batch)
        amp.scaler.scale(loss / len(streams)).backward()
        for name, value in {"loss": loss, **values}.items():
            metrics[name] = metrics.get(name, 0.0) + value.detach().float() / len(streams)
    amp.scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.clip or math.inf)
    bad = (~torch.isfinite(torch.stack([metrics["loss"], grad_norm.float()]))).float()  # [loss, gradient]: 1 = NaN/Inf
    if dist.enabled:  # one process's NaN/Inf decides for all of them
        torch.distributed.all_reduce(bad)
    bad_loss = bad_grad = False
    if settings.skip_nonfinite or amp.scales:  # decided before the update: one read of the device
        bad_loss, bad_grad = (bad > 0).tolist()
    else:  # the default: read at the next logging or saving step
        window.nonfinite.append(bad)
    if bad_loss or (bad_grad and not amp.scales):
        optimizer.zero_grad(set_to_none=True)
        return None
    if amp.scales:  # fp16: the loss scale of this step, for metrics.jsonl
        metrics["loss_scale"] = torch.tensor(amp.scaler.get_scale())
    amp.scaler.step(optimizer)  # fp16 after an overflow: no update, and a smaller loss scale
    amp.scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return {} if bad_grad else {**metrics, "grad_norm": grad_norm}


class Window:
    """The steps since the last log line: each taken step's metrics, and the tokens read."""

    def __init__(self):
        self.metrics: list[dict[str, torch.Tensor]] = []
        self.tokens = 0
        self.nonfinite: list[torch.Tensor] = []  # each step's [loss, gradient] NaN/Inf flags not read yet, on the device
        self.started = time.perf_counter()

    def first_nonfinite(self, step: int) -> int | None:
        """The first step since the last look (`step` being the newest) whose loss or gradient
        was NaN/Inf, or None: one read of the device for all of them."""
        flags, self.nonfinite = (torch.stack(self.nonfinite).amax(1).tolist() if self.nonfinite else []), []
        return next((step - len(flags) + 1 + i for i, flag in enumerate(flags) if flag), None)

    def summary(self, dist: Distributed) -> dict[str, float]:
        """Means over the window and over all processes; starts a new window."""
        result = {}
        if self.metrics:
            names = sorted(self.metrics[0])
            means = torch.stack([torch.stack([step[n] for step in self.metrics]).mean() for n in names])
            result = dict(zip(names, (dist.sum(means) / dist.world_size).tolist()))
        result["tokens_per_s"] = self.tokens * dist.world_size / max(time.perf_counter() - self.started, 1e-9)
        self.__init__()
        return result


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
    """The progress bar's numbers: the training loss and throughput (held-out evaluations
    print a line of their own above the bar)."""
    return {"loss": f"{record.get('loss', math.nan):.3f}", "tok_s": f"{record['tokens_per_s']:.0f}"}


@torch.no_grad()
def evaluate(module, batches, settings: LoopSettings, device: torch.device, amp: Precision | None = None) -> dict[str, float]:
    """Mean metrics over the first `eval_batches` held-out batches, as `eval_*`.

    The same batches every time, and random draws (ELECTRA's samples) from a generator
    seeded for evaluation alone (EVAL_SEED, not the run's --seed), so numbers are comparable
    across steps and across runs, and evaluation does not change the run's own random stream.
    """
    amp = amp or Precision.of(settings.precision, device)
    module.eval()
    sums: dict[str, float] = {}
    count = 0
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        torch.manual_seed(EVAL_SEED)
        for batch in itertools.islice(batches, settings.eval_batches):
            batch = {name: tensor.to(device) for name, tensor in batch.items()}
            with amp.autocast:
                loss, metrics = module(batch)
            for name, value in {"loss": loss, **metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            count += 1
    module.train()
    return {f"eval_{name}": value / count for name, value in sums.items()}
