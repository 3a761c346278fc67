"""minibert.runs.flops against an independent count: torch's FlopCounterMode, which adds up the
FLOPs of every matmul the real model dispatches in a forward and backward pass.

The counts agree exactly (integers; compared at a relative 1e-12) wherever the model does
what the formula describes; where minibert does more than the strict count credits (queries
and attention rows of the last layer at every token), the gap is computed by hand.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from minibert import MaskedLM, ModelConfig, ReplacedTokenDetector
from minibert.runs.flops import BatchShape, encoder_flops, replaced_token_head_flops, training_flops
from minibert.heads import IGNORE_INDEX
from minibert.objectives.rtd import generator_config

B, T, V = 3, 12, 300


def tiny(embedding_size=None, **changes) -> ModelConfig:
    # naive attention: its QKᵀ and PV are plain matmuls the counter sees; no pooler (not counted)
    return ModelConfig(vocab_size=V, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64,
                       embedding_size=embedding_size, max_positions=T, pooler=False, attention_backend="naive",
                       hidden_dropout=0.0, attention_dropout=0.0, **changes)


def batch(seed: int = 0, padded: bool = False):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    lengths = torch.tensor([T, T // 2, 5]) if padded else torch.full((B,), T)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    masked = (torch.rand(B, T, generator=g) < 0.3) & mask.bool()
    masked[:, 1] = True
    return ids, mask, torch.where(masked, ids, IGNORE_INDEX)


def counted(model, ids, mask, labels) -> int:
    torch.manual_seed(0)
    with FlopCounterMode(display=False) as counter:
        model(ids, mask, labels=labels).loss.backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("embedding_size", [None, 16])
def test_discriminator_step_is_three_forwards_of_encoder_and_head(embedding_size):
    config = tiny(embedding_size)
    ids, mask, labels = batch()
    shape = BatchShape.of(mask, labels)
    expected = 3 * (encoder_flops(config, shape) + replaced_token_head_flops(config, shape))
    assert counted(ReplacedTokenDetector(config), ids, mask, (labels != IGNORE_INDEX).long()) == pytest.approx(expected, rel=1e-12)


def test_padding_costs_nothing():
    """A padded batch counts as its sequences run one by one at their real length."""
    config = tiny()
    ids, mask, labels = batch(padded=True)
    model = ReplacedTokenDetector(config)
    alone = 0
    for b in range(B):
        n = int(mask[b].sum())
        alone += counted(model, ids[b:b + 1, :n], mask[b:b + 1, :n], (labels[b:b + 1, :n] != IGNORE_INDEX).long())
    shape = BatchShape.of(mask, labels)
    assert 3 * (encoder_flops(config, shape) + replaced_token_head_flops(config, shape)) == pytest.approx(alone, rel=1e-12)
    assert shape.tokens == int(mask.sum()) < mask.numel()


@pytest.mark.parametrize("embedding_size", [None, 16])
def test_masked_lm_step_lies_between_the_strict_and_the_plain_count(embedding_size):
    config = tiny(embedding_size)
    ids, mask, labels = batch(seed=1)
    shape = BatchShape.of(mask, labels)
    measured = counted(MaskedLM(config), ids, mask, labels)
    strict, plain = training_flops(config, shape, sparse_last_layer=True), training_flops(config, shape)
    assert strict < measured < plain
    # minibert's last layer also computes queries and attention rows at the other tokens
    H = config.hidden_size
    extra = (shape.tokens - shape.masked) * 2 * H * H + 4 * H * (shape.squared_lengths - shape.masked_by_length)
    assert measured == pytest.approx(strict + 3 * extra, rel=1e-12)


def test_electra_step_is_generator_plus_discriminator():
    config = tiny(16)
    ids, mask, labels = batch(seed=2)
    shape = BatchShape.of(mask, labels)
    generator = training_flops(generator_config(config, 0.5, "scaled"), shape)
    discriminator = counted(ReplacedTokenDetector(config), ids, mask, (labels != IGNORE_INDEX).long())
    assert training_flops(config, shape, "rtd", generator_config(config, 0.5, "scaled")) == pytest.approx(generator + discriminator, rel=1e-12)
    with pytest.raises(ValueError, match="generator"):
        training_flops(config, shape, "rtd")


def test_uniform_shape_is_a_full_batch():
    ids, mask, labels = batch()
    uniform = BatchShape.uniform(B, T, int((labels != IGNORE_INDEX).sum()) / (B * T))
    # field by field: pytest.approx takes numbers and containers of them, not a dataclass
    assert asdict(uniform) == pytest.approx(asdict(BatchShape.of(mask, labels)), rel=1e-12)


def test_unknown_objective_is_a_one_line_error():
    with pytest.raises(ValueError, match="objective must be one of mlm, rtd"):
        training_flops(tiny(), BatchShape.uniform(1, 4), "nsp")


def test_a_distillation_plan_counts_every_token_s_projection_with_kd_all_tokens():
    """--kd-all-tokens takes the soft targets at every real token: the plan counts the student's and the
    teacher's vocabulary projections there, the same as a step predicting every token."""
    from minibert.runs.plan import step_flops
    from minibert.variants import VARIANTS

    variant, teacher = VARIANTS["distilbert"], ModelConfig(num_layers=2, hidden_size=64, num_heads=2, intermediate_size=128)
    student = teacher.replace(num_layers=1)
    masked = variant.default_settings(seq_len=32, batch_size=4, mask_prob=0.15)
    every = masked.replace(kd_all_tokens=True)
    assert step_flops(variant, every, student, teacher) == pytest.approx(step_flops(variant, masked.replace(mask_prob=1.0), student, teacher))
    assert step_flops(variant, every, student, teacher) > step_flops(variant, masked, student, teacher)
