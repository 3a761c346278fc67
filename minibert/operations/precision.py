"""`--precision`: the number format of a run's matmuls, and the loss scaling fp16 needs.

The one place that turns a precision name into an autocast context and a gradient scaler;
pretraining and fine-tuning both use it (their one training loop, loop.py, and fine-tuning's
predictions).

    auto  bf16 on a CUDA GPU that supports it (Ampere and newer), else fp32
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

from contextlib import nullcontext

import torch

from ..training.settings import PRECISIONS

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve(name: str, device: torch.device) -> str:
    """`auto` -> what this device does best; a precision the device cannot run -> ValueError naming the fix."""
    if name not in PRECISIONS:
        raise ValueError(f"--precision must be one of {', '.join(PRECISIONS)}; got {name!r}")
    cuda = device.type == "cuda"
    if name == "auto":
        return "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    if name == "bf16" and cuda and not torch.cuda.is_bf16_supported():
        raise ValueError(f"--precision bf16: this GPU ({torch.cuda.get_device_name(device)}) has no bfloat16 support; "
                         f"use --precision fp16 (with loss scaling) or fp32")
    if name == "fp16" and not cuda:
        raise ValueError(f"--precision fp16 needs a CUDA GPU (float16 autocast with loss scaling), and this run is on "
                         f"{device.type}; use --precision bf16 or fp32")
    return name


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
    def of(cls, name: str, device: torch.device) -> "Precision":
        return cls(resolve(name, device), device)

    def __repr__(self) -> str:
        return f"Precision({self.name!r}, {self.device})"
