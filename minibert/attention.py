"""Bidirectional self-attention: one module, three interchangeable backends.

Every token of a sequence looks at every other real token of the same sequence
(no causal mask: BERT is an encoder) and never at padding:

    scores = Q Kᵀ / √d     masked where the key is padding
    probs  = softmax(scores)      dropout on probs while training
    output = probs V

Backends compute exactly that:
- "naive":  the four lines above in plain torch, for reading;
- "sdpa":   torch's fused `scaled_dot_product_attention` (same math, fewer passes over memory);
- "triton": our FlashAttention kernel on packed tokens (minibert.kernels), CUDA or
            TRITON_INTERPRET=1; it needs no padding at all.

`TokenLayout` describes where the real tokens of a padded [batch, seq_len] grid are, so the
encoder can run on the real tokens only ("unpadding") and re-pad just around attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


@dataclass
class TokenLayout:
    """Where the real tokens sit.

    Packed tensors hold the real tokens of all sequences back to back: [total_tokens, ...].
    `cu_seqlens` ([batch + 1], int32) holds where each sequence starts in that list; this is
    the FlashAttention "varlen" interface. `grid_index` is each real token's slot in the
    padded input grid [batch * seq_len]; `attention_index` its slot in the smallest grid that
    fits [batch * max_seqlen], used to re-pad just for the padded attention backends.
    """

    batch_size: int
    seq_len: int
    max_seqlen: int
    cu_seqlens: torch.Tensor
    grid_index: torch.Tensor
    attention_index: torch.Tensor
    key_mask: torch.Tensor  # [batch, max_seqlen] bool, True = real token

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "TokenLayout":
        mask = attention_mask.bool()
        batch_size, seq_len = mask.shape
        lengths = mask.sum(dim=1)
        max_seqlen = int(lengths.max()) if batch_size else 0
        cu_seqlens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        grid_index = mask.flatten().nonzero().squeeze(1)
        # Position of each real token inside its own sequence (handles left padding too).
        within = (mask.cumsum(dim=1) - 1).flatten()[grid_index]
        row = grid_index // seq_len
        attention_index = row * max_seqlen + within
        key_mask = torch.arange(max_seqlen, device=mask.device) < lengths[:, None]
        return cls(batch_size, seq_len, max_seqlen, cu_seqlens, grid_index, attention_index, key_mask)

    @property
    def num_tokens(self) -> int:
        return self.grid_index.numel()

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        """[batch, seq_len, ...] -> [total_tokens, ...]: keep the real tokens only."""
        return grid.flatten(0, 1)[self.grid_index]

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """[total_tokens, ...] -> [batch, seq_len, ...], zeros at padding."""
        return _scatter(packed, self.grid_index, self.batch_size, self.seq_len)

    def to_attention_grid(self, packed: torch.Tensor) -> torch.Tensor:
        """[total_tokens, ...] -> [batch, max_seqlen, ...] for the padded backends."""
        return _scatter(packed, self.attention_index, self.batch_size, self.max_seqlen)

    def from_attention_grid(self, grid: torch.Tensor) -> torch.Tensor:
        return grid.flatten(0, 1)[self.attention_index]


def _scatter(packed: torch.Tensor, index: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    out = packed.new_zeros(rows * cols, *packed.shape[1:])
    out[index] = packed
    return out.view(rows, cols, *packed.shape[1:])


# --- backends: q, k, v [batch, heads, seq, head_dim]; key_mask [batch, seq] or None. --------
# dropout_p is already 0.0 outside training.


def naive_attention(q, k, v, key_mask, dropout_p: float) -> torch.Tensor:
    """Attention written out step by step: the version to read first."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, heads, Tq, Tk]
    if key_mask is not None:
        # Padding keys get the most negative finite score: exp() of it is exactly 0, and a
        # row with no real key at all becomes uniform instead of 0/0 = NaN.
        scores = scores.masked_fill(~key_mask[:, None, None, :], torch.finfo(scores.dtype).min)
    probs = scores.float().softmax(dim=-1).to(q.dtype)  # softmax in fp32 even under bf16/fp16
    probs = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
    return probs @ v


def sdpa_attention(q, k, v, key_mask, dropout_p: float) -> torch.Tensor:
    """torch's fused kernel. Without a mask it may pick FlashAttention; with one it cannot."""
    mask = None if key_mask is None else key_mask[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


PADDED_BACKENDS = {"naive": naive_attention, "sdpa": sdpa_attention}


def resolve_backend(name: str, device: torch.device, dropout_p: float) -> str:
    """Turn "auto" into a concrete backend for this device.

    SDPA is the default: it is exact, fused, and available everywhere. Our Triton kernel is
    used only when asked for ("triton"); see docs/attention.md for its measurements.
    """
    return "sdpa" if name == "auto" else name


class SelfAttention(nn.Module):
    """Multi-head self-attention with ONE fused QKV projection.

    One [H, 3H] matmul instead of three [H, H] ones reads the input once; the result is
    split into queries, keys and values per head.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        self.backend = config.attention
        self.dropout_p = config.attention_dropout
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(
        self, x: torch.Tensor, layout: TokenLayout | None = None, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x: packed [total_tokens, H] with its `layout`, or a grid [batch, seq, H] with an
        optional `key_mask` [batch, seq] (True = real token)."""
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim))
        dropout_p = self.dropout_p if self.training else 0.0
        backend = resolve_backend(self.backend, x.device, dropout_p)
        if backend == "triton":
            context = self._triton(qkv, layout, dropout_p)
        else:
            grid = qkv if layout is None else layout.to_attention_grid(qkv)  # [B, T, 3, heads, d]
            if layout is not None:
                key_mask = layout.key_mask
            q, k, v = grid.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, heads, T, d]
            context = PADDED_BACKENDS[backend](q, k, v, key_mask, dropout_p).transpose(1, 2)
            if layout is not None:
                context = layout.from_attention_grid(context)
        return self.out(context.flatten(-2))

    def _triton(self, qkv: torch.Tensor, layout: TokenLayout | None, dropout_p: float) -> torch.Tensor:
        from .kernels import flash_attention

        if layout is None:  # a full batch is packed already: every sequence has length T
            batch, seq = qkv.shape[:2]
            qkv = qkv.flatten(0, 1)
            cu_seqlens = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32, device=qkv.device)
            out = flash_attention(*qkv.unbind(1), cu_seqlens, seq, dropout_p=dropout_p)
            return out.unflatten(0, (batch, seq))
        return flash_attention(*qkv.unbind(1), layout.cu_seqlens, layout.max_seqlen, dropout_p=dropout_p)
