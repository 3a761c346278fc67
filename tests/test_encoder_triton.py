"""The unpadded encoder path with our Triton kernel equals the padded SDPA path.

Runs on the CPU through Triton's interpreter (TRITON_INTERPRET=1, set in conftest.py).
"""

import os

import pytest
import torch
from hypothesis import given, settings, strategies as st

os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from minibert import MaskedLM, ModelConfig  # noqa: E402


def tiny(**changes):
    base = dict(vocab_size=61, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=40,
                max_positions=48, hidden_dropout=0.0, attention_dropout=0.0)
    return ModelConfig(**{**base, **changes})


@settings(max_examples=6, deadline=None)
@given(lengths=st.lists(st.integers(1, 33), min_size=1, max_size=3), extra=st.integers(0, 5),
       share=st.sampled_from(["none", "all"]))
def test_triton_unpadded_encoder_matches_padded_sdpa_forward_and_backward(lengths, extra, share):
    torch.manual_seed(0)
    seq_len = max(lengths) + extra
    reference = MaskedLM(tiny(attention_backend="sdpa", unpad=False, share_layers=share))
    ours = MaskedLM(reference.config.replace(attention_backend="triton"))
    ours.load_state_dict(reference.state_dict())
    ids = torch.randint(5, 61, (len(lengths), seq_len))
    mask = (torch.arange(seq_len)[None] < torch.tensor(lengths)[:, None]).long()
    labels = torch.where(mask.bool(), ids, -100)
    results = []
    for model in (reference, ours):
        out = model(ids, mask, labels=labels)
        out.loss.backward()
        hidden = model.encoder(ids, mask).last_hidden_state
        results.append((out.loss.detach(), hidden.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (loss_a, hid_a, grad_a), (loss_b, hid_b, grad_b) = results
    torch.testing.assert_close(loss_b, loss_a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hid_b[mask.bool()], hid_a[mask.bool()], atol=1e-5, rtol=1e-5)
    for name in grad_a:
        torch.testing.assert_close(grad_b[name], grad_a[name], atol=1e-5, rtol=1e-4, msg=name)
