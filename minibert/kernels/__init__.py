"""Speed for other shapes: nothing here changes what a step computes (which default runs unpad: unpad.py).

    unpad.py            the layers on the real tokens only, for a batch with Encoder.UNPAD_FROM padding or more
    cpu_dropout.py      dropout while training on a CPU: a mask of 16 random bits an element, the residual add
                        and dropout in one pass, attention with dropout a block of rows at a time
    flash_attention.py  varlen FlashAttention-2 (forward and backward) in Triton, for packed,
                        unpadded batches on a GPU; Triton is imported only when a kernel is first used
    _flash_kernels.py, candidates.py, offline_compile.py, reference.py   its kernels, the block
                        sizes tried, their compilation checked offline, the same maths in PyTorch
"""

from .flash_attention import flash_attention

__all__ = ["flash_attention"]
