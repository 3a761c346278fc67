"""The one training loop — every variant, one process or many, CPU or GPU.

    for each optimizer step, until --steps are done (or the --budget deadline is reached):
        lr ← warm-up / decay schedule(step, or seconds spent)
        for each of the grad_accum micro-batches:
            loss, metrics = module(batch)         # the objectives of the variant, summed
            backward(loss / grad_accum)           # DDP averages gradients on the last one only
        clip the gradient norm; a NaN/Inf loss or gradient stops the run (or skips the step)
        AdamW step                                # fp16: loss scaling around backward and step
        now and then: a line in metrics.jsonl, held-out evaluation, a checkpoint

`module` is whatever is trained: anything that maps a batch to (loss, metrics) — a
`Pretrainer` (the kept model and its objectives), or a task model's loss (minibert/finetune); so
nothing here knows, or asks, which variant or task it trains. What the loop reads of a
run is `LoopSettings`: pretraining fills it from its `Settings`, fine-tuning from its flags.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, fields

import torch
from tqdm import tqdm

from .distributed import Distributed
from .errors import NonFiniteLoss, warn
from .metrics import MetricsLog, Window
from .optim import learning_rate
from .precision import Precision


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
    seed: int  # of held-out evaluation's random draws
    precision: str  # a name in precision.PRECISIONS
    log_every: int  # a metrics.jsonl line every N steps (and at the end)
    eval_every: int  # held-out evaluation every N steps (and at the end)
    save_every: int  # a checkpoint every N steps (and at the end)
    eval_batches: int = 0  # held-out batches per evaluation
    skip_nonfinite: bool = False  # skip (and count) NaN/Inf steps instead of stopping
    budget_seconds: float | None = None  # train for this long instead of `steps`
    out: str | None = None  # where the run's checkpoints are, for the NaN message

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

    def fraction(self, settings: LoopSettings) -> float:
        """How much of the run is done: of its steps, or of its --budget."""
        done, total = self.position(settings)
        return done / total

    def finished(self, settings: LoopSettings) -> bool:
        return self.fraction(settings) >= 1.0


def train(module, optimizer, streams, eval_batches, settings: LoopSettings, progress: Progress, *,
          dist: Distributed, device: torch.device, save=None, log: MetricsLog, baselines: dict | None = None) -> dict:
    """Run optimizer steps until `settings.steps` (or the `--budget` deadline); return the
    last logged record. `streams`: one batch iterator per micro-step. `save(progress)`
    writes a checkpoint (None: the run keeps none, as fine-tuning). `baselines`: the
    held-out accuracies of the unigram and neighbour-count guesses (data/baselines.py),
    logged once at step 0, shown beside the model's and used by the plateau warning."""
    ddp = dist.wrap(module, device)
    window, record = Window(), {}
    baselines = baselines or {}
    plateau = PlateauWarning(baselines)
    budget = settings.budget_seconds
    amp = Precision.of(settings.precision, device)  # --precision: autocast, and loss scaling for fp16
    if progress.step == 0 and eval_batches is not None:  # where learning starts from
        log.write({"step": 0, "elapsed_s": 0.0, **baselines, **evaluate(module, eval_batches, settings, device, amp)})
    total, unit = round(progress.position(settings)[1]), "step" if budget is None else "s"  # for the progress bar
    started, elapsed_before = time.perf_counter(), progress.elapsed
    with tqdm(total=total, initial=min(total, round(progress.fraction(settings) * total)), disable=not dist.is_main,
              unit=unit, dynamic_ncols=True) as bar:
        while not progress.finished(settings):
            lr = learning_rate(*progress.position(settings), peak=settings.lr, warmup=settings.warmup)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if not train_step(ddp, optimizer, streams, settings, dist, amp, window):
                if not settings.skip_nonfinite:
                    raise nonfinite_loss(progress, settings, resumable=save is not None)
                progress.skipped_steps += 1
            progress.step += 1
            seconds = time.perf_counter() - started
            # Every process must agree when a --budget run ends: rank 0's clock decides.
            progress.elapsed = elapsed_before + (seconds if budget is None else dist.broadcast_float(seconds))
            bar.update(min(total, round(progress.fraction(settings) * total)) - bar.n)

            step, last = progress.step, progress.finished(settings)
            evaluate_now = step % settings.eval_every == 0 or last
            if step % settings.log_every == 0 or evaluate_now:
                record = {"step": step, "elapsed_s": round(progress.elapsed, 2), **window.summary(dist), "lr": lr,
                          "skipped_steps": progress.skipped_steps}
                if evaluate_now and eval_batches is not None:
                    record.update(evaluate(module, eval_batches, settings, device, amp))
                    plateau.check(record, progress.fraction(settings))
                if dist.is_main:
                    log.write(record)
                    bar.set_postfix(postfix(record, baselines))
            if save is not None and (step % settings.save_every == 0 or last):
                save(progress)
                progress.saved_step = step
    return record


def nonfinite_loss(progress: Progress, settings: LoopSettings, resumable: bool) -> NonFiniteLoss:
    """The error that stops a run whose loss or gradient became NaN/Inf, with the ways out."""
    if not resumable:
        return NonFiniteLoss(f"the loss became NaN/Inf at step {progress.step + 1}. Lower --lr (now {settings.lr:g}) or "
                             f"raise --warmup, or pass --skip-nonfinite to skip such steps")
    kept = f"the last good checkpoint (step {progress.saved_step})" if progress.saved_step else "no checkpoint yet"
    return NonFiniteLoss(
        f"the loss became NaN/Inf at step {progress.step + 1}; {settings.out} keeps {kept}. "
        f"Lower --lr (or raise --warmup) and rerun with --resume, or pass --skip-nonfinite to skip such steps"
    )


def postfix(record: dict, baselines: dict) -> dict[str, str]:
    """The progress bar's numbers: training loss, throughput and the latest held-out
    accuracy, beside what the unigram and neighbour-count guesses score on the same positions."""
    shown = {"loss": f"{record.get('loss', math.nan):.3f}", "tok_s": f"{record['tokens_per_s']:.0f}"}
    if "eval_mlm_accuracy" in record:
        shown["mlm_acc"] = f"{record['eval_mlm_accuracy']:.3f}" + (
            f" (unigram {baselines['baseline_unigram_accuracy']:.3f}, neighbours {baselines['baseline_neighbour_accuracy']:.3f})"
            if baselines else "")
    if "eval_rtd_auc" in record:
        shown["rtd_auc"] = f"{record['eval_rtd_auc']:.3f}"
    return shown


class PlateauWarning:
    """Warn once when a run is still at the unigram plateau late in its steps or budget.

    Held-out MLM accuracy within 1.5× of always guessing the most frequent token, past half
    of the run, means the model has learned token frequencies and little else; the
    academic-budget BERT recipe kills such runs early rather than spend the rest of the
    budget on them.
    """

    LATE = 0.5  # share of the run after which the check applies
    MARGIN = 1.5  # "at the plateau": accuracy below this multiple of the unigram guess

    def __init__(self, baselines: dict):
        self.unigram = baselines.get("baseline_unigram_accuracy")
        self.warned = False

    def check(self, record: dict, fraction: float) -> None:
        accuracy = record.get("eval_mlm_accuracy")
        if self.warned or self.unigram is None or accuracy is None or fraction < self.LATE:
            return
        if accuracy < self.MARGIN * self.unigram:
            self.warned = True
            warn(f"step {record['step']}, {fraction:.0%} of the run: held-out MLM accuracy {accuracy:.3f} is still at the "
                 f"unigram plateau (always guessing the most frequent token scores {self.unigram:.3f}); the model has "
                 f"learned token frequencies only. Try a lower --lr or more --warmup (docs/training.md: Time to quality)")


def train_step(ddp, optimizer, streams, settings: LoopSettings, dist: Distributed, amp: Precision, window: Window) -> bool:
    """One optimizer step over len(streams) micro-batches; False if it was not taken (NaN/Inf).

    With fp16 the gradients are unscaled before clipping, and a step whose scaled gradients
    overflowed (with a finite loss) is skipped by the scaler, which lowers the loss scale: that
    is loss scaling at work, so it counts as taken, not as a NaN/Inf fault, and stays out of
    the logged means."""
    ddp.train()
    device = amp.device
    step_metrics: dict[str, torch.Tensor] = {}
    for micro, stream in enumerate(streams):
        batch = next(stream)
        window.tokens += int(batch["attention_mask"].sum())
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
        with dist.no_sync(ddp, sync=micro == len(streams) - 1):
            with amp.autocast():
                loss, metrics = ddp(batch)
            amp.backward(loss / len(streams))
        for name, value in {"loss": loss, **metrics}.items():
            step_metrics[name] = step_metrics.get(name, 0.0) + value.detach().float() / len(streams)
    amp.unscale(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), settings.clip or math.inf)
    nonfinite = ~torch.isfinite(torch.stack([step_metrics["loss"], grad_norm.float()]))
    bad_loss, bad_grad = (dist.sum(nonfinite.float()) > 0).tolist()  # any process: all decide together
    if bad_loss or (bad_grad and not amp.scales):
        optimizer.zero_grad(set_to_none=True)
        return False
    amp.step(optimizer)  # fp16 after an overflow: no update, a smaller loss scale
    optimizer.zero_grad(set_to_none=True)
    if not bad_grad:
        window.add({**step_metrics, "grad_norm": grad_norm, **amp.metrics()})
    return True


@torch.no_grad()
def evaluate(module, batches, settings: LoopSettings, device: torch.device, amp: Precision | None = None) -> dict[str, float]:
    """Mean metrics over the first `eval_batches` held-out batches, as `eval_*`.

    The same batches every time, and random draws (ELECTRA's samples) from a generator
    seeded for evaluation, so numbers are comparable across steps and evaluation does not
    change the training run's own random stream.
    """
    amp = amp or Precision.of(settings.precision, device)
    module.eval()
    sums: dict[str, float] = {}
    count = 0
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        torch.manual_seed(settings.seed)
        for batch in itertools.islice(batches, settings.eval_batches):
            batch = {name: tensor.to(device) for name, tensor in batch.items()}
            with amp.autocast():
                loss, metrics = module(batch)
            for name, value in {"loss": loss, **metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            count += 1
    module.train()
    return {f"eval_{name}": value / count for name, value in sums.items()}
