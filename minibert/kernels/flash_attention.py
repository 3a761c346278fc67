"""`flash_attention`: exact softmax attention on packed variable-length sequences, in Triton.

An unpadded encoder keeps only the real tokens of a batch, packed end to end, with
`cu_seqlens` marking where each sequence starts (FlashAttention's "varlen" interface). This
module checks the inputs, launches the kernels of `_flash_kernels.py` (which explains the
algorithm) and ties forward and backward together as a `torch.autograd.Function`.

Triton is not a runtime dependency of minibert: it is imported on first use, so `import
minibert` works without it and the CPU interpreter (`TRITON_INTERPRET=1`) can still be switched
on by a test before the first call.
"""

import math

import torch

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
HEAD_DIMS = range(16, 129)  # head_dim 16..128; non-powers of two are padded (masked) in the kernel
_LOG2_E = math.log2(math.e)
_DELTA_BLOCK = 64  # tokens per program of the small dO . O kernel
MAX_GRID_Y = 65535  # CUDA's limit on grid axes 1 and 2: sequences and heads


def flash_attention(q, k, v, cu_seqlens, max_seqlen, *, softmax_scale=None, dropout_p=0.0):
    """softmax(q k^T * softmax_scale) v within each packed sequence (non-causal, as in BERT).

    q, k, v: [total_tokens, num_heads, head_dim], fp16/bf16/fp32, head_dim 16..128, CUDA tensors
    (or CPU tensors under TRITON_INTERPRET=1). cu_seqlens: int32 [batch + 1], cu_seqlens[0] = 0,
    non-decreasing, cu_seqlens[-1] = total_tokens; sequence b is rows cu_seqlens[b]:cu_seqlens[b+1]
    and attends only to itself (zero-length sequences are allowed). max_seqlen: an int at least
    the longest sequence length (it sizes the launch grid). softmax_scale defaults to
    1/sqrt(head_dim). dropout_p: dropout on the attention probabilities, as BERT trains; pass 0.0
    in evaluation. The mask comes from a Philox seed drawn from torch's default generator (so
    `torch.manual_seed` reproduces it) and is regenerated, not stored, for the backward.
    Returns [total_tokens, num_heads, head_dim] in the input dtype; differentiable in q, k, v.

    fp32 inputs use exact fp32 products (slow on GPUs) unless torch.backends.cuda.matmul.allow_tf32
    is set; bf16/fp16 use the tensor cores with fp32 accumulation. Checking cu_seqlens' values
    costs one small device-to-host copy per call.
    """
    _check_inputs(q, k, v, cu_seqlens, max_seqlen, softmax_scale, dropout_p)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    return _FlashAttention.apply(q, k, v, cu_seqlens, max_seqlen, scale, float(dropout_p))


def _check_inputs(q, k, v, cu_seqlens, max_seqlen, softmax_scale, dropout_p):
    """One clear error per kind of bad input, before anything reaches a kernel."""
    for name, t in (("q", q), ("k", k), ("v", v), ("cu_seqlens", cu_seqlens)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"flash_attention: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 3:
        raise ValueError(f"flash_attention: q must be [total_tokens, num_heads, head_dim], got shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"flash_attention: q, k, v must have the same shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"flash_attention: q, k, v must share one dtype among float16, bfloat16, float32; "
                         f"got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"flash_attention: head_dim must be between 16 and 128 (any value, powers of two "
                         f"fastest), got {q.shape[-1]}")
    if not (q.device == k.device == v.device == cu_seqlens.device):
        raise ValueError(f"flash_attention: q, k, v, cu_seqlens must be on one device, got {q.device}, "
                         f"{k.device}, {v.device}, {cu_seqlens.device}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 1:
        raise ValueError(f"flash_attention: cu_seqlens must be a 1-D int32 tensor [batch + 1], got "
                         f"{cu_seqlens.dtype} of shape {tuple(cu_seqlens.shape)}")
    if isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 0:
        raise ValueError(f"flash_attention: max_seqlen must be a non-negative int, got {max_seqlen!r}")
    if softmax_scale is not None and (isinstance(softmax_scale, bool) or not isinstance(softmax_scale, (int, float))
                                      or not math.isfinite(softmax_scale) or softmax_scale <= 0):
        raise ValueError(f"flash_attention: softmax_scale must be a positive finite number, got {softmax_scale!r}")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"flash_attention: dropout_p must be a number in [0, 1), got {dropout_p!r}")
    if cu_seqlens.numel() - 1 > MAX_GRID_Y:
        raise ValueError(f"flash_attention: at most {MAX_GRID_Y} sequences per call (a CUDA grid limit), got "
                         f"{cu_seqlens.numel() - 1}; split the batch")
    row_stride = max(q.stride(0), k.stride(0), v.stride(0), q.shape[1] * q.shape[2])
    if max_seqlen * row_stride >= 2**31:
        raise ValueError(f"flash_attention: max_seqlen {max_seqlen} x row stride {row_stride} overflows the kernels' "
                         f"int32 offsets within a sequence; use shorter sequences")
    _check_boundaries(cu_seqlens, q.shape[0], max_seqlen)


def _check_boundaries(cu_seqlens, total_tokens, max_seqlen):
    """cu_seqlens must tile [0, total_tokens) into sequences no longer than max_seqlen."""
    lengths = cu_seqlens.diff()
    shortest, longest = (lengths.min(), lengths.max()) if lengths.numel() else (cu_seqlens[0], cu_seqlens[0])
    first, last, shortest, longest = torch.stack([cu_seqlens[0], cu_seqlens[-1], shortest, longest]).tolist()
    if first != 0:
        raise ValueError(f"flash_attention: cu_seqlens must start at 0, got {first}")
    if shortest < 0:
        raise ValueError("flash_attention: cu_seqlens must be non-decreasing (its differences are the sequence lengths)")
    if last != total_tokens:
        raise ValueError(f"flash_attention: cu_seqlens[-1] = {last} must equal the number of packed tokens "
                         f"q.shape[0] = {total_tokens}")
    if longest > max_seqlen:
        raise ValueError(f"flash_attention: max_seqlen = {max_seqlen} is shorter than the longest sequence "
                         f"({longest}); pass the longest length")


def _load_kernels(device):
    """Import Triton and the kernels on first use; check that they can run on `device`."""
    try:
        from . import _flash_kernels
    except ModuleNotFoundError as error:
        if error.name != "triton":
            raise
        raise ImportError("flash_attention needs Triton, which minibert does not install: pip install triton") from None
    if device.type == "cpu" and not _flash_kernels.INTERPRETED:
        raise RuntimeError("flash_attention got CPU tensors but Triton compiles for the GPU: use CUDA tensors, or "
                           "set TRITON_INTERPRET=1 before the first flash_attention call of the process")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"flash_attention runs on CUDA (or the CPU interpreter), got device {device}")
    return _flash_kernels


def _last_dim_contiguous(t):
    """Kernels address rows and heads by stride but assume the head_dim elements are adjacent."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _common_args(q, max_seqlen, softmax_scale, dropout_p):
    """Scalars and compile-time constants shared by all three attention kernels."""
    import triton

    head_dim = q.shape[-1]
    tf32 = q.dtype != torch.float32 or torch.backends.cuda.matmul.allow_tf32
    constants = dict(HEAD_DIM=head_dim, BLOCK_D=triton.next_power_of_2(head_dim),
                     HAS_DROPOUT=dropout_p > 0, PRECISION="tf32" if tf32 else "ieee")
    return triton.next_power_of_2(max_seqlen), softmax_scale * _LOG2_E, constants


class _FlashAttention(torch.autograd.Function):
    """Forward saves q, k, v, O and the log-sum-exp (O(tokens) extra memory, never the
    tokens x tokens probabilities); backward recomputes the probabilities tile by tile."""

    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens, max_seqlen, softmax_scale, dropout_p):
        kernels = _load_kernels(q.device)
        q, k, v = (_last_dim_contiguous(t) for t in (q, k, v))
        cu_seqlens = cu_seqlens.contiguous()
        total_tokens, num_heads, head_dim = q.shape
        batch = cu_seqlens.numel() - 1
        seed = int(torch.randint(2**31 - 1, ())) if dropout_p > 0 else 0
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.empty((num_heads, total_tokens), dtype=torch.float32, device=q.device)
        if total_tokens > 0:
            bucket, qk_scale, constants = _common_args(q, max_seqlen, softmax_scale, dropout_p)
            kernels.forward_kernel[lambda meta: (math.ceil(max_seqlen / meta["BLOCK_M"]), batch, num_heads)](
                q, k, v, out, lse, cu_seqlens, seed,
                q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                out.stride(0), out.stride(1),
                total_tokens, max_seqlen, qk_scale, dropout_p, bucket, **constants)
        ctx.save_for_backward(q, k, v, out, lse, cu_seqlens)
        ctx.hyper = (max_seqlen, softmax_scale, dropout_p, seed)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k, v, out, lse, cu_seqlens = ctx.saved_tensors
        max_seqlen, softmax_scale, dropout_p, seed = ctx.hyper
        kernels = _load_kernels(q.device)
        grad_out = _last_dim_contiguous(grad_out)
        total_tokens, num_heads, head_dim = q.shape
        batch = cu_seqlens.numel() - 1
        dq, dk, dv = (torch.empty(q.shape, dtype=q.dtype, device=q.device) for _ in range(3))
        if total_tokens == 0:
            return dq, dk, dv, None, None, None, None
        bucket, qk_scale, constants = _common_args(q, max_seqlen, softmax_scale, dropout_p)

        delta = torch.empty_like(lse)
        kernels.delta_kernel[(math.ceil(total_tokens / _DELTA_BLOCK), num_heads)](
            out, grad_out, delta, out.stride(0), out.stride(1), grad_out.stride(0), grad_out.stride(1),
            total_tokens, HEAD_DIM=head_dim, BLOCK_D=constants["BLOCK_D"], BLOCK_T=_DELTA_BLOCK)

        shared = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
                  grad_out.stride(0), grad_out.stride(1), dq.stride(0), dq.stride(1),
                  total_tokens, max_seqlen, qk_scale, softmax_scale, dropout_p, bucket)
        kernels.backward_dkdv_kernel[lambda meta: (math.ceil(max_seqlen / meta["BLOCK_N"]), batch, num_heads)](
            q, k, v, grad_out, lse, delta, dk, dv, cu_seqlens, seed, *shared, **constants)
        kernels.backward_dq_kernel[lambda meta: (math.ceil(max_seqlen / meta["BLOCK_M"]), batch, num_heads)](
            q, k, v, grad_out, lse, delta, dq, cu_seqlens, seed, *shared, **constants)
        return dq, dk, dv, None, None, None, None
