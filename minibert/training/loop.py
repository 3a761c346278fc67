"""The one training loop — every variant, one process or many, CPU or GPU.

    for each optimizer step:
        lr ← warm-up / decay schedule(step)
        for each of the grad_accum micro-batches:
            loss, metrics = model(batch)          # the objectives of the variant, summed
            backward(loss / grad_accum)           # DDP averages gradients on the last one only
        clip the gradient norm; a NaN/Inf loss or gradient stops the run (or skips the step)
        AdamW step                                # fp16: loss scaling around backward and step
        now and then: a line in metrics.jsonl, held-out evaluation, a checkpoint

`model` is a `Pretrainer`, which returns the summed loss of its objectives and their
metrics; so nothing here knows, or asks, which variant it trains.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
from tqdm import tqdm

from .distributed import Distributed
from .errors import NonFiniteLoss
from .metrics import MetricsLog, Window
from .optim import learning_rate
from .precision import Precision
from .settings import Settings


@dataclass
class Progress:
    step: int = 0  # optimizer steps done
    skipped_steps: int = 0  # steps skipped for a NaN/Inf loss (--skip-nonfinite)
    saved_step: int | None = None  # the newest checkpoint


def train(model, optimizer, streams, eval_batches, settings: Settings, progress: Progress, *,
          dist: Distributed, device: torch.device, save, log: MetricsLog) -> dict:
    """Run optimizer steps until `settings.steps`; return the last logged record.
    `streams`: one batch iterator per micro-step."""
    ddp = dist.wrap(model, device)
    window, record = Window(), {}
    amp = Precision.of(settings.precision, device)  # --precision: autocast, and loss scaling for fp16
    if progress.step == 0 and eval_batches is not None:  # where learning starts from
        log.write({"step": 0, **evaluate(model, eval_batches, settings, device)})
    with tqdm(total=settings.steps, initial=progress.step, disable=not dist.is_main, unit="step", dynamic_ncols=True) as bar:
        while progress.step < settings.steps:
            lr = learning_rate(progress.step, settings)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if not train_step(ddp, optimizer, streams, settings, dist, amp, window):
                if not settings.skip_nonfinite:
                    kept = f"the last good checkpoint (step {progress.saved_step})" if progress.saved_step else "no checkpoint yet"
                    raise NonFiniteLoss(
                        f"the loss became NaN/Inf at step {progress.step + 1}; {settings.out} keeps {kept}. "
                        f"Lower --lr (or raise --warmup) and rerun with --resume, or pass --skip-nonfinite to skip such steps"
                    )
                progress.skipped_steps += 1
            progress.step += 1
            bar.update()

            step, last = progress.step, progress.step == settings.steps
            evaluate_now = step % settings.eval_every == 0 or last
            if step % settings.log_every == 0 or evaluate_now:
                record = {"step": step, **window.summary(dist), "lr": lr, "skipped_steps": progress.skipped_steps}
                if evaluate_now and eval_batches is not None:
                    record.update(evaluate(model, eval_batches, settings, device))
                if dist.is_main:
                    log.write(record)
                    bar.set_postfix(loss=f"{record.get('loss', math.nan):.3f}", tok_s=f"{record['tokens_per_s']:.0f}")
            if step % settings.save_every == 0 or last:
                save(progress)
                progress.saved_step = step
    return record


def train_step(ddp, optimizer, streams, settings: Settings, dist: Distributed, amp: Precision, window: Window) -> bool:
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
def evaluate(model, batches, settings: Settings, device: torch.device, amp: Precision | None = None) -> dict[str, float]:
    """Mean metrics over the first `eval_batches` held-out batches, as `eval_*`.

    The same batches every time, and random draws (ELECTRA's samples) from a generator
    seeded for evaluation, so numbers are comparable across steps and evaluation does not
    change the training run's own random stream.
    """
    amp = amp or Precision.of(settings.precision, device)
    model.eval()
    sums: dict[str, float] = {}
    count = 0
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        torch.manual_seed(settings.seed)
        for batch in itertools.islice(batches, settings.eval_batches):
            batch = {name: tensor.to(device) for name, tensor in batch.items()}
            with amp.autocast():
                loss, metrics = model(batch)
            for name, value in {"loss": loss, **metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value)
            count += 1
    model.train()
    return {f"eval_{name}": value / count for name, value in sums.items()}
