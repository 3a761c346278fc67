"""What `flash_attention` is checked against: plain float64 attention, one sequence at a time.

Shared by tests/test_flash_attention.py (the kernel run by Triton's CPU interpreter) and
bench/gpu_check.py (the kernel compiled on a GPU), so both hold the kernel to the same
reference, the same cases and the same tolerances. Nothing here is fast; it is meant to be
obviously right.
"""

from __future__ import annotations

import torch

from .flash_attention import flash_attention

# atol = rtol per input dtype (fp32 "tf32": fp32 inputs multiplied in TensorFloat-32, whose
# 10-bit mantissa is fp16's). torch.testing.assert_close's rule: |got - want| <= atol + rtol * |want|.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 2e-3, "bf16": 2e-2}
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def cu_seqlens_of(lengths, device) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()],
                        dtype=torch.int32, device=device)


def reference(q, k, v, lengths, scale, keep=None, dropout_p=0.0):
    """Plain softmax attention, one sequence at a time; keep[b] is an optional [heads, n, n] dropout mask."""
    outputs, start = [], 0
    for b, n in enumerate(lengths):
        qs, ks, vs = (t[start:start + n].transpose(0, 1) for t in (q, k, v))  # [heads, n, dim]
        p = torch.softmax(qs @ ks.transpose(1, 2) * scale, dim=-1)
        if keep is not None:
            p = p * keep[b] / (1 - dropout_p)
        outputs.append((p @ vs).transpose(0, 1))
        start += n
    return torch.cat(outputs) if outputs else q.new_zeros(q.shape)


def random_qkv(lengths, heads, head_dim, dtype, device, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(sum(lengths), heads, head_dim, generator=generator).to(device, dtype).requires_grad_()
            for _ in range(3)]


def dropout_mask(lengths, heads, dropout_p, seed, device):
    """Read the kernel's keep-mask back: with v[token] = one-hot of its position in the sequence
    (head_dim >= length), output row i is row i of the dropped, rescaled probabilities. The mask
    depends only on the seed and the entry's (head, query, key) position, not on q, k or dtype."""
    dim = max(16, max(lengths))
    q, k, _ = random_qkv(lengths, heads, dim, torch.float32, device)
    v = torch.cat([torch.eye(n, dim, device=device) for n in lengths])[:, None, :].expand(-1, heads, -1)
    torch.manual_seed(seed)
    dropped = flash_attention(q, k, v, cu_seqlens_of(lengths, device), max(lengths), dropout_p=dropout_p)
    starts = cu_seqlens_of(lengths, device).tolist()
    return [(dropped[s:s + n, :, :n] != 0).transpose(0, 1) for s, n in zip(starts, lengths)]


def kernel_and_reference(lengths, heads, head_dim, dtype, device, *, max_seqlen=None, scale=None, seed=0,
                         dropout_p=0.0):
    """Run the kernel forward and backward, and the float64 reference on the same inputs (and, with
    dropout, the same mask); returns [(name, kernel's, reference's)] for out, dq, dk and dv."""
    keep = dropout_mask(lengths, heads, dropout_p, seed, device) if dropout_p else None
    q, k, v = random_qkv(lengths, heads, head_dim, dtype, device, seed)
    torch.manual_seed(seed)  # the dropout seed, as dropout_mask drew it
    out = flash_attention(q, k, v, cu_seqlens_of(lengths, device), max_seqlen or max(lengths, default=0),
                          softmax_scale=scale, dropout_p=dropout_p)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1)).to(device, dtype)
    out.backward(grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = reference(q64, k64, v64, lengths, scale or head_dim ** -0.5, keep=keep, dropout_p=dropout_p)
    expected.backward(grad_out.double())
    return [("out", out, expected), ("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)]


def tolerance_ratio(got: torch.Tensor, want: torch.Tensor, tol: float) -> float:
    """max |got - want| / (tol + tol * |want|): at most 1 exactly when assert_close(atol=rtol=tol) passes."""
    if want.numel() == 0:
        return 0.0
    return float(((got.detach().double() - want.detach()).abs() / (tol + tol * want.detach().abs())).max())
