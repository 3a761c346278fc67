"""`--precision`: the number format of a run's matmuls, and the loss scaling fp16 needs.

The one place that turns a precision name into an autocast context and a gradient scaler;
pretraining, fine-tuning and predict use it (their one training loop, loop.py, the evaluations
inside it, and the predictions of fine-tuning and `python -m minibert predict`).

    auto  bf16 on a CUDA GPU that supports it (Ampere and newer), and on a CPU with native bf16
          arithmetic (x86's avx512_bf16 or AMX: Intel Cooper Lake, Sapphire Rapids and later, AMD
          Zen 4 and later), whose bf16 matmuls run at about twice the fp32 rate, for fine-tuning,
          evaluation and predict; else fp32. Pretraining on such a CPU stays fp32
          (`pretraining=True`): in bf16 default bert and electra runs ended outside their fp32
          bands, bert's MLM accuracy under fp32's at both seeds (docs/speed-measured.md#bf16-quality).
          `auto_line` is the one line that says so; docs/speed.md ("bf16 on the CPU") links
          the measurements behind the CPU's choice: speed, and quality against fp32 over seeds.
    bf16  autocast to bfloat16: matmuls in bf16, softmax, norms and losses in fp32. bf16 has
          fp32's exponent range, so gradients neither underflow nor overflow: no scaling.
    fp16  autocast to float16 plus loss scaling, for GPUs without bf16 (T4, V100). fp16's
          smallest normal number is 6e-5, so small gradients would flush to zero; the loss is
          multiplied by a large factor before backward and the gradients divided back before
          clipping and the step. A step whose scaled gradients overflowed is skipped and the
          factor halved: that is how the scaler finds its range, not a fault of the run.
    fp32  no autocast: every operation in float32.
"""

from __future__ import annotations

import os
import platform
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path

import torch

from ..training.settings import PRECISIONS

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


# The CPU features that do bf16 arithmetic natively, as torch.cpu.get_capabilities() and Linux's
# /proc/cpuinfo name them. Arm's bf16 (Graviton 3, Apple M2 and later) is left out: no speed or
# quality of it has been measured for minibert; `--precision bf16` runs there all the same.
NATIVE_BF16 = ("amx_bf16", "avx512_bf16")
CPUINFO = Path("/proc/cpuinfo")
HIDE = "MINIBERT_CPU_BF16"  # set to 0: auto treats this CPU as one without bf16 (the test suite sets it)


def find_cpu_bf16() -> str | None:
    """The native bf16 feature of this CPU (one of NATIVE_BF16), or None: what torch reports
    (torch.cpu.get_capabilities), else the flags Linux lists in /proc/cpuinfo; None as well where
    the environment sets MINIBERT_CPU_BF16=0. Not torch.ops.mkldnn._is_mkldnn_bf16_supported():
    it is True on any AVX-512 CPU, where bf16 is emulated at no gain."""
    if os.environ.get(HIDE) == "0":
        return None
    try:
        found = torch.cpu.get_capabilities()
    except Exception:  # an older or stripped build: the flags instead
        found = None
    if found:
        return next((feature for feature in NATIVE_BF16 if found.get(feature)), None)
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    try:
        flags = CPUINFO.read_text().split()
    except OSError:
        return None
    return next((feature for feature in NATIVE_BF16 if feature in flags), None)


@lru_cache(maxsize=None)
def cpu_bf16() -> str | None:
    """find_cpu_bf16, looked up once per process."""
    return find_cpu_bf16()


def resolve(name: str, device: torch.device, pretraining: bool = False) -> str:
    """`auto` -> what this device does best (for `pretraining`, a CPU's bf16 is not taken: module
    docstring); a precision the device cannot run -> ValueError naming the fix."""
    if name not in PRECISIONS:
        raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}; got {name!r}")
    cuda = device.type == "cuda"
    if name == "auto":
        if cuda:
            return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
        return "bf16" if device.type == "cpu" and cpu_bf16() and not pretraining else "fp32"
    if name == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ValueError(f"--precision bf16: this GPU ({torch.cuda.get_device_name(device)}) has no bfloat16 support; "
                         f"use --precision fp16 (with loss scaling) or fp32")
    if name == "fp16" and not cuda:
        raise ValueError(f"--precision fp16 needs a CUDA GPU (float16 autocast with loss scaling), and this run is on "
                         f"{device.type}; use --precision bf16 or fp32")
    return name


def auto_line(name: str, device: torch.device, pretraining: bool = False) -> str | None:
    """The line a run prints when `auto` met a CPU with native bf16: what it chose, with the
    reason; None otherwise (on a CPU without it, auto is fp32 as it always was, and says nothing)."""
    if name != "auto" or device.type != "cpu" or not cpu_bf16():
        return None
    if pretraining:
        return (f"precision: fp32 (this CPU has {cpu_bf16()}, but bf16 pretraining left default bert and "
                f"electra runs outside their fp32 bands); --precision bf16 to pretrain in it all the same")
    return f"precision: bf16 autocast (this CPU has {cpu_bf16()}); --precision fp32 for float32 throughout"


class Precision:
    """The autocast context of every forward pass, and the loss scaling around backward and step.

    Plain attributes, read in place by the loop (PyTorch's own mixed-precision recipe):

        with precision.autocast: loss = model(batch)      # nullcontext() for fp32
        precision.scaler.scale(loss).backward()           # the GradScaler: loss scaling for fp16;
        precision.scaler.unscale_(optimizer)              # disabled for bf16/fp32, where each of
        precision.scaler.step(optimizer); .update()       # its calls is the plain operation

    `scales` (fp16) tells the loop that a NaN/Inf gradient may be an overflow of the scaled
    gradients, which the scaler handles by skipping the update (loop.py's `NonfiniteCheck`).
    """

    def __init__(self, name: str, device: torch.device):
        self.name, self.device = name, device
        dtype = DTYPES.get(name)
        self.autocast = torch.autocast(device.type, dtype=dtype) if dtype else nullcontext()  # reusable, one per run
        self.scaler = torch.amp.GradScaler(device.type, enabled=name == "fp16")
        self.scales = name == "fp16"  # gradients are scaled: an overflow then skips a step by design

    @classmethod
    def of(cls, name: str, device: torch.device, pretraining: bool = False) -> "Precision":
        return cls(resolve(name, device, pretraining), device)

    def __repr__(self) -> str:
        return f"Precision({self.name!r}, {self.device})"
