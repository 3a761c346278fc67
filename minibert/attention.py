"""Bidirectional self-attention: one module, three interchangeable backends.

Every token of a sequence looks at every other real token of the same sequence
(no causal mask: BERT is an encoder) and never at padding:

    scores = Q Kᵀ / √d     masked where the key is padding
    probs  = softmax(scores)      dropout on probs while training
    output = probs V

Backends compute exactly that:
- "naive":  the four lines above in plain torch, for reading (`--reference` runs it);
- "sdpa":   torch's fused `scaled_dot_product_attention` (same math, fewer passes over memory);
- "triton": our FlashAttention kernel on packed tokens (minibert.kernels), CUDA or
            TRITON_INTERPRET=1; it needs no padding at all.

`TokenLayout` describes where the real tokens of a padded [batch, seq_len] grid are, so the
encoder can run on the real tokens only ("unpadding") and re-pad just around attention, one
bucket of similar lengths at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


ATTENTION_BUCKETS = 4  # length groups the padded backends pad separately


@dataclass
class AttentionBucket:
    """Sequences of similar length, padded together only to the longest of them.

    torch's attention kernels on the CPU want a padded [rows, max_seqlen] grid and spend the
    full max_seqlen² per row even where the key mask hides it. Grouping sequences by length
    before padding cuts that waste (lengths uniform in [T/8, T]: ~2.4× the needed attention
    FLOPs in one grid, ~1.2× in four buckets).
    """

    num_tokens: int
    index: torch.Tensor  # each of the bucket's packed tokens: its slot in [rows * max_seqlen]
    key_mask: torch.Tensor  # [rows, max_seqlen] bool, True = real token

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        """[bucket tokens, ...] -> [rows, max_seqlen, ...], zeros at padding."""
        return scatter_rows(packed, self.index, *self.key_mask.shape)

    def unpad(self, grid: torch.Tensor) -> torch.Tensor:
        return grid.flatten(0, 1).index_select(0, self.index)


@dataclass
class TokenLayout:
    """Where the real tokens sit.

    Packed tensors hold the real tokens of all sequences back to back, longest sequence
    first: [total_tokens, ...]. `cu_seqlens` ([batch + 1], int32) holds where each sequence
    starts in that list; this is the FlashAttention "varlen" interface. `grid_index` is each
    real token's slot in the padded input grid [batch * seq_len]. Because the longest come
    first, the `buckets` (sequences of similar length, for the padded attention backends) are
    consecutive runs of the packed tokens, of sizes `bucket_sizes`.
    """

    batch_size: int
    seq_len: int
    max_seqlen: int
    cu_seqlens: torch.Tensor
    grid_index: torch.Tensor
    buckets: list[AttentionBucket]

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> "TokenLayout":
        mask = attention_mask.bool()
        batch_size, seq_len = mask.shape
        lengths, order = mask.sum(dim=1).sort(descending=True, stable=True)
        max_seqlen = int(lengths[0]) if batch_size else 0
        cu_seqlens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)
        slots = order[:, None] * seq_len + torch.arange(seq_len, device=mask.device)
        grid_index = slots[mask[order]]  # row by row in length order; handles left padding too
        nonempty = lengths[lengths > 0]
        buckets = [_bucket(group) for group in nonempty.tensor_split(ATTENTION_BUCKETS) if len(group)]
        return cls(batch_size, seq_len, max_seqlen, cu_seqlens, grid_index, buckets)

    @property
    def bucket_sizes(self) -> list[int]:
        return [bucket.num_tokens for bucket in self.buckets]

    def pack(self, grid: torch.Tensor) -> torch.Tensor:
        """[batch, seq_len, ...] -> [total_tokens, ...]: keep the real tokens only."""
        return grid.flatten(0, 1).index_select(0, self.grid_index)

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """[total_tokens, ...] -> [batch, seq_len, ...], zeros at padding."""
        return scatter_rows(packed, self.grid_index, self.batch_size, self.seq_len)


def _bucket(lengths: torch.Tensor) -> AttentionBucket:
    """A bucket of sequences with these (descending) lengths, packed back to back."""
    key_mask = torch.arange(int(lengths[0]), device=lengths.device) < lengths[:, None]
    return AttentionBucket(int(lengths.sum()), key_mask.flatten().nonzero().squeeze(1), key_mask)


# Moving rows by an index: index_select / index_copy rather than `grid[index]` and
# `grid[index] = rows`. Same result, but the general indexing kernels (and their backward,
# which accumulates) took several times longer on the CPU for these row gathers.
def gather_rows(tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """[..., H] tokens (packed or a grid) -> [len(rows), H]: the given rows of the flattened tokens."""
    return tokens.reshape(-1, tokens.shape[-1]).index_select(0, rows)


def scatter_rows(packed: torch.Tensor, index: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """[n, ...] -> a [rows, cols, ...] grid holding packed[i] at flat slot index[i], zeros elsewhere."""
    out = packed.new_zeros(rows * cols, *packed.shape[1:]).index_copy(0, index, packed)
    return out.view(rows, cols, *packed.shape[1:])


class Rotary(nn.Module):
    """Rotary position embedding (RoPE, Su et al. 2021): position enters through attention.

    Learned absolute positions give each position a vector the model must first learn to
    compare; until it has, attention cannot prefer a token's neighbours, which is most of
    what an MLM reads early on. RoPE instead rotates each pair of query/key dimensions
    (2i, 2i + 1) by an angle proportional to the token's position, with frequency
    base^(-2i/d) for pair i, so q_i·k_j depends on the offset i - j from the first step:
    "the word right before me" is the same pattern at every position. Nothing is learned
    and no parameter is added. The pairing and frequencies are RoFormer's (the reference
    library's RoFormerModel), the BERT-family checkpoint that uses RoPE.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        self.head_dim, self.base = head_dim, base  # no buffer: nothing to save, load or move between devices

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """position ids [...] -> (cos, sin), each [..., 1, head_dim]: broadcast over heads."""
        pairs = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=position_ids.device)
        inverse_frequency = self.base ** (-pairs / self.head_dim)  # [head_dim/2]
        angles = position_ids[..., None].float() * inverse_frequency  # [..., head_dim/2]
        angles = angles.repeat_interleave(2, dim=-1).unsqueeze(-2)  # [..., 1, head_dim]: one angle per pair
        return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[2i], x[2i+1]) of the last dimension by its angle:
    (a, b) -> (a cos - b sin, b cos + a sin)."""
    turned = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (a, b) -> (-b, a)
    return (x * cos + turned * sin).to(x.dtype)


# --- backends: q, k, v [batch, heads, seq, head_dim]; key_mask [batch, seq] or None. --------
# dropout_p is already 0.0 outside training.


def attention_probs(q, k, key_mask) -> torch.Tensor:
    """How much each query position attends to each key: softmax(Q Kᵀ / √d) over the real keys.
    q, k [B, heads, T, d] -> probabilities [B, heads, Tq, Tk], each row summing to 1."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, heads, Tq, Tk]
    if key_mask is not None:
        # Padding keys get the most negative finite score: exp() of it is exactly 0, and a
        # row with no real key at all becomes uniform instead of 0/0 = NaN.
        scores = scores.masked_fill(~key_mask[:, None, None, :], torch.finfo(scores.dtype).min)
    return scores.float().softmax(dim=-1).to(q.dtype)  # softmax in fp32 even under bf16/fp16


def naive_attention(q, k, v, key_mask, dropout_p: float) -> torch.Tensor:
    """Attention written out step by step: the version to read first (and `--reference`'s)."""
    probs = attention_probs(q, k, key_mask)  # [B, heads, Tq, Tk]
    probs = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
    return probs @ v  # [B, heads, Tq, d]: each query's weighted sum of the values


def sdpa_attention(q, k, v, key_mask, dropout_p: float) -> torch.Tensor:
    """torch's fused kernel. Without a mask it may pick FlashAttention; with one it cannot."""
    mask = None if key_mask is None else key_mask[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


PADDED_BACKENDS = {"naive": naive_attention, "sdpa": sdpa_attention}


def resolve_backend(name: str) -> str:
    """Turn "auto" into a concrete backend.

    SDPA is the default: it is exact, fused, and available everywhere. Our Triton kernel is
    used only when asked for ("triton") until it is measured on a GPU (docs/attention.md).
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
        # --reference reads and debugs the textbook math: the naive backend, whatever was asked
        self.backend = "naive" if config.reference else config.attention_backend
        self.dropout_p = config.attention_dropout
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x: torch.Tensor, layout: TokenLayout | None = None, key_mask: torch.Tensor | None = None,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x: packed [tokens, H] with its `layout`, or a grid [B, T, H] with an optional
        `key_mask` [B, T] (True = real token). `rotary`: the (cos, sin) of each token's
        position (`Rotary`), to rotate queries and keys by. Returns the same shape as x."""
        return self.out(self.context(x, layout, key_mask, rotary))

    def context(self, x: torch.Tensor, layout: TokenLayout | None = None, key_mask: torch.Tensor | None = None,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Attention before the output projection: x [..., H] -> the heads' outputs, concatenated, [..., H]."""
        qkv = self.heads(x, rotary)  # [..., 3, heads, d]
        dropout_p = self.dropout_p if self.training else 0.0
        backend = resolve_backend(self.backend)
        if backend == "triton" and layout is None and key_mask is not None:
            backend = "sdpa"  # a padded grid (looking inside, output_attentions): the kernel wants packed tokens
        if backend == "triton":
            context = self._triton(qkv, layout, dropout_p)
        elif layout is None:
            context = self._padded(qkv, key_mask, backend, dropout_p)
        else:
            context = self._bucketed(qkv, layout, backend, dropout_p)
        return context.flatten(-2)  # [..., heads, d] -> [..., H]

    def heads(self, x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x [..., H] -> queries, keys and values per head [..., 3, heads, d] (rotated, with `rotary`)."""
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim))  # [..., H] -> [..., 3, heads, d]
        if rotary is not None:
            q, k, v = qkv.unbind(-3)
            qkv = torch.stack((rotate(q, *rotary), rotate(k, *rotary), v), dim=-3)
        return qkv

    def probabilities(self, x: torch.Tensor, key_mask: torch.Tensor | None = None,
                      rotary: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """The attention probabilities, for looking inside: grid x [B, T, H] -> [B, heads, T, T]
        (before dropout). Computed apart from `forward`, because the fused kernels never hold them."""
        q, k, _ = (t.transpose(1, 2) for t in self.heads(x, rotary).unbind(2))  # each [B, heads, T, d]
        return attention_probs(q, k, key_mask)

    def _bucketed(self, qkv: torch.Tensor, layout: TokenLayout, backend: str, dropout_p: float) -> torch.Tensor:
        """Packed tokens: pad each length bucket on its own, attend, unpad."""
        if not layout.buckets:  # not one real token: nothing to attend to
            return qkv[:, 0]
        parts = qkv.split(layout.bucket_sizes)
        return torch.cat([
            bucket.unpad(self._padded(bucket.pad(part), bucket.key_mask, backend, dropout_p))
            for part, bucket in zip(parts, layout.buckets)
        ])

    def _padded(self, grid: torch.Tensor, key_mask, backend: str, dropout_p: float) -> torch.Tensor:
        """grid [B, T, 3, heads, d] -> context [B, T, heads, d] with a padded backend."""
        # Views, no copies: split on the "3" axis where it sits, so the backward stacks the
        # three gradients straight into the [B, T, 3, heads, d] layout of the QKV matmul.
        q, k, v = (t.transpose(1, 2) for t in grid.unbind(2))  # each [B, heads, T, d]
        # torch's kernels write the output as [B, T, heads, d]: transposing back is free.
        return PADDED_BACKENDS[backend](q, k, v, key_mask, dropout_p).transpose(1, 2)

    def _triton(self, qkv: torch.Tensor, layout: TokenLayout | None, dropout_p: float) -> torch.Tensor:
        from .kernels import flash_attention

        if layout is None:  # a full batch is packed already: every sequence has length T
            batch, seq = qkv.shape[:2]
            qkv = qkv.flatten(0, 1)
            cu_seqlens = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32, device=qkv.device)
            out = flash_attention(*qkv.unbind(1), cu_seqlens, seq, dropout_p=dropout_p)
            return out.unflatten(0, (batch, seq))
        return flash_attention(*qkv.unbind(1), layout.cu_seqlens, layout.max_seqlen, dropout_p=dropout_p)
