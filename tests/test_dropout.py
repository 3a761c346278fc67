"""Dropout that is still dropout, on the CPU's cheaper masks (kernels/cpu_dropout.py): attention's
(`attend` with the sdpa backend while training) and every sublayer's (its residual add).

The masks are read back from what the code computes: attention with the values V = I returns its
dropped probabilities P̃ / (1 − p) themselves, and a residual add of 0 + dropout(1) the kept scale.
Shares are held to 1 − p within five binomial standard deviations; two masks are independent when
they drop the same element in p² of the cases, again within five deviations (a repeated mask
drops p of them together).
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minibert.kernels.cpu_dropout as cpu_dropout
from minibert import Encoder, ModelConfig
from minibert.attention import attend, attention_probs
from minibert.model import Sublayer

P = 0.1


def within_binomial(hits: int, n: int, p: float) -> bool:
    """Whether `hits` of `n` draws is a share within five standard deviations of p."""
    return abs(hits / n - p) <= 5 * math.sqrt(p * (1 - p) / n)


def attention_masks(batch=4, heads=4, length=256, p=P, seed=None):
    """`attend`'s kept probabilities, read through V = I: (keep [B, heads, T, T] bool, P̃ / (1 − p), P)."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(batch, heads, length, 16, generator=g) for _ in range(2))
    v = torch.eye(length).expand(batch, heads, length, length)
    if seed is not None:
        torch.manual_seed(seed)
    out = attend(q, k, v, None, "sdpa", p)
    return out != 0, out, attention_probs(q, k, None)


def co_dropped(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(elements two keep masks both drop, elements)."""
    return int((~a & ~b).sum()), a.numel()


def test_attention_keeps_one_minus_p_of_its_probabilities_scaled_by_one_over_one_minus_p():
    keep, out, probs = attention_masks(length=512)
    assert within_binomial(int(keep.sum()), keep.numel(), 1 - P)  # 4.2M probabilities: 1 − p to ±0.0007
    torch.testing.assert_close(out[keep], probs[keep] / (1 - P), rtol=1e-5, atol=1e-7)


def test_sublayer_dropout_keeps_one_minus_p_scaled_by_one_over_one_minus_p():
    config = ModelConfig(vocab_size=50, hidden_size=64, num_layers=1, num_heads=4, intermediate_size=64, norm="pre",
                         hidden_dropout=P, attention_dropout=P)
    sublayer = Sublayer(nn.Identity(), config).train()
    ones = torch.ones(128, 256, 128)  # 4.2M elements: 1 − p to ±0.0007
    added = sublayer.residual_add(torch.full_like(ones, 2.0), ones)  # pre-LN: 2 + dropout(1), no LayerNorm after
    kept = added != 2.0
    assert within_binomial(int(kept.sum()), kept.numel(), 1 - P)
    assert torch.equal(added[kept], torch.full_like(added[kept], 2 + 1 / (1 - P)))


def test_attention_masks_are_independent_across_heads_positions_sequences_and_calls(monkeypatch):
    monkeypatch.setattr(cpu_dropout, "BLOCK_SCORES", 2 * 256 * 256)  # two (sequence, head) rows a block: many blocks
    keep, _, _ = attention_masks()
    again, _, _ = attention_masks()  # the next call: another layer, or the next step
    pairs = {"heads": (keep[:, 0], keep[:, 1]), "heads of other blocks": (keep[:, 0], keep[:, 3]),
             "sequences": (keep[0], keep[1]), "query positions": (keep[..., 0::2, :], keep[..., 1::2, :]),
             "key positions": (keep[..., 0::2], keep[..., 1::2]), "calls": (keep, again)}
    for name, (a, b) in pairs.items():
        assert within_binomial(*co_dropped(a, b), P**2), name


def test_sublayer_masks_are_independent_across_positions_and_calls():
    config = ModelConfig(vocab_size=50, hidden_size=64, num_layers=1, num_heads=4, intermediate_size=64, norm="pre",
                         hidden_dropout=P, attention_dropout=P)
    sublayer = Sublayer(nn.Identity(), config).train()
    zeros, ones = torch.zeros(16, 128, 64), torch.ones(16, 128, 64)
    keep, again = (sublayer.residual_add(zeros, ones) != 0 for _ in range(2))
    for name, (a, b) in {"positions": (keep[:, 0::2], keep[:, 1::2]), "features": (keep[..., 0::2], keep[..., 1::2]),
                         "calls": (keep, again)}.items():
        assert within_binomial(*co_dropped(a, b), P**2), name


def test_a_seed_gives_the_same_masks_and_another_seed_others():
    first, _, _ = attention_masks(seed=3)
    assert torch.equal(attention_masks(seed=3)[0], first)
    assert not torch.equal(attention_masks(seed=4)[0], first)
    config = ModelConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, max_positions=32,
                         hidden_dropout=P, attention_dropout=P)
    torch.manual_seed(0)
    model = Encoder(config).train()
    ids, mask = torch.randint(5, 50, (3, 32)), torch.ones(3, 32, dtype=torch.long)
    mask[1, 20:] = 0  # padding: the padded keys' path too

    def step(seed):
        torch.manual_seed(seed)
        out = model(ids, mask)
        loss = out.last_hidden_state.square().sum() + out.pooler_output.sum()
        return out.last_hidden_state, torch.autograd.grad(loss, list(model.parameters()))

    (out, grads), (same, same_grads) = step(5), step(5)
    assert torch.equal(out, same) and all(torch.equal(a, b) for a, b in zip(grads, same_grads))
    assert not torch.equal(step(6)[0], out)


def test_the_backward_pass_uses_the_forward_passs_masks(monkeypatch):
    """gradcheck in float64, the global generator seeded before each forward pass (gradcheck runs
    several): the analytic gradient, made with the masks the backward pass draws again, must equal
    the numerical one, made with the forward pass's."""
    monkeypatch.setattr(cpu_dropout, "BLOCK_SCORES", 2 * 6 * 6)  # several blocks
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 4, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3))
    key_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])

    def attention(q, k, v):
        torch.manual_seed(0)
        return attend(q, k, v, key_mask, "sdpa", 0.3)

    def residual_add(x, residual):
        torch.manual_seed(0)
        return cpu_dropout.dropout_add(x, 0.3, residual)

    assert torch.autograd.gradcheck(attention, (q, k, v), fast_mode=True)
    assert torch.autograd.gradcheck(residual_add, (q, k), fast_mode=True)


def test_at_p_0_attention_is_todays_and_the_blocks_compute_its_values_and_gradients(monkeypatch):
    """p = 0 takes torch's fused kernel as before (bit for bit), and the blocks with nothing
    dropped give the formulas' values and gradients."""
    monkeypatch.setattr(cpu_dropout, "BLOCK_SCORES", 3 * 9 * 9)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(3, 2, 9, 8, generator=g, requires_grad=True) for _ in range(3))
    key_mask = torch.ones(3, 9, dtype=torch.bool)
    key_mask[1, 5:] = False
    key_mask[2] = False  # no real key at all: SDPA's rule, every key
    real = (key_mask | ~key_mask.any(1, keepdim=True))[:, None, None, :]
    grad = torch.randn(3, 2, 9, 8, generator=g)
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=real)
    assert torch.equal(attend(q, k, v, key_mask, "sdpa", 0.0), fused)
    blocks = cpu_dropout.dropout_attention(q, k, v, key_mask, 0.0)
    torch.testing.assert_close(blocks, fused, rtol=1e-5, atol=1e-6)
    for ours, theirs in zip(torch.autograd.grad(blocks, (q, k, v), grad), torch.autograd.grad(fused, (q, k, v), grad)):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_bf16_attention_with_dropout_keeps_to_fp32s_with_the_same_masks():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 100, 32, generator=g) for _ in range(3))
    grad = torch.randn(2, 4, 100, 32, generator=g)
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        inputs = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        torch.manual_seed(0)  # the same masks in both
        out = attend(*inputs, None, "sdpa", P)
        results[dtype] = (out, *torch.autograd.grad(out, inputs, grad.to(dtype)))
    for name, fp32, bf16 in zip(("out", "dq", "dk", "dv"), results[torch.float32], results[torch.bfloat16]):
        assert bf16.dtype == torch.bfloat16
        assert (bf16.float() - fp32).abs().max() <= 0.03 * fp32.abs().max(), name


def test_the_reference_path_keeps_torchs_dropout(monkeypatch):
    """--reference draws its dropout with F.dropout and attends by the formulas; the fast path takes
    the cheaper masks and the blocks."""
    config = ModelConfig(vocab_size=50, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=64, max_positions=16,
                         hidden_dropout=P, attention_dropout=P)
    ids = torch.randint(5, 50, (2, 16))

    def trick(*args, **kwargs):
        raise AssertionError("a fast-path trick ran")

    monkeypatch.setattr(cpu_dropout.BlockedDropoutAttention, "apply", trick)
    monkeypatch.setattr(cpu_dropout, "keep_mask", trick)
    Encoder(config.replace(reference=True)).train()(ids).last_hidden_state.sum().backward()
    with pytest.raises(AssertionError, match="fast-path trick"):
        Encoder(config).train()(ids)
