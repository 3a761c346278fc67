"""Dropout on a CPU at the price of its arithmetic.

`F.dropout` on a CPU draws a random float for every element; with dropout, torch's CPU attention
kernel is not used at all: SDPA writes out the [B, heads, T, T] probabilities, draws a mask over
all of them and keeps both for the backward pass, which costs more than the attention itself.

    keep_mask           the mask from 16 random bits an element: four from each 64-bit draw
    dropout_add         residual + dropout(x) in one pass over x (every sublayer's dropout)
    dropout_attention   attention with dropout on its probabilities, a block of (sequence, head)
                        rows at a time: the block's T × T scores stay in the cache, and the
                        backward pass computes them and draws the same mask again from the seed
                        the forward pass drew, so nothing T × T is kept between the two passes
                        (FlashAttention does the same on a GPU)

What each computes is dropout as `F.dropout` defines it; only the random numbers differ. Every
draw comes from torch's default generator, so a seed gives the same masks and a resumed run
draws what it would have drawn.
"""

from __future__ import annotations

import math

import torch

BLOCK_SCORES = 1 << 20  # scores a block of dropout_attention holds: 4 MB in fp32, what the L2 caches of two cores hold


def keep_mask(shape, p: float, dtype: torch.dtype, generator: torch.Generator | None = None,
              out: torch.Tensor | None = None) -> torch.Tensor:
    """1 where an element is kept, 0 where it is dropped, of `shape` in `dtype` (into `out`).

    Each element reads 16 random bits, four to a 64-bit draw, and is dropped where they fall
    under round(p · 2¹⁶) of their 2¹⁶ values: p is taken to the nearest multiple of 2⁻¹⁶
    (0.1 becomes 0.100006). A float an element, as `F.dropout` draws, costs twice the bits and
    several times the time."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-2**63, None, generator=generator)  # the full 64 bits
    bits = words.view(torch.int16)[:n].view(shape)  # uniform over [-2¹⁵, 2¹⁵)
    threshold = round(p * 65536) - 32768
    return torch.ge(bits, threshold, out=out if out is not None else torch.empty(shape, dtype=dtype))


def dropout_add(x: torch.Tensor, p: float, residual: torch.Tensor) -> torch.Tensor:
    """residual + dropout(x) in one pass, with `keep_mask`'s mask: kept elements of x are scaled by
    1 / (1 − p), as `F.dropout` scales them."""
    return torch.addcmul(residual, x, keep_mask(x.shape, p, x.dtype), value=1 / (1 - p))


def dropout_attention(q, k, v, key_mask, p: float) -> torch.Tensor:
    """dropout(softmax(Q Kᵀ / √d) over the real keys) V: q [B, heads, Tq, d], k and v [B, heads, Tk, d],
    key_mask [B, Tk] (True = real) or None -> [B, heads, Tq, d]."""
    bias = None
    if key_mask is not None:  # padding keys get the most negative score; a row without a real key reads every key
        real = key_mask | ~key_mask.any(1, keepdim=True)
        bias = torch.zeros(real.shape, dtype=q.dtype).masked_fill_(~real, torch.finfo(q.dtype).min)
        bias = bias[:, None, None, :].expand(-1, q.shape[1], -1, -1).reshape(-1, 1, k.shape[2])  # [B * heads, 1, Tk]
    return BlockedDropoutAttention.apply(q, k, v, bias, p)


class BlockedDropoutAttention(torch.autograd.Function):
    """Attention with dropout, a block of rows at a time; the backward pass recomputes each block.

    Forward, per block: S = Q Kᵀ / √d (+ the padding bias), P = softmax(S), P̃ = P ∘ keep, and
    O = P̃ V / (1 − p). Backward, with D = rowsum(dO ∘ O) (= rowsum(P ∘ dP), dP the gradient at P):
    dV = P̃ᵀ dO / (1 − p), dS = P ∘ (keep ∘ dO Vᵀ / (1 − p) − D), dQ = dS K / √d, dK = dSᵀ Q / √d."""

    @staticmethod
    def forward(ctx, q, k, v, bias, p):
        seed = int(torch.empty((), dtype=torch.int64).random_(-2**63, None))  # the masks' generator, seeded from torch's
        with torch.autocast("cpu", enabled=False):  # q, k and v come in the dtype their matmuls run in
            qs, k_, v_ = rows_of(q, k, v)
            out = torch.empty(qs.shape[:-1] + v_.shape[-1:], dtype=q.dtype)  # [B * heads, Tq, d]
            for rows, _, kept in blocks(qs, k_, bias, p, seed):
                torch.bmm(kept, v_[rows], out=out[rows])
            out.mul_(1 / (1 - p))
        ctx.save_for_backward(q, k, v, bias, out)
        ctx.p, ctx.seed = p, seed
        return out.view(q.shape[:-1] + v.shape[-1:])

    @staticmethod
    def backward(ctx, grad):
        q, k, v, bias, out = ctx.saved_tensors
        p = ctx.p
        with torch.autocast("cpu", enabled=False):
            qs, k_, v_ = rows_of(q, k, v)
            grad = grad.reshape(out.shape)
            delta = ((grad.float() * out.float()).sum(-1, keepdim=True) * (1 - p)).to(q.dtype)  # (1 − p) D, [B * heads, Tq, 1]
            dq, dk, dv = torch.empty_like(qs), torch.empty_like(k_), torch.empty_like(v_)
            scratch = None
            for rows, probs, kept in blocks(qs, k_, bias, p, ctx.seed):
                scratch = torch.empty_like(probs) if scratch is None else scratch
                dscores = torch.bmm(grad[rows], v_[rows].transpose(1, 2), out=scratch[: len(probs)])  # dO Vᵀ
                dscores.mul_(kept).addcmul_(probs, delta[rows], value=-1)  # (1 − p) dS = P̃ ∘ dO Vᵀ − (1 − p) P ∘ D
                torch.bmm(kept.transpose(1, 2), grad[rows], out=dv[rows])
                torch.bmm(dscores, k_[rows], out=dq[rows])
                torch.bmm(dscores.transpose(1, 2), qs[rows], out=dk[rows])
            dq.mul_(1 / ((1 - p) * math.sqrt(q.shape[-1])))  # qs already holds the 1 / √d of dK
            dk.mul_(1 / (1 - p))
            dv.mul_(1 / (1 - p))
        return dq.view(q.shape), dk.view(k.shape), dv.view(v.shape), None, None


def rows_of(q, k, v) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[B, heads, T, d] -> [B * heads, T, d] each, the queries scaled by 1 / √d."""
    return (q * (1 / math.sqrt(q.shape[-1]))).flatten(0, 1), k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:])


def blocks(qs, k, bias, p: float, seed: int):
    """The probabilities of one block of rows after another, before and after dropout:
    (rows, P [rows, Tq, Tk], P̃ = P ∘ keep). Two buffers serve every block; the masks come from a
    generator seeded with `seed`, block by block, so that the backward pass draws the forward
    pass's masks again."""
    n, Tq, Tk = len(qs), qs.shape[1], k.shape[1]
    step = max(1, BLOCK_SCORES // (Tq * Tk))
    generator = torch.Generator().manual_seed(seed)
    scores, kept = (torch.empty(min(step, n), Tq, Tk, dtype=qs.dtype) for _ in range(2))
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        s = torch.bmm(qs[rows], k[rows].transpose(1, 2), out=scores[: rows.stop - start])  # [rows, Tq, Tk]
        if bias is not None:
            s.add_(bias[rows])
        probs = torch.softmax(s, -1, out=s)  # in place
        keep = keep_mask(s.shape, p, s.dtype, generator, out=kept[: rows.stop - start])
        yield rows, probs, keep.mul_(probs)
