"""Custom GPU kernels. `flash_attention`: varlen FlashAttention-2 (forward and backward) in Triton
for packed, unpadded BERT batches. Triton is imported only when a kernel is first used."""

from .flash_attention import flash_attention

__all__ = ["flash_attention"]
