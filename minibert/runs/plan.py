"""What a run will cost, said before it starts: `python train.py ... --plan`.

    total training FLOPs   --steps × the FLOPs of one step of --batch-size sequences of --seq-len
                           tokens, --mask-prob of them masked (runs/flops.py: its matmuls counted
                           one by one, the whole last layer credited)
    wall time on a GPU     FLOPs / (the device's dense bf16 peak × --plan-utilisation)
    wall time on a CPU     --steps × one step of this run's model timed here (`time_step`: a few
                           steps on random batches of its shape, at the run's threads), plus its
                           held-out evaluations and the building of its corpus (corpus/cost.py)

The device is the one this run would use (--plan-for here), or a named one. A plan counts
full sequences (no padding, no shorter ones): a run of packed full sentences is close to it,
one of segment pairs somewhat below. A CPU has no peak to divide by, so its plan times the step
itself: `python train.py ... --plan` does; the plan a run prints as it starts does not.

A plan never takes the machine down. Before it times anything, `time_step` estimates what a
micro-batch's step needs (`StepMemory`: the weights, their gradients and AdamW's two moments,
16 bytes a parameter, counted on a model built without memory; and per sequence, what autograd
keeps of one sequence's forward, measured, with a margin) and times only as many sequences as
fit in half the memory available now (and as keep `--plan` quick), scaling the forward and
backward to the whole micro-batch in proportion; its plan says so in a line of its own. Where
not even one sequence fits, the plan says, in one line, that this machine cannot run the
recipe and the memory it would need.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..config import ModelConfig
from ..corpus.cost import size
from ..data.masking import IGNORE_INDEX
from ..objectives.rtd import generator_config
from ..operations.checkpoint import STEP_DIR, Checkpoints
from ..pretrained import from_pretrained
from .flops import BatchShape, training_flops
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
        return training_flops(config, shape, "rtd", generator_config(config, settings.generator_fraction, settings.generator_heads))
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


TIMED_STEPS = 3  # steps timed on a CPU, after one untimed (the first allocates): the median
EVAL_SHARE = 1 / 3  # a held-out batch costs about a third of a training step: the forward alone
SAFE_SHARE = 0.5  # of the memory available when the plan starts, the most its timed step may use: others share the machine
STATE_BYTES = 16  # a parameter's fp32 weight, its gradient and AdamW's two moments
# What a sequence adds to a step's peak resident memory, as a multiple of the bytes autograd saves
# for it: those, the backward's gradients and the allocator's slack beside them.
MARGIN = 2.5
SLICE_SECONDS = 2.0  # a timed slice's forward and backward take about this long at most, so that --plan stays quick
TIMING_SECONDS = 10.0  # and fewer than TIMED_STEPS are timed past this (one at least)


def available_memory() -> int:
    """Bytes of memory available to a new allocation now: the kernel's MemAvailable (free memory
    and the cache it can reclaim), else the free pages, else all of the physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            continue
    raise OSError("cannot tell how much memory this machine has available")


def random_batch(variant: Variant, settings: Settings, config: ModelConfig, generator: torch.Generator,
                 sequences: int | None = None) -> dict:
    """A batch of the run's shape: full sequences of random ordinary tokens, --mask-prob of them
    labelled. What a step costs depends on its shape and its labelled share, not on the text.
    `sequences`: how many (--batch-size unless given)."""
    shape = (sequences or settings.batch_size, settings.seq_len)
    input_ids = torch.randint(5, config.vocab_size, shape, generator=generator)  # past the special ids
    labels = torch.where(torch.rand(shape, generator=generator) < settings.mask_prob, input_ids, IGNORE_INDEX)
    batch = {"input_ids": input_ids, "attention_mask": torch.ones(shape, dtype=torch.long),
             "token_type_ids": torch.zeros(shape, dtype=torch.long), "labels": labels}
    if any(task in run_objectives(variant, settings) for task in SENTENCE_TASKS):
        batch["sentence_label"] = torch.randint(0, 2, shape[:1], generator=generator)
    return batch


def sequence_estimate(variant: Variant, settings: Settings, config: ModelConfig) -> float:
    """Bytes autograd saves for one sequence's forward, counted before anything is built: an
    upper bound of what `saved_bytes` measures (tests/test_plan_here.py holds it to that), so
    that the one sequence measured first is known to fit. Per token and layer, 4 bytes × (12·H
    + 2·I) (the sublayers' inputs and outputs, the FFN's two at width I) and 4 × 4 × heads × T
    (the attention scores, weights, their dropout and its mask, where they are materialised);
    per token the embeddings, 4 × (2·E + 4·H); per masked position the logits and their
    log-softmax, 4 × 2·V. ELECTRA adds its generator, at its narrower width, and its detection head."""
    def encoder(c: ModelConfig, masked: float) -> float:
        per_token = c.num_layers * 4 * (12 * c.hidden_size + 2 * c.intermediate_size + 4 * c.num_heads * settings.seq_len)
        embeddings = 4 * (2 * (c.embedding_size or c.hidden_size) + 4 * c.hidden_size)
        return settings.seq_len * (per_token + embeddings + masked * 4 * 2 * c.vocab_size)

    if "rtd" in run_objectives(variant, settings):
        generator = generator_config(config, settings.generator_fraction, settings.generator_heads)
        return encoder(config, 0.0) + encoder(generator, settings.mask_prob) + settings.seq_len * 4 * 4 * config.hidden_size
    return encoder(config, settings.mask_prob)


def saved_bytes(pretrainer: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, int]:
    """The loss of a forward on `batch`, and the bytes of the tensors autograd keeps for its
    backward: each storage once, the parameters' own left out (they are counted whole)."""
    parameters = {p.untyped_storage().data_ptr() for p in pretrainer.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss, _ = pretrainer(batch)
    return loss, sum(storages.values())


@dataclass(frozen=True)
class StepTiming:
    """One optimizer step of the run timed here (`time_step`), or why it was not."""

    threads: int
    seconds: float | None  # one optimizer step, scaled to the whole batch; None: not timed, memory too short
    timed: int  # sequences of the slice timed
    micro: int  # sequences of a micro-batch: --batch-size / --grad-accum
    accum: int  # micro-batches a step (--grad-accum)
    state_bytes: float  # the weights, their gradients and AdamW's moments
    sequence_bytes: float  # what each sequence of a micro-batch adds (MARGIN × what autograd saves of it)
    available: int  # bytes of memory available when the plan started
    why: str = ""  # what cut the slice: "memory", "time", or "" (the whole micro-batch)

    def needs(self, sequences: int) -> float:
        return self.state_bytes + sequences * self.sequence_bytes

    def memory(self) -> str:
        return (f"{size(self.state_bytes)} for the weights, their gradients and AdamW's moments, "
                f"{size(self.sequence_bytes)} a sequence")

    def rate(self) -> str:
        """How the step was timed, for the wall time line."""
        if self.timed == self.micro:
            return f"{self.seconds:.3f} s a step, timed now on random batches of this shape with {self.threads} thread(s)"
        return (f"{self.seconds:.3f} s a step, timed now with {self.threads} thread(s) on {self.timed} of the {self.micro} "
                f"sequences of a random micro-batch of this shape and scaled (below)")

    def note(self) -> str:
        """The plan's line on a slice or on --grad-accum's micro-batches; "" when the step was timed whole."""
        accumulated = f", × {self.accum} micro-batches a step (--grad-accum)" if self.accum > 1 else ""
        if self.timed == self.micro:
            return f"  timed on one micro-batch of {self.micro} sequences{accumulated}" if accumulated else ""
        whole = f"a whole micro-batch's step needs about {size(self.needs(self.micro))} of memory ({self.memory()})"
        line = (f"  timed on {self.timed} of the {self.micro} sequences of a micro-batch and scaled (the forward and backward "
                f"in proportion, the optimizer's step whole){accumulated}"
                + (f": {whole}, more than half of the {size(self.available)} available here" if self.why == "memory" else
                   f", to keep --plan quick: {whole}, {size(self.available)} available here"))
        if self.needs(self.micro) > self.available:
            line += f"; the run itself {self.smaller_micro_batches()}"
        return line

    def smaller_micro_batches(self) -> str:
        """What the run itself needs where a whole micro-batch does not fit in the memory available."""
        batch = self.micro * self.accum
        fits = [k for k in range(self.accum + 1, batch + 1) if batch % k == 0 and self.needs(batch // k) <= self.available]
        return f"needs --grad-accum {fits[0]} or more here" if fits else "does not fit here: it needs a machine with more memory"

    def untimed(self) -> str:
        """The wall time line of a step that could not be timed: one line, with the memory it needs."""
        if self.needs(1) > self.available:
            return (f"  wall time here: none, this machine cannot run this recipe: a training step needs at least "
                    f"{size(self.needs(1))} of memory ({self.memory()}; {size(self.needs(self.micro))} for its micro-batch "
                    f"of {self.micro}), and {size(self.available)} is available")
        return (f"  wall time here: not timed, a training step needs at least {size(self.needs(1))} of memory "
                f"({self.memory()}; {size(self.needs(self.micro))} for its micro-batch of {self.micro}), more than a plan "
                f"may take of the {size(self.available)} available here (half); the run itself may fit")


def time_step(variant: Variant, settings: Settings, config: ModelConfig, threads: int,
              available: int | None = None) -> StepTiming:
    """One optimizer step of this run here (forward, backward and AdamW, its model and objectives
    on random batches of its shape, at `threads`): the median of TIMED_STEPS steps (fewer past
    TIMING_SECONDS), timed on as many of a micro-batch's sequences as fit in SAFE_SHARE of the
    `available` memory (read now unless given) and take about SLICE_SECONDS; their forward and
    backward scaled to the micro-batch and to --grad-accum's micro-batches, the optimizer's step
    counted once. Nothing is allocated before it is known to fit: the parameters are counted on
    the meta device, and the one sequence measured first (`saved_bytes`) is estimated before it
    is built (`sequence_estimate`). `seconds` is None where not even one sequence fits."""
    torch.set_num_threads(threads)
    available = available_memory() if available is None else available
    budget = SAFE_SHARE * available
    accum = settings.grad_accum
    micro = max(1, settings.batch_size // accum)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in build_pretrainer(variant, settings, config).parameters())
    timing = StepTiming(threads, None, 0, micro, accum, STATE_BYTES * parameters,
                        MARGIN * sequence_estimate(variant, settings, config), available)
    if timing.needs(1) > budget:  # not even one sequence by the estimate: nothing is built
        return timing
    pretrainer = build_pretrainer(variant, settings, config)
    optimizer = torch.optim.AdamW(pretrainer.parameters(), lr=1e-4)
    generator = torch.Generator().manual_seed(0)

    def step(batch: dict, measure: bool = False) -> tuple[float, float, int]:
        started = time.perf_counter()
        loss, saved = saved_bytes(pretrainer, batch) if measure else (pretrainer(batch)[0], 0)
        loss.backward()
        stepped = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return stepped - started, time.perf_counter() - stepped, saved

    first, _, saved = step(random_batch(variant, settings, config, generator, 1), measure=True)  # untimed: it allocates
    timing = replace(timing, sequence_bytes=MARGIN * saved)
    fits = int((budget - timing.state_bytes) // timing.sequence_bytes) if timing.sequence_bytes else micro
    if fits < 1:
        return timing
    quick = max(1, int(SLICE_SECONDS / first))
    sequences = min(micro, fits, quick)
    why = "" if sequences == micro else "memory" if fits <= quick else "time"
    batch = random_batch(variant, settings, config, generator, sequences)
    if sequences > 1:
        step(batch)  # untimed: its activations are allocated for the first time
    passes, updates = [], []
    started = time.perf_counter()
    while len(passes) < TIMED_STEPS and (not passes or time.perf_counter() - started < TIMING_SECONDS):
        forward_backward, update, _ = step(batch)
        passes.append(forward_backward)
        updates.append(update)
    seconds = median(passes) * micro / sequences * accum + median(updates)
    return replace(timing, seconds=seconds, timed=sequences, why=why)


def median(values) -> float:
    return sorted(values)[len(values) // 2]


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


def describe_plan(variant: Variant, settings: Settings, overrides: dict, *, timed: StepTiming | None = None,
                  build_seconds: float = 0.0) -> str:
    """The plan's lines: the run's shape, its FLOPs, and its wall time on the planned device.
    `timed`: a step measured here by `time_step`, for a device without a known peak (a CPU);
    `build_seconds`: the corpus still to build, estimated (corpus/cost.py)."""
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
             f"  training FLOPs: {total:.2e} ({per_step:.2e} a step; minibert.runs.flops)"]
    if settings.budget is not None:
        lines[0] += f" (--budget {settings.budget} decides when it ends, not --steps)"
    if peak is None and timed is not None:
        lines.append(cpu_wall_time(settings, steps, timed, build_seconds))
        note = timed.note()
        lines += [note] if note and timed.seconds is not None else []
    elif peak is None:
        lines.append(f"  wall time: unknown, no known peak for {name}; `--plan` alone times a step here, or name a GPU "
                     f"with --plan-for h100|a100|l4|t4")
    else:
        seconds = total / (peak * 1e12 * settings.plan_utilisation)
        lines.append(f"  wall time on one {name}: {duration(seconds)} at {settings.plan_utilisation:.0%} of its "
                     f"{peak} TFLOP/s bf16 peak; on N GPUs about 1/N of it")
    return "\n".join(lines)


def cpu_wall_time(settings: Settings, steps: int, timed: StepTiming, build_seconds: float) -> str:
    """The plan's wall time on this CPU: the steps at the timed rate, the held-out evaluations
    (at step 0, every --eval-every steps and at the last step, --eval-batches forward passes
    each, as training/loop.py:what_is_due has them) and the corpus build; or why no step was timed."""
    if timed.seconds is None:
        return timed.untimed()
    build = f", {duration(build_seconds)} building the corpus" if build_seconds else ""
    if settings.budget is not None:
        return (f"  wall time here: the --budget, {duration(settings.budget_seconds)}, plus its evaluations{build} "
                f"({timed.rate()})")
    evaluations = 1 + math.ceil(steps / settings.eval_every)  # step 0, then each --eval-every and the last
    training = steps * timed.seconds
    evaluating = evaluations * settings.eval_batches * timed.seconds / timed.accum * EVAL_SHARE
    return (f"  wall time here: about {duration(training + evaluating + build_seconds)}: {duration(training)} of steps at "
            f"{timed.rate()}; {duration(evaluating)} of {evaluations} held-out evaluations{build}")
