"""What a run will cost, said before it starts: `python train.py ... --plan`.

    total training FLOPs   --steps × the FLOPs of one step of --batch-size sequences of --seq-len
                           tokens, --mask-prob of them masked (tools/flops.py: its matmuls counted
                           one by one, the whole last layer credited)
    wall time on a GPU     FLOPs / (the device's dense bf16 peak × --plan-utilisation)
    wall time on a CPU     --steps × one step of this run's model timed here (`time_step`: a few
                           steps on random batches of its shape, at the run's threads), plus its
                           held-out evaluations and the building of its corpus (corpus/cost.py)

The device is the one this run would use (--plan-for here), or a named one. A plan counts
full sequences (no padding, no shorter ones): a run of packed full sentences is close to it,
one of segment pairs somewhat below. A CPU has no peak to divide by, so its plan times the step
itself: `python train.py ... --plan` does; the plan a run prints as it starts does not.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from ..config import ModelConfig
from ..data.masking import IGNORE_INDEX
from ..operations.checkpoint import STEP_DIR, Checkpoints
from ..pretrained import from_pretrained
from ..tools.flops import BatchShape, training_flops
from ..training.settings import Settings
from ..variants import SENTENCE_TASKS, Variant, build_pretrainer, run_architecture, run_objectives

# Dense bf16 tensor-core peaks from the vendors' data sheets, TFLOP/s (the T4 has no bf16: fp16).
PEAKS = {"h100": ("H100 SXM", 989), "a100": ("A100", 312), "l4": ("L4", 121), "t4": ("T4", 65)}
CARD_NAMES = (("H100 PCIe", 756), ("H100", 989), ("H200", 989), ("A100", 312), ("L4", 121), ("T4", 65))


def step_flops(variant: Variant, settings: Settings, config: ModelConfig, teacher: ModelConfig | None = None) -> float:
    """Training FLOPs of one optimizer step of this run."""
    # the vocabulary projections: at the masked tokens, or at every token for --kd-all-tokens' soft targets
    predicted = 1.0 if teacher is not None and settings.kd_all_tokens else settings.mask_prob
    shape = BatchShape.uniform(settings.batch_size, settings.seq_len, predicted)
    if "rtd" in run_objectives(variant, settings):
        return training_flops(config, shape, "rtd", settings.generator_fraction)
    flops = training_flops(config, shape)
    if teacher is not None:  # distillation: the teacher's forward too (a third of a training step)
        flops += training_flops(teacher, shape) / 3
    return flops


def device_peak(plan_for: str, device: str) -> tuple[str, float | None]:
    """(the device's name, its dense bf16 peak in TFLOP/s, None when unknown)."""
    if plan_for != "here":
        return PEAKS[plan_for]
    if device in ("auto", "cuda") and torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        return name, next((peak for card, peak in CARD_NAMES if card in name), None)
    return ("this CPU" if device in ("auto", "cpu") else device), None


TIMED_STEPS = 3  # steps timed on a CPU, after one untimed (the first allocates)
EVAL_SHARE = 1 / 3  # a held-out batch costs about a third of a training step: the forward alone


def random_batch(variant: Variant, settings: Settings, config: ModelConfig, generator: torch.Generator) -> dict:
    """A batch of the run's shape: full sequences of random ordinary tokens, --mask-prob of them
    labelled. What a step costs depends on its shape and its labelled share, not on the text."""
    shape = (settings.batch_size, settings.seq_len)
    input_ids = torch.randint(5, config.vocab_size, shape, generator=generator)  # past the special ids
    labels = torch.where(torch.rand(shape, generator=generator) < settings.mask_prob, input_ids, IGNORE_INDEX)
    batch = {"input_ids": input_ids, "attention_mask": torch.ones(shape, dtype=torch.long),
             "token_type_ids": torch.zeros(shape, dtype=torch.long), "labels": labels}
    if any(task in run_objectives(variant, settings) for task in SENTENCE_TASKS):
        batch["sentence_label"] = torch.randint(0, 2, shape[:1], generator=generator)
    return batch


def time_step(variant: Variant, settings: Settings, config: ModelConfig, threads: int) -> float:
    """Seconds of one optimizer step of this run here: the median of TIMED_STEPS steps (forward,
    backward, AdamW) of its model and objectives on a random batch of its shape, at `threads`."""
    torch.set_num_threads(threads)
    pretrainer = build_pretrainer(variant, settings, config)
    optimizer = torch.optim.AdamW(pretrainer.parameters(), lr=1e-4)
    batch = random_batch(variant, settings, config, torch.Generator().manual_seed(0))
    seconds = []
    for _ in range(TIMED_STEPS + 1):
        started = time.perf_counter()
        loss, _ = pretrainer(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - started)
    return sorted(seconds[1:])[TIMED_STEPS // 2]


def duration(seconds: float) -> str:
    hours = seconds / 3600
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if hours < 1 else f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def first_step(continue_from: str | None) -> tuple[int, str]:
    """The step a run starts at, and what the plan says of it: 0, or a second phase's start, the
    newest checkpoint's step of the run it continues (--continue-from)."""
    if continue_from is None:
        return 0, ""
    newest = Checkpoints(Path(continue_from) / "checkpoints").steps()
    if not newest:
        return 0, (f" (--continue-from {continue_from} has no checkpoint yet: counted from step 0, the first "
                   f"phase's steps included; plan again once it has run)")
    step = int(STEP_DIR.fullmatch(newest[0].name).group(1))
    return step, f" (from step {step:,}, where {continue_from} stopped)"


def describe_plan(variant: Variant, settings: Settings, overrides: dict, *, timed: tuple[float, int] | None = None,
                  build_seconds: float = 0.0) -> str:
    """The plan's lines: the run's shape, its FLOPs, and its wall time on the planned device.
    `timed`: (seconds a step, threads), measured here by `time_step`, for a device without a
    known peak (a CPU); `build_seconds`: the corpus still to build, estimated (corpus/cost.py)."""
    teacher, assumed = None, ""
    if variant.needs_teacher:  # the student is half the teacher: BERT-base's shape when the teacher is not at hand
        found = settings.teacher and Path(settings.teacher).is_dir()
        teacher = from_pretrained(settings.teacher, head="mlm").config if found else ModelConfig()
        assumed = "" if found else " (the teacher not found: BERT-base's shape assumed)"
    config = run_architecture(variant, settings, overrides, teacher=teacher)
    per_step = step_flops(variant, settings, config, teacher)
    first, continued = first_step(settings.continue_from)
    steps = (settings.stop_at or settings.steps) - first
    total = per_step * steps
    name, peak = device_peak(settings.plan_for, settings.device)
    lines = [f"plan: {variant.name}, {config.num_layers} layers of width {config.hidden_size}, {steps:,} steps of "
             f"{settings.batch_size} × {settings.seq_len} tokens = {steps * settings.batch_size * settings.seq_len:.2e} tokens"
             f"{assumed}{continued}",
             f"  training FLOPs: {total:.2e} ({per_step:.2e} a step; minibert.tools.flops)"]
    if settings.budget is not None:
        lines[0] += f" (--budget {settings.budget} decides when it ends, not --steps)"
    if peak is None and timed is not None:
        lines.append(cpu_wall_time(settings, steps, *timed, build_seconds))
    elif peak is None:
        lines.append(f"  wall time: unknown, no known peak for {name}; `--plan` alone times a step here, or name a GPU "
                     f"with --plan-for h100|a100|l4|t4")
    else:
        seconds = total / (peak * 1e12 * settings.plan_utilisation)
        lines.append(f"  wall time on one {name}: {duration(seconds)} at {settings.plan_utilisation:.0%} of its "
                     f"{peak} TFLOP/s bf16 peak; on N GPUs about 1/N of it")
    return "\n".join(lines)


def cpu_wall_time(settings: Settings, steps: int, step_seconds: float, threads: int, build_seconds: float) -> str:
    """The plan's wall time on this CPU: the steps at the timed rate, the held-out evaluations
    (at step 0, every --eval-every steps and at the last step, --eval-batches forward passes
    each, as training/loop.py:due has them) and the corpus build."""
    build = f", {duration(build_seconds)} building the corpus" if build_seconds else ""
    rate = f"{step_seconds:.3f} s a step, timed now on random batches of this shape with {threads} thread(s)"
    if settings.budget is not None:
        return f"  wall time here: the --budget, {duration(settings.budget_seconds)}, plus its evaluations{build} ({rate})"
    evaluations = 1 + math.ceil(steps / settings.eval_every)  # step 0, then each --eval-every and the last
    training = steps * step_seconds
    evaluating = evaluations * settings.eval_batches * step_seconds * EVAL_SHARE
    return (f"  wall time here: about {duration(training + evaluating + build_seconds)}: {duration(training)} of steps at "
            f"{rate}; {duration(evaluating)} of {evaluations} held-out evaluations{build}")
