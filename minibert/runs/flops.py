"""FLOPs of a training step: the one compute model behind MFU and "equal compute".

bench/throughput.py divides it by a measured peak (model FLOP utilisation, as nanoGPT's
`estimate_mfu` does) and the results report spends equal FLOP budgets on MLM and ELECTRA
with it, so both must count the same way — this module is that way.

**Why not 6·N per token.** The usual rule (a forward costs 2 FLOPs per parameter per token, a
backward twice that) assumes every parameter is a matmul weight every token goes through.
In an encoder two things break it. The word-embedding table is most of a small model's
parameters (30k × 256 against 3M in four layers at H = 256) but a lookup costs nothing; the
decoder that is tied to it is a real [E, V] matmul, yet minibert runs it at the masked positions
only (`--mask-prob`: BERT's 15%; each default run's in variants.py) (sparse prediction, `heads.masked_lm_loss`). And attention's QKᵀ and PV
have no parameters but cost 4·H·T per token per layer, a quarter of a layer at T = 512, H = 256.
So the matmuls are counted one by one, 2 FLOPs per multiply-add:

    per token, per layer        2·(4H² + 2H·I)   Q, K, V and output projections; FFN up and down
    per sequence, per layer     4·H·T²           QKᵀ and PV over the T real tokens (unpadded)
    per token, if E ≠ H         2·E·H            the factorized embedding's projection to H
    per masked position       2·(H·E + E·V)    the MLM head's transform and its tied decoder
    per token (ELECTRA)         2·(H² + H)       the replaced-token head (H → H → 1)
    a training step             3 × forward      the backward computes two matmuls per forward one

Left out, as small or not matmuls: LayerNorms, softmax, activations, biases, the pooler and
the sentence heads (once per sequence), the optimizer. Padding is not counted: the useful
work is on real tokens, whatever a kernel spends on padding.

**The last layer at the masked positions.** A loss that reads only the masked positions
needs, from the last layer, keys and values for every token but queries, attention rows,
the output projection and the feed-forward at those positions alone. `sparse_last_layer=True`
credits only that much: the strictest count of necessary arithmetic. minibert's `Encoder`
(its `needed` argument, `Encoder.last_layer_at`) skips all of it except queries and attention rows, which it computes
for every token; the plain count (`False`) credits the whole last layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import ModelConfig
from ..heads import IGNORE_INDEX

OBJECTIVES = ("mlm", "rtd")


@dataclass(frozen=True)
class BatchShape:
    """What the FLOPs of a batch depend on, summed over its sequences (T = real tokens of a
    sequence, l = its masked positions; l may be fractional, an expected count)."""

    tokens: float  # Σ T
    masked: float  # Σ l
    squared_lengths: float  # Σ T²: attention's query-key pairs
    masked_by_length: float  # Σ l·T: the pairs of the masked queries alone

    @classmethod
    def uniform(cls, batch: int, seq_len: int, masked_fraction: float = 0.15) -> BatchShape:
        """`batch` full sequences of `seq_len` tokens, `masked_fraction` of them masked."""
        masked = batch * seq_len * masked_fraction
        return cls(batch * seq_len, masked, batch * seq_len**2, masked * seq_len)

    @classmethod
    def of(cls, attention_mask: torch.Tensor, labels: torch.Tensor) -> BatchShape:
        """A real batch: attention_mask [B, T] (1 = real token), labels [B, T] (IGNORE_INDEX = none)."""
        lengths = attention_mask.sum(1).double()
        masked = (labels != IGNORE_INDEX).sum(1).double()
        return cls(float(lengths.sum()), float(masked.sum()), float((lengths**2).sum()), float((masked * lengths).sum()))


def encoder_flops(config: ModelConfig, shape: BatchShape, sparse_last_layer: bool = False) -> float:
    """Forward FLOPs of the `Encoder` (embedding projection and layers) on a batch."""
    H, I = config.hidden_size, config.intermediate_size
    E = config.embedding_size or H
    dense = 2 * (4 * H * H + 2 * H * I)  # per token
    attention = 2 * 2 * H  # per query-key pair: QKᵀ and PV
    full_layers = config.num_layers - 1 if sparse_last_layer else config.num_layers
    flops = shape.tokens * dense * full_layers + shape.squared_lengths * attention * full_layers
    if sparse_last_layer:  # K and V for every token; Q, output, FFN and attention rows where masked
        flops += shape.tokens * 2 * (2 * H * H) + shape.masked * 2 * (2 * H * H + 2 * H * I)
        flops += shape.masked_by_length * attention
    if E != H:
        flops += shape.tokens * 2 * E * H
    return flops


def masked_lm_head_flops(config: ModelConfig, shape: BatchShape) -> float:
    """Forward FLOPs of the MLM head at the masked positions only: H → E, then E → V."""
    H = config.hidden_size
    E = config.embedding_size or H
    return shape.masked * 2 * (H * E + E * config.vocab_size)


def replaced_token_head_flops(config: ModelConfig, shape: BatchShape) -> float:
    """Forward FLOPs of ELECTRA's discriminator head on every real token: H → H → 1."""
    H = config.hidden_size
    return shape.tokens * 2 * (H * H + H)


def training_flops(config: ModelConfig, shape: BatchShape, objective: str = "mlm", generator: ModelConfig | None = None,
                   sparse_last_layer: bool = False) -> float:
    """FLOPs of one training step (forward + backward) of `objective` on a batch.

    mlm: the encoder and the MLM head at the masked positions. rtd (ELECTRA, `config` is the
    discriminator's): the `generator` (objectives/rtd.py:generator_config) — encoder and MLM head
    — AND the discriminator's encoder and per-token head. Sampling the replacements needs no
    backward, but the generator's own MLM loss trains it, so it counts in full, as the ELECTRA
    paper counts it. `sparse_last_layer`: see the module docstring (the MLM models only; the
    discriminator reads every token).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}")
    if objective == "mlm":
        return 3 * (encoder_flops(config, shape, sparse_last_layer) + masked_lm_head_flops(config, shape))
    if generator is None:
        raise ValueError("rtd's FLOPs count its generator: pass generator=generator_config(config, fraction, heads)")
    generator_forward = encoder_flops(generator, shape, sparse_last_layer) + masked_lm_head_flops(generator, shape)
    discriminator_forward = encoder_flops(config, shape) + replaced_token_head_flops(config, shape)
    return 3 * (generator_forward + discriminator_forward)
