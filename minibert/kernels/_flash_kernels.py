"""The Triton kernels behind `minibert.kernels.flash_attention` (FlashAttention-2, varlen, non-causal).

Imported lazily (see `flash_attention.py`): `@triton.jit` decides at decoration time whether a
kernel is compiled for the GPU or run by the CPU interpreter (`TRITON_INTERPRET=1`).

Attention per sequence and head: S = scale * Q K^T, P = softmax(S) row-wise, O = P V. For a
sequence of n tokens the naive way writes the n x n matrices S and P to memory; FlashAttention
never does. A reader who knows attention but not Triton needs three ideas:

1. **Triton's model.** A kernel is one *program* run once per point of a launch *grid*; each
   program works on whole blocks (tiles) of numbers at a time: `tl.load` a tile from memory
   into registers, `tl.dot` multiply tiles on the tensor cores, `tl.store` a tile back. Every
   load and store takes a mask, which is how tiles hanging over the end of a sequence or past
   the head dimension are handled: masked-out lanes read 0 and write nothing. Sizes written in
   CAPITALS are `tl.constexpr`: fixed when the kernel is compiled.

2. **Tiling and varlen.** Tokens arrive packed, [total_tokens, heads, head_dim], and sequence b
   owns rows cu_seqlens[b] : cu_seqlens[b + 1]. The forward grid is (query blocks of
   max_seqlen, batch, heads): program (i, b, h) owns BLOCK_M query rows of sequence b, head h,
   and walks over that sequence's keys in blocks of BLOCK_N. Keys of other sequences
   are never loaded, so no token can attend across sequences and padding costs nothing.
   Programs whose block starts past the end of their (shorter) sequence return at once.
   The head dimension is padded to BLOCK_D, the next power of two (tile sizes must be
   powers of two), and masked, so head_dim 48 or 80 works.

3. **Online softmax.** A softmax row needs the max (for stability) and the sum of exp over the
   whole row, but we see the row one key block at a time. Keep per query row a running max m,
   a running sum l of exp(s - m), and an unnormalised output acc = sum exp(s - m) v. When a new
   block raises the max from m to m', everything accumulated so far was scaled by exp(-m) and
   must be rescaled by alpha = exp(m - m'): l = alpha*l + rowsum(exp(s - m')), acc = alpha*acc +
   exp(s - m') V. At the end O = acc / l, exact, in fp32 whatever the input dtype. We work in
   base 2 (exp2, with log2(e) folded into the scale) because exp2 is the native GPU instruction.
   The forward also saves, per row, the log-sum-exp lse = m + log2(l), so P = exp2(s - lse).

**Backward, and why it recomputes P.** Storing P for the backward would cost n*n numbers per
head, the very memory FlashAttention avoids; recomputing a tile of P from Q, K and the saved
lse is one extra tile matmul, cheap next to reading P back from memory. With dP = dO V^T the
softmax gradient is dS = P * (dP - delta), delta_i = sum_j P_ij dP_ij = dO_i . O_i, which a
small preprocess kernel computes once per row. Then dV = P^T dO, dK = scale * dS^T Q and
dQ = scale * dS K. Following FlashAttention-2 we split the work so that every program owns
what it writes and no atomics are needed: one kernel holds a block of keys and loops over
query blocks to accumulate dK and dV; a second holds a block of queries and loops over key
blocks to accumulate dQ. The price is computing the P and dS tiles twice; the gain is a
deterministic, race-free backward.

**Dropout** (on P, as in BERT) uses Philox counter-based random numbers: `tl.rand(seed, offset)`
is a pure function of (seed, offset), and the offset names the entry (head, query token, key
position) uniquely. The backward regenerates exactly the forward's mask instead of storing it.
The softmax normaliser l uses the undropped P; kept entries are scaled by 1 / (1 - p). The
dS formula above still holds with delta = dO . O because O is computed from the dropped P.
"""

import functools

import triton
import triton.language as tl

from . import candidates as tuning

# The CPU interpreter's tl.dot multiplies bfloat16 bit patterns as integers
# (triton-lang/triton#11584, "not supported yet"); under it we upcast bfloat16 operands to
# fp32, which is what the tensor cores compute anyway (exact products, fp32 accumulation).
INTERPRETED = tl.constexpr(triton.knobs.runtime.interpret)


def _tuning(kernel):
    """Autotune over `candidates.py`'s (BLOCK_M, BLOCK_N, num_warps, num_stages) for `kernel`,
    re-tuned per head_dim, power-of-two bucket of max_seqlen, dropout, product precision and
    dtypes; each launch chooses only among its key's candidates (`candidates.prune`), which were
    compiled for sm_80 and sm_90 without spilling. The interpreter gets one small, deliberately
    unequal tile pair so that short test sequences still span several blocks."""
    key = ["HEAD_DIM", "seqlen_bucket", "HAS_DROPOUT", "PRECISION"]
    if triton.knobs.runtime.interpret:
        return triton.autotune([triton.Config({"BLOCK_M": 16, "BLOCK_N": 32})], key=key)
    configs = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
               for m, n, w, s in tuning.all_candidates(kernel)]
    return triton.autotune(configs, key=key, prune_configs_by={"early_config_prune": functools.partial(tuning.prune, kernel)})


# Integers that change from batch to batch and need no compile-time specialisation.
_RUNTIME_INTS = ["seed", "total_tokens", "max_seqlen", "seqlen_bucket"]


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """a @ b accumulated in fp32. PRECISION ("ieee" or "tf32") matters for fp32 inputs only."""
    if INTERPRETED:
        if a.dtype == tl.bfloat16:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _dropout_keep(seed, row_ids, cols, max_seqlen, dropout_p):
    """Philox keep-mask for P[rows, cols] (row_ids and cols broadcast against each other). Entry
    (head, query token, key position) gets the int64 counter (head * total_tokens + token) *
    max_seqlen + key position, where row_ids = head * total_tokens + token, so forward and
    backward draw the same bits and no two entries of one call share one."""
    return tl.rand(seed, row_ids * max_seqlen + cols) >= dropout_p


@triton.jit
def _sequence(cu_seqlens):
    """The sequence (grid axis 1) and head (axis 2) of this program: (first token, length,
    head). The first token is int64 so that base pointers cannot overflow on large batches;
    offsets inside one sequence stay int32, which keeps address registers small."""
    seq = tl.program_id(1)
    start = tl.load(cu_seqlens + seq)
    return start.to(tl.int64), tl.load(cu_seqlens + seq + 1) - start, tl.program_id(2).to(tl.int64)


@triton.jit
def _tile(base, rows, stride_t, dims, mask):
    """Load a [rows, dims] tile of one (sequence, head); masked lanes read 0."""
    return tl.load(base + rows[:, None] * stride_t + dims[None, :], mask=mask, other=0.0)


@triton.jit
def _store_tile(base, rows, stride_t, dims, value, mask):
    """Store a [rows, dims] tile of one (sequence, head), converted to the output's dtype."""
    tl.store(base + rows[:, None] * stride_t + dims[None, :], value.to(base.dtype.element_ty), mask=mask)


@_tuning("forward")
@triton.jit(do_not_specialize=_RUNTIME_INTS)
def forward_kernel(
    Q, K, V, O, LSE, cu_seqlens, seed,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    total_tokens, max_seqlen, qk_scale, dropout_p, seqlen_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """O and log2-sum-exp for BLOCK_M query rows of one (sequence, head), streaming its keys."""
    start, length, head = _sequence(cu_seqlens)
    if tl.program_id(0) * BLOCK_M >= length:
        return
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    q_mask = (rows < length)[:, None] & dim_ok[None, :]
    q = _tile(Q + start * stride_qt + head * stride_qh, rows, stride_qt, dims, q_mask)
    k_base = K + start * stride_kt + head * stride_kh
    v_base = V + start * stride_vt + head * stride_vh
    row_base = head * total_tokens + start  # this sequence's rows in LSE and the dropout counter

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running row max (log2 units)
    l = tl.zeros([BLOCK_M], tl.float32)  # running sum of exp2(s - m)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)  # running sum of exp2(s - m) v
    for col0 in range(0, length, BLOCK_N):
        cols = col0 + tl.arange(0, BLOCK_N)
        col_ok = cols < length
        k = _tile(k_base, cols, stride_kt, dims, col_ok[:, None] & dim_ok[None, :])
        v = _tile(v_base, cols, stride_vt, dims, col_ok[:, None] & dim_ok[None, :])
        s = _dot(q, tl.trans(k), PRECISION) * qk_scale
        s = tl.where(col_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        if HAS_DROPOUT:
            keep = _dropout_keep(seed, (row_base + rows)[:, None], cols[None, :], max_seqlen, dropout_p)
            p = tl.where(keep, p / (1.0 - dropout_p), 0.0)
        acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, PRECISION)
        m = m_new

    out = acc / l[:, None]
    _store_tile(O + start * stride_ot + head * stride_oh, rows, stride_ot, dims, out, q_mask)
    tl.store(LSE + row_base + rows, m + tl.log2(l), mask=rows < length)


@triton.jit
def delta_kernel(O, DO, DELTA, stride_ot, stride_oh, stride_dot, stride_doh, total_tokens,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_T: tl.constexpr):
    """delta[head, token] = dO . O, the row term of the softmax gradient; grid (tokens, heads)."""
    first = tl.program_id(0).to(tl.int64) * BLOCK_T
    head = tl.program_id(1).to(tl.int64)
    rows = tl.arange(0, BLOCK_T)
    dims = tl.arange(0, BLOCK_D)
    mask = (first + rows < total_tokens)[:, None] & (dims < HEAD_DIM)[None, :]
    o = _tile(O + first * stride_ot + head * stride_oh, rows, stride_ot, dims, mask)
    do = _tile(DO + first * stride_dot + head * stride_doh, rows, stride_dot, dims, mask)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + head * total_tokens + first + rows, delta, mask=first + rows < total_tokens)


@_tuning("backward_dkdv")
@triton.jit(do_not_specialize=_RUNTIME_INTS)
def backward_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, DK, DV, cu_seqlens, seed,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_dot, stride_doh, stride_gt, stride_gh,
    total_tokens, max_seqlen, qk_scale, sm_scale, dropout_p, seqlen_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """dK, dV for BLOCK_N keys of one (sequence, head), looping over its query blocks."""
    start, length, head = _sequence(cu_seqlens)
    if tl.program_id(0) * BLOCK_N >= length:
        return
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    kv_mask = (cols < length)[:, None] & dim_ok[None, :]
    k = _tile(K + start * stride_kt + head * stride_kh, cols, stride_kt, dims, kv_mask)
    v = _tile(V + start * stride_vt + head * stride_vh, cols, stride_vt, dims, kv_mask)
    q_base = Q + start * stride_qt + head * stride_qh
    do_base = DO + start * stride_dot + head * stride_doh
    row_base = head * total_tokens + start  # this sequence's rows in LSE, DELTA and the dropout counter

    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    for row0 in range(0, length, BLOCK_M):
        # Rows past the sequence end load q = dO = delta = 0, so they add 0 to dV and dK.
        rows = row0 + tl.arange(0, BLOCK_M)
        row_ok = rows < length
        q = _tile(q_base, rows, stride_qt, dims, row_ok[:, None] & dim_ok[None, :])
        do = _tile(do_base, rows, stride_dot, dims, row_ok[:, None] & dim_ok[None, :])
        lse = tl.load(LSE + row_base + rows, mask=row_ok, other=0.0)
        delta = tl.load(DELTA + row_base + rows, mask=row_ok, other=0.0)
        # Work on transposed tiles, [keys, queries], so that every tl.dot takes loaded tiles
        # or P^T and dS^T as they are computed, with no transpose of a computed tile.
        p_t = tl.exp2(_dot(k, tl.trans(q), PRECISION) * qk_scale - lse[None, :])
        dp_t = _dot(v, tl.trans(do), PRECISION)
        if HAS_DROPOUT:
            keep_t = _dropout_keep(seed, (row_base + rows)[None, :], cols[:, None], max_seqlen, dropout_p)
            p_dropped_t = tl.where(keep_t, p_t / (1.0 - dropout_p), 0.0)
            dp_t = tl.where(keep_t, dp_t / (1.0 - dropout_p), 0.0)
        else:
            p_dropped_t = p_t
        dv += _dot(p_dropped_t.to(do.dtype), do, PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += _dot(ds_t.to(q.dtype), q, PRECISION)

    grad_base = start * stride_gt + head * stride_gh
    _store_tile(DK + grad_base, cols, stride_gt, dims, dk * sm_scale, kv_mask)
    _store_tile(DV + grad_base, cols, stride_gt, dims, dv, kv_mask)


@_tuning("backward_dq")
@triton.jit(do_not_specialize=_RUNTIME_INTS)
def backward_dq_kernel(
    Q, K, V, DO, LSE, DELTA, DQ, cu_seqlens, seed,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_dot, stride_doh, stride_gt, stride_gh,
    total_tokens, max_seqlen, qk_scale, sm_scale, dropout_p, seqlen_bucket,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, HAS_DROPOUT: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """dQ for BLOCK_M queries of one (sequence, head), looping over its key blocks."""
    start, length, head = _sequence(cu_seqlens)
    if tl.program_id(0) * BLOCK_M >= length:
        return
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    row_ok = rows < length
    q_mask = row_ok[:, None] & dim_ok[None, :]
    q = _tile(Q + start * stride_qt + head * stride_qh, rows, stride_qt, dims, q_mask)
    do = _tile(DO + start * stride_dot + head * stride_doh, rows, stride_dot, dims, q_mask)
    row_base = head * total_tokens + start
    lse = tl.load(LSE + row_base + rows, mask=row_ok, other=0.0)
    delta = tl.load(DELTA + row_base + rows, mask=row_ok, other=0.0)
    k_base = K + start * stride_kt + head * stride_kh
    v_base = V + start * stride_vt + head * stride_vh

    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for col0 in range(0, length, BLOCK_N):
        # Keys past the sequence end load k = v = 0, so their dS column adds 0 to dQ.
        cols = col0 + tl.arange(0, BLOCK_N)
        kv_mask = (cols < length)[:, None] & dim_ok[None, :]
        k = _tile(k_base, cols, stride_kt, dims, kv_mask)
        v = _tile(v_base, cols, stride_vt, dims, kv_mask)
        p = tl.exp2(_dot(q, tl.trans(k), PRECISION) * qk_scale - lse[:, None])  # recomputed P
        dp = _dot(do, tl.trans(v), PRECISION)
        if HAS_DROPOUT:
            keep = _dropout_keep(seed, (row_base + rows)[:, None], cols[None, :], max_seqlen, dropout_p)
            dp = tl.where(keep, dp / (1.0 - dropout_p), 0.0)
        ds = p * (dp - delta[:, None])
        dq += _dot(ds.to(k.dtype), k, PRECISION)

    _store_tile(DQ + start * stride_gt + head * stride_gh, rows, stride_gt, dims, dq * sm_scale, q_mask)
