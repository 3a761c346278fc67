"""Bidirectional self-attention: every token looks at every real token of its sequence.

    scores = Q Kᵀ / √d     (no causal mask: BERT is an encoder; padding keys are masked out)
    probs  = softmax(scores)      dropout on probs while training
    output = probs V              then the heads are concatenated and projected back to H

`attend` computes that on a padded grid, as nanoGPT does: one `if` with torch's fused
`scaled_dot_product_attention` in one branch ("sdpa", the default: the same math in fewer
passes over memory) and the formulas written out in the other ("naive", the one to read;
`--reference` uses it). Looking inside runs the layers on the model's own backend and takes
the probabilities from `attention_probs`, since no fused kernel holds them. torch's CPU kernel
has no dropout: while training with dropout on a CPU, "sdpa" runs kernels/cpu_dropout.py
instead, the same formulas a block of rows at a time. The third backend, "triton", is our FlashAttention kernel (minibert/kernels/);
it reads the real tokens packed back to back, which kernels/unpad.py prepares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .kernels.cpu_dropout import dropout_attention


# In bf16 on a CPU, up to this many keys, "sdpa" takes the formulas too: torch's CPU kernel gains
# nothing from bf16, while the formulas' two matmuls run at the bf16 rate and their T × T scores
# stay small; from 256 keys on, the fused kernel wins (bench/attention_cpu.py times both).
BF16_CPU_FORMULAS_UP_TO = 128


def attention_probs(q, k, key_mask) -> torch.Tensor:
    """How much each query attends to each key: softmax(Q Kᵀ / √d) over the real keys.
    q, k [B, heads, T, d], key_mask [B, T] (True = real) or None -> [B, heads, Tq, Tk], rows summing to 1."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, heads, Tq, Tk]
    if key_mask is not None:
        # Padding keys get the most negative finite score: exp() of it is exactly 0.
        scores = scores.masked_fill(~key_mask[:, None, None, :], torch.finfo(scores.dtype).min)
    return scores.float().softmax(dim=-1).to(q.dtype)  # softmax in fp32 even under bf16/fp16


def attend(q, k, v, key_mask, backend: str, dropout_p: float) -> torch.Tensor:
    """q, k, v [B, heads, T, d], key_mask [B, T] or None -> each query's mix of values [B, heads, T, d]."""
    if backend == "sdpa" and not (q.is_cpu and (dropout_p > 0 or q.dtype == torch.bfloat16 and k.shape[-2] <= BF16_CPU_FORMULAS_UP_TO)):
        mask = None if key_mask is None else (key_mask | ~key_mask.any(1, keepdim=True))[:, None, None, :]  # an empty row: not 0/0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # torch's fused kernel
    if backend == "sdpa" and dropout_p > 0:  # on a CPU, whose kernel has no dropout (SDPA would write out every T × T): blocks
        return dropout_attention(q, k, v, key_mask, dropout_p)
    probs = attention_probs(q, k, key_mask)  # [B, heads, Tq, Tk]
    return F.dropout(probs, dropout_p) @ v  # each query's weighted sum of the values


@dataclass
class Sequences:
    """How the tokens of x form sequences: what attention reads beside x, the same at every layer
    (`Encoder.embed` makes it)."""

    key_mask: torch.Tensor | None = None  # [B, T] bool, True = real; None: all are, or x is packed
    rotary: tuple[torch.Tensor, torch.Tensor] | None = None  # each token's (cos, sin) (`Rotary`); None: learned positions
    packed: TokenLayout | None = None  # kernels/unpad.py: x is the real tokens alone, [tokens, H]; None: the [B, T] grid


class SelfAttention(nn.Module):
    """Multi-head self-attention with ONE fused QKV projection: one [H, 3H] matmul reads the
    input once, and its output is split into queries, keys and values per head."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.num_heads, self.head_dim = config.num_heads, config.head_dim
        # "auto" is SDPA (docs/attention.md compares the backends); --reference reads the naive math.
        backend = "sdpa" if config.attention_backend == "auto" else config.attention_backend
        self.backend = "naive" if config.reference else backend
        self.dropout_p = config.attention_dropout
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x, sequences: Sequences, rows: torch.Tensor | None = None) -> torch.Tensor:
        """x [B, T, H] on the padded grid, or the packed real tokens [tokens, H] -> the same shape.

        With `rows` (indices into x's rows, [B, T] flattened): the output at those rows only,
        [rows, H] (`Sublayer.at_rows`). Every token still gives its key and value; only the
        output projection is spared elsewhere."""
        qkv = self.heads(x, sequences.rotary)  # [B, T, 3, heads, d], or [tokens, 3, heads, d] packed
        dropout_p = self.dropout_p if self.training else 0.0
        if sequences.packed is not None:
            context = sequences.packed.attend(qkv, self.backend, dropout_p).flatten(-2)  # [tokens, H]: the heads side by side
        else:
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # each [B, heads, T, d]: views, no copies
            context = attend(q, k, v, sequences.key_mask, self.backend, dropout_p).transpose(1, 2).flatten(-2)  # [B, T, H]
        return self.out(context if rows is None else context.flatten(0, -2).index_select(0, rows))

    def heads(self, x, rotary=None) -> torch.Tensor:
        """x [..., H] -> queries, keys and values per head, [..., 3, heads, d] (q and k rotated by `rotary`)."""
        qkv = self.qkv(x).unflatten(-1, (3, self.num_heads, self.head_dim))  # [..., H] -> [..., 3, heads, d]
        if rotary is None:  # learned positions: already added to the embeddings
            return qkv
        return torch.cat((rotate(qkv[..., :2, :, :], *rotary), qkv[..., 2:, :, :]), dim=-3)  # q, k turned; v as it is

    def probabilities(self, x, sequences: Sequences) -> torch.Tensor:
        """The attention probabilities, for looking inside: x [B, T, H] -> [B, heads, T, T]
        (before dropout). Computed apart from `forward`, because the fused kernels never hold them."""
        q, k, _ = (t.transpose(1, 2) for t in self.heads(x, sequences.rotary).unbind(2))  # each [B, heads, T, d]
        return attention_probs(q, k, sequences.key_mask)


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
        """position ids [...] -> (cos, sin), each [..., 1, 1, head_dim]: broadcast over q and k, and the heads."""
        # 2i for dimensions 2i and 2i + 1 (0, 0, 2, 2, ...): both turn by pair i's angle
        pair = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=position_ids.device).repeat_interleave(2)
        angles = position_ids[..., None, None, None].float() * self.base ** (-pair / self.head_dim)  # [..., 1, 1, head_dim]
        return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[2i], x[2i+1]) of the last dimension by its angle:
    (a, b) -> (a cos - b sin, b cos + a sin)."""
    turned = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)  # (a, b) -> (-b, a)
    return (x * cos + turned * sin).to(x.dtype)
