"""The Triton varlen FlashAttention kernel against a float64 per-sequence reference.

Runs on the CPU through Triton's interpreter (set TRITON_INTERPRET=0 to run on a CUDA GPU).
Triton reads TRITON_INTERPRET when a kernel is defined (`@triton.jit`), and minibert defines its
kernels at the first flash_attention call, not at import: setting it here, at collection, works
even when other test modules imported minibert (or triton) first.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402

pytest.importorskip("triton")

from minibert.kernels import flash_attention  # noqa: E402
from minibert.kernels import reference as reference_helpers  # noqa: E402
from minibert.kernels.reference import TOLERANCE, dropout_mask, kernel_and_reference, reference  # noqa: E402

DEVICE = "cpu" if os.environ["TRITON_INTERPRET"] == "1" else "cuda"
if DEVICE == "cuda" and not torch.cuda.is_available():
    pytest.skip("TRITON_INTERPRET=0 and no CUDA device", allow_module_level=True)

NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def cu_seqlens_of(lengths):
    return reference_helpers.cu_seqlens_of(lengths, DEVICE)


def random_qkv(lengths, heads, head_dim, dtype, seed=0):
    return reference_helpers.random_qkv(lengths, heads, head_dim, dtype, DEVICE, seed)


def check_against_reference(lengths, heads, head_dim, dtype, **options):
    """Kernel vs float64 reference, forward and dq/dk/dv, at the dtype's tolerance (atol = rtol)."""
    tol = TOLERANCE[NAMES[dtype]]
    results = kernel_and_reference(lengths, heads, head_dim, dtype, DEVICE, **options)
    assert results[0][1].dtype == dtype and results[0][1].shape == results[0][2].shape
    for name, got, want in results:
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("head_dim", [16, 48, 64])
def test_matches_reference_across_dtypes_and_head_dims(dtype, head_dim):
    # lengths: a single token, an empty sequence, and lengths that are not multiples of any block
    check_against_reference([1, 37, 0, 20], heads=2, head_dim=head_dim, dtype=dtype)


@settings(max_examples=6, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=4).filter(any),
       heads=st.integers(1, 3), head_dim=st.sampled_from([16, 24, 32]), seed=st.integers(0, 2**16))
def test_matches_reference_for_random_lengths(lengths, heads, head_dim, seed):
    check_against_reference(lengths, heads, head_dim, torch.float32, seed=seed)


def test_head_dim_128_custom_scale_and_generous_max_seqlen():
    check_against_reference([5, 18], heads=1, head_dim=128, dtype=torch.float32, max_seqlen=70, scale=0.3)


def test_tokens_never_attend_across_sequences():
    lengths = [9, 20, 14]
    q, k, v = random_qkv(lengths, heads=2, head_dim=16, dtype=torch.float32)
    cu_seqlens = cu_seqlens_of(lengths)
    out = flash_attention(q, k, v, cu_seqlens, 20)
    middle = slice(9, 29)
    perturbed = [t.detach().clone() for t in (q, k, v)]
    for t in perturbed:
        t[middle] = torch.randn_like(t[middle]) * 5
    changed = flash_attention(*perturbed, cu_seqlens, 20)
    others = torch.ones(sum(lengths), dtype=torch.bool)
    others[middle] = False
    assert torch.equal(out[others], changed[others])
    assert not torch.allclose(out[middle], changed[middle])
    # a loss on the first sequence sends no gradient into the others
    out[:9].square().sum().backward()
    for t in (q, k, v):
        assert torch.count_nonzero(t.grad[9:]) == 0 and torch.count_nonzero(t.grad[:9]) > 0


def test_strided_inputs_from_a_fused_qkv_projection():
    lengths = [12, 25]
    qkv = torch.randn(sum(lengths), 3, 2, 32, device=DEVICE, requires_grad=True)
    q, k, v = qkv.unbind(1)  # row stride 3 * heads * head_dim, as a fused QKV Linear produces
    flash_attention(q, k, v, cu_seqlens_of(lengths), 25).sum().backward()  # stride-0 grad_out
    qkv64 = qkv.detach().double().requires_grad_()
    reference(*qkv64.unbind(1), lengths, 32 ** -0.5).sum().backward()
    torch.testing.assert_close(qkv.grad.double(), qkv64.grad, atol=1e-4, rtol=1e-4)


def test_empty_batch_gives_empty_output_and_gradients():
    q, k, v = random_qkv([], heads=2, head_dim=16, dtype=torch.float32)
    for cu_seqlens in (cu_seqlens_of([]), cu_seqlens_of([0, 0])):
        out = flash_attention(q, k, v, cu_seqlens, 0)
        out.sum().backward()
        assert out.shape == (0, 2, 16) and q.grad.shape == (0, 2, 16)


def test_dropout_mask_is_philox_bernoulli_and_reproducible():
    lengths, p = [32, 7], 0.3
    keep = dropout_mask(lengths, 2, p, 0, DEVICE)
    kept = torch.cat([m.flatten() for m in keep]).double().mean().item()
    assert abs(kept - (1 - p)) < 0.05  # 2146 entries: five standard deviations
    assert all(torch.equal(a, b) for a, b in zip(keep, dropout_mask(lengths, 2, p, 0, DEVICE)))
    assert not all(torch.equal(a, b) for a, b in zip(keep, dropout_mask(lengths, 2, p, 1, DEVICE)))


def test_dropout_forward_and_backward_match_reference_with_the_same_mask():
    check_against_reference([32, 7], heads=2, head_dim=32, dtype=torch.float32, seed=3, dropout_p=0.25)


def bad_inputs():
    q = torch.randn(10, 2, 16, device=DEVICE)
    cu = cu_seqlens_of([4, 6])
    yield "same shape", (q, q[:9], q, cu, 6), {}
    yield "one dtype", (q, q.double(), q, cu, 6), {}
    yield "head_dim", (q[..., :8], q[..., :8], q[..., :8], cu, 6), {}
    yield "total_tokens, num_heads, head_dim", (q[0], q[0], q[0], cu, 6), {}
    yield "int32", (q, q, q, cu.long(), 6), {}
    yield "start at 0", (q, q, q, cu + 1, 6), {}
    yield "non-decreasing", (q, q, q, torch.tensor([0, 7, 4, 10], dtype=torch.int32, device=DEVICE), 7), {}
    yield "number of packed tokens", (q, q, q, cu_seqlens_of([4, 5]), 6), {}
    yield "longest sequence", (q, q, q, cu, 5), {}
    yield "max_seqlen", (q, q, q, cu, 6.0), {}
    yield "dropout_p", (q, q, q, cu, 6), {"dropout_p": 1.0}
    yield "softmax_scale", (q, q, q, cu, 6), {"softmax_scale": float("nan")}
    yield "int32 offsets", (q, q, q, cu, 2**27), {}


@pytest.mark.parametrize("needle, args, kwargs", list(bad_inputs()), ids=lambda x: x if isinstance(x, str) else None)
def test_bad_inputs_get_a_clear_error(needle, args, kwargs):
    with pytest.raises(ValueError, match=needle):
        flash_attention(*args, **kwargs)


def run_python(code, **env):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=120,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr


def test_minibert_imports_without_triton_and_names_the_fix():
    run_python(
        "import sys; sys.modules['triton'] = None\n"
        "import torch, minibert.kernels as mk\n"
        "x = torch.randn(3, 1, 16)\n"
        "try:\n"
        "    mk.flash_attention(x, x, x, torch.tensor([0, 3], dtype=torch.int32), 3)\n"
        "except ImportError as error:\n"
        "    assert 'pip install triton' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('no ImportError')\n")


def test_cpu_tensors_without_the_interpreter_are_refused():
    run_python(
        "import torch, minibert.kernels as mk, sys\n"
        "assert 'triton' not in sys.modules  # imported lazily, at the first call\n"
        "x = torch.randn(3, 1, 16)\n"
        "try:\n"
        "    mk.flash_attention(x, x, x, torch.tensor([0, 3], dtype=torch.int32), 3)\n"
        "except RuntimeError as error:\n"
        "    assert 'TRITON_INTERPRET=1' in str(error), error\n"
        "else:\n"
        "    raise AssertionError('no RuntimeError')\n", TRITON_INTERPRET="0")
