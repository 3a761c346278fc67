"""The one Transformer encoder of the BERT family.

    input ids ─► Embeddings (token + position + segment, LayerNorm, dropout)
              ─► [projection E → H, when E (`embedding_size`) differs from H]
              ─► depth × ( self-attention sublayer ─► feed-forward sublayer )
              ─► [final LayerNorm, under pre-LN]
              ─► last_hidden_state  (─► pooler: tanh(Linear) of the first token)

BERT, RoBERTa, ALBERT, DistilBERT and ELECTRA are all this encoder with different
`ModelConfig` values. `Encoder.forward` reads as that recipe. Its two speed tricks are one
branch beside it, `Encoder.fast_path`: with `needed`, the last layer runs only at the positions
a loss reads (`last_layer_at`), and a batch with at least `Encoder.UNPAD_FROM` padding runs on
its real tokens only (kernels/unpad.py); docs/speed.md says what each saves. The default bert,
roberta and albert steps take that branch (their losses read the masked positions, and
`Pretrainer.forward` passes those as `needed`), as does ELECTRA's generator; DistilBERT's losses
and ELECTRA's discriminator read every position, so they take it for a batch padded enough to
unpad. The recipe's loop is what such a step computes, not the lines it runs: to step through the
recipe itself, run with `python train.py --reference` (`ModelConfig.reference`), which turns both
tricks off, with the naive attention and the plain loss: the reference path, for reading and
debugging, tested equal to the fast one (tests/test_reference.py). Looking inside (every
layer's states and attention probabilities) runs the recipe alone, on the padded grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .attention import Rotary, SelfAttention, Sequences
from .config import ModelConfig
from .kernels.cpu_dropout import dropout_add
from .kernels.unpad import TokenLayout

ACTIVATIONS = {
    "gelu": nn.GELU(),
    "gelu_tanh": nn.GELU(approximate="tanh"),  # ALBERT's "gelu_new"
    "relu": nn.ReLU(),
    "silu": nn.SiLU(),
}


@dataclass
class ModelOutput:
    """What the Encoder returns. Each task model's output (heads.py) adds its own `logits` and
    `loss` to these.

    last_hidden_state    [B, T, H], the last layer's output (after the final LayerNorm). When
                         the caller passed `needed` (`Encoder.forward`): exact at the needed
                         positions (and position 0, with a pooler), on the fast path ZERO elsewhere.
    pooler_output        [B, H], tanh(Linear) of the first position, with a pooler.
    hidden_states        with output_hidden_states: num_layers + 1 tensors [B, T, H], the
                         embeddings (projected to H) and then each layer's output.
    attentions           with output_attentions: num_layers tensors [B, heads, T, T], each
                         layer's attention probabilities (before dropout; rows sum to 1).
    """

    last_hidden_state: torch.Tensor | None = None  # always set by the Encoder
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None

    def sentence_vector(self) -> torch.Tensor:
        """[B, H]: what a sentence-level head reads — the pooled vector, or without a pooler
        (ELECTRA, DistilBERT) the first position's state (exact whenever `needed` holds position 0)."""
        return self.pooler_output if self.pooler_output is not None else self.last_hidden_state[:, 0]


def first_position_mask(input_ids: torch.Tensor) -> torch.Tensor:
    """[B, T] bool, True at position 0 ([CLS]) only: the `needed` of a sentence-level head."""
    return (torch.arange(input_ids.shape[1], device=input_ids.device) == 0).expand_as(input_ids)


class Embeddings(nn.Module):
    """token + position (+ segment) embeddings, then LayerNorm and dropout.

    The tables are E = `embedding_size` wide (None: E = H, as in BERT). ALBERT's
    factorization picks a small E (128): the vocabulary costs V·E + E·H parameters (table +
    projection) instead of V·H — for V = 30k, H = 4096 that is 4M instead of 123M. The
    projection E → H lives in the Encoder, so that ELECTRA's generator and discriminator can
    share these tables while each projects them to its own width.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        E = config.embedding_size or config.hidden_size  # None: as wide as H
        self.word_embeddings = nn.Embedding(config.vocab_size, E)
        self.position_embeddings = nn.Embedding(config.max_positions, E) if config.position_encoding == "learned" else None
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E) if config.type_vocab_size else None
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, input_ids, position_ids, token_type_ids) -> torch.Tensor:
        """ids [B, T] (or packed [tokens]) -> [B, T, E]; rotary models have no position table."""
        x = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(position_ids)
        if self.token_type_embeddings is not None:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.norm(x))


class FeedForward(nn.Module):
    """The position-wise MLP: H → intermediate → H."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACTIVATIONS[config.activation]
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.act(self.up(x)))


class Sublayer(nn.Module):
    """A residual branch with its LayerNorm: `attention` or `feed_forward` of a layer.

    post-LN (BERT):   x = LayerNorm(x + dropout(f(x)))
    pre-LN:           x = x + dropout(f(LayerNorm(x)))   (trains more stably when deep)
    """

    def __init__(self, fn: nn.Module, config: ModelConfig):
        super().__init__()
        self.fn = fn  # f, the branch; "fn" is in every checkpoint's names (attention.0.fn.qkv.weight)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.pre_norm = config.norm == "pre"
        self.one_pass = config.hidden_dropout > 0 and not config.reference  # while training on a CPU: `residual_add`

    def forward(self, x: torch.Tensor, *args) -> torch.Tensor:
        return self.residual_add(x, self.fn(self.fn_input(x), *args))

    def at_rows(self, x: torch.Tensor, rows: torch.Tensor, *args) -> torch.Tensor:
        """The sublayer's output at some rows of x only: x [..., H], rows (indices into x's rows,
        flattened) -> [rows, H]. f takes the `rows` itself: SelfAttention's output at a row reads
        every token's key and value, so it cannot run on those rows alone."""
        return self.residual_add(x.flatten(0, -2).index_select(0, rows), self.fn(self.fn_input(x), *args, rows=rows))

    def probabilities(self, x: torch.Tensor, *args) -> torch.Tensor:
        """An attention sublayer's attention probabilities at x (`SelfAttention.probabilities`)."""
        return self.fn.probabilities(self.fn_input(x), *args)

    def fn_input(self, x: torch.Tensor) -> torch.Tensor:
        """What f reads: LayerNorm(x) under pre-LN, x itself under post-LN."""
        return self.norm(x) if self.pre_norm else x

    def residual_add(self, residual: torch.Tensor, fn_output: torch.Tensor) -> torch.Tensor:
        """The residual connection: x + dropout(f(...)), then LayerNorm under post-LN. While training
        on a CPU the add and the dropout take one pass and a cheaper mask (kernels/cpu_dropout.py)."""
        x = residual + self.dropout(fn_output) if not (self.one_pass and self.training and fn_output.is_cpu) else dropout_add(fn_output, self.dropout.p, residual)
        return x if self.pre_norm else self.norm(x)


def build_layers(config: ModelConfig) -> tuple[nn.ModuleList, nn.ModuleList]:
    """How ALBERT shares layers: fewer modules than depth, each reused at every depth.

    ALBERT's cross-layer sharing is plain module reuse: instead of num_layers different
    attention (or feed-forward) sublayers, the encoder keeps ONE and applies it at every
    depth, so the parameter count no longer grows with depth (ALBERT-large: 18M parameters
    instead of BERT-large's 334M). The paper also studies sharing only the attention
    sublayers or only the feed-forward ones; `share_layers` picks which.
    """
    depth = config.num_layers
    n_attention = 1 if config.share_layers in ("all", "attention") else depth
    n_feed_forward = 1 if config.share_layers in ("all", "ffn") else depth
    attention = nn.ModuleList(Sublayer(SelfAttention(config), config) for _ in range(n_attention))
    feed_forward = nn.ModuleList(Sublayer(FeedForward(config), config) for _ in range(n_feed_forward))
    return attention, feed_forward


class Encoder(nn.Module):
    """The backbone. forward() -> ModelOutput: last_hidden_state [B, T, H] and pooler_output [B, H]
    (with a pooler)."""

    UNPAD_FROM = 0.2  # `unpads` a batch with this share of padding or more (docs/speed-measured.md#unpad)

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config, self.max_length = config, config.max_length
        self.embeddings = Embeddings(config)
        H = config.hidden_size
        E = config.embedding_size or H
        self.embedding_projection = nn.Linear(E, H) if E != H else nn.Identity()  # ALBERT's E -> H
        self.rotary = Rotary(config.head_dim) if config.position_encoding == "rotary" else None
        self.attention, self.feed_forward = build_layers(config)
        self.final_norm = nn.LayerNorm(H, eps=config.layer_norm_eps) if config.norm == "pre" else nn.Identity()
        self.pooler = nn.Linear(H, H) if config.pooler else None
        # The speed tricks (`fast_path`), all off under --reference (the reference path, to read and debug with)
        self.speed_tricks = not config.reference
        self.unpad = config.unpad and self.speed_tricks
        self.unpads_every_batch = config.attention_backend == "triton" and self.speed_tricks  # the kernel reads packed tokens
        self.checkpoint_activations = False  # runs/levers.py switches it on (--checkpoint-activations)
        init_weights(self, config)

    def layer(self, depth: int) -> tuple[Sublayer, Sublayer]:
        """The (attention, feed-forward) sublayers applied at `depth` — shared ones repeat."""
        return self.attention[depth % len(self.attention)], self.feed_forward[depth % len(self.feed_forward)]

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, needed=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> ModelOutput:
        """input ids [B, T] -> ModelOutput: last_hidden_state [B, T, H], pooler_output [B, H].

        The recipe, a step a line: the embeddings (projected E → H), the layers, the final
        LayerNorm (pre-LN), the pooler. The speed tricks are one branch, `fast_path`, which a
        step takes with `needed` or a batch padded enough to unpad (`--reference` keeps the step
        here): unpadding (`embed` packs the real tokens of a batch the encoder `unpads`) and, with
        `needed`, the last layer at the needed positions only.

        `needed` (optional, [B, T] bool): the positions whose final hidden state the caller
        will read — the positions a loss reads, e.g. the masked ones for MLM. On the fast path
        the last layer then runs there only (`last_layer_at`): last_hidden_state is exact at
        the needed positions and ZERO elsewhere. With a pooler, position 0 is always computed
        (the pooler reads it). The reference path and looking inside compute every position.
        `output_hidden_states` / `output_attentions` also return every layer's states /
        attention probabilities, as transformers does (`look_inside`: the recipe alone).
        """
        if output_hidden_states or output_attentions:
            return self.look_inside(input_ids, attention_mask, token_type_ids, output_hidden_states, output_attentions)
        x, sequences = self.embed(input_ids, attention_mask, token_type_ids, unpad=True)  # [B, T, H], or [tokens, H] unpadded
        if sequences.packed is not None or (needed is not None and self.speed_tricks):
            return self.fast_path(x, sequences, needed, input_ids.shape)
        for depth in range(self.config.num_layers):
            x = self.apply_layer(depth, x, sequences)
        x = self.final_norm(x)
        return ModelOutput(last_hidden_state=x, pooler_output=self.pool(x))

    def fast_path(self, x: torch.Tensor, sequences: Sequences, needed, grid_shape: torch.Size) -> ModelOutput:
        """`forward`'s layers, final LayerNorm and pooler with the speed tricks, which --reference
        turns off: x unpadded ([tokens, H], `sequences.packed`) goes back onto the [B, T] grid at
        the end, zeros at padding; with `needed`, the last layer runs at the needed positions only."""
        for depth in range(self.config.num_layers - (needed is not None)):  # with `needed`, the last layer apart
            x = self.apply_layer(depth, x, sequences)
        if needed is None:  # here to unpad only: every real token, then [tokens, H] -> [B, T, H]
            x = sequences.packed.unpack(self.final_norm(x))
        else:
            x = self.last_layer_at(needed, x, sequences, grid_shape)
        return ModelOutput(last_hidden_state=x, pooler_output=self.pool(x))

    def last_layer_at(self, needed: torch.Tensor, x: torch.Tensor, sequences: Sequences,
                      grid_shape: torch.Size) -> torch.Tensor:
        """The last layer and the final LayerNorm at the needed positions only, back on the grid:
        x [B, T, H] (or [tokens, H] unpadded) -> [B, T, H], zeros where nothing was needed.

        Why: a loss often reads a few positions: for MLM the masked ones (the default albert
        run's 40% of the tokens), one for NSP/SOP; the last layer's output anywhere else would
        be thrown away. Attention still runs at every token (every query, key and value, and
        pre-LN's LayerNorm before them); its output projection, the feed-forward and every other
        LayerNorm run on the needed rows alone (`Sublayer.at_rows`).
        """
        if self.pooler is not None:  # the pooler reads position 0: it is needed too, whatever the caller said
            needed = needed | first_position_mask(needed)
        rows = (needed.flatten() if sequences.packed is None else sequences.packed.pack(needed)).nonzero().squeeze(1)  # of x
        attention, feed_forward = self.layer(self.config.num_layers - 1)
        x = self.final_norm(feed_forward(attention.at_rows(x, rows, sequences)))  # [needed, H]
        grid_rows = rows if sequences.packed is None else sequences.packed.grid_index.index_select(0, rows)  # in [B * T]
        return x.new_zeros(grid_shape.numel(), x.shape[-1]).index_copy(0, grid_rows, x).view(*grid_shape, -1)

    def look_inside(self, input_ids, attention_mask, token_type_ids, output_hidden_states: bool,
                    output_attentions: bool) -> ModelOutput:
        """`forward` with every layer's states and attention probabilities: the same layers, at
        every position on the padded grid. The probabilities are computed apart, because the
        fused attention kernels never hold them."""
        x, sequences = self.embed(input_ids, attention_mask, token_type_ids, unpad=False)
        hidden_states, attentions = [x], []  # the embeddings, then each layer's output; each layer's attention
        for depth in range(self.config.num_layers):
            if output_attentions:
                attentions.append(self.layer(depth)[0].probabilities(x, sequences))
            x = self.apply_layer(depth, x, sequences)
            hidden_states.append(x)
        x = self.final_norm(x)
        return ModelOutput(last_hidden_state=x, pooler_output=self.pool(x),
                           hidden_states=tuple(hidden_states) if output_hidden_states else None,
                           attentions=tuple(attentions) if output_attentions else None)

    def pool(self, x: torch.Tensor) -> torch.Tensor | None:
        """The pooler: tanh(Linear) of the first position [B, T, H] -> [B, H]; None without one."""
        return torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None

    def embed(self, input_ids, attention_mask, token_type_ids, unpad: bool) -> tuple[torch.Tensor, Sequences]:
        """The first step: ids [B, T] -> x [B, T, H] on the padded grid, and the `Sequences` every
        layer reads beside it. With `unpad`, a batch the encoder `unpads` runs on its real tokens
        alone: x [tokens, H], packed back to back (`Sequences.packed`, kernels/unpad.py)."""
        if input_ids.shape[1] > self.max_length:
            raise ValueError(f"sequence length {input_ids.shape[1]} exceeds the {self.max_length} positions this model "
                             f"has; truncate inputs to {self.max_length} tokens")
        positions = self.config.position_offset + torch.arange(input_ids.shape[1], device=input_ids.device)  # [T]
        token_type_ids = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        key_mask = None if attention_mask is None or attention_mask.all() else attention_mask.bool()  # [B, T], True = real
        packed = None  # the padded grid
        if unpad and self.unpads(key_mask):  # [B, T] -> [tokens]: the packed layout knows which tokens form a sequence
            packed = TokenLayout.from_mask(torch.ones_like(input_ids) if key_mask is None else key_mask)
            input_ids, positions, token_type_ids = map(packed.pack, (input_ids, positions.expand(len(input_ids), -1), token_type_ids))
            key_mask = None
        x = self.embedding_projection(self.embeddings(input_ids, positions, token_type_ids))  # [B, T, E] -> [B, T, H]
        return x, Sequences(key_mask, self.rotary(positions) if self.rotary is not None else None, packed)

    def unpads(self, key_mask: torch.Tensor | None) -> bool:
        """Whether the layers run on the real tokens only (kernels/unpad.py): every batch under the
        Triton kernel, which reads packed tokens only; otherwise a batch with at least UNPAD_FROM
        padding, the threshold bench/unpad_threshold.py finds (below it the padded grid, the
        simpler path, pays as well: docs/speed.md)."""
        return self.unpads_every_batch or (self.unpad and key_mask is not None and 1 - key_mask.float().mean() >= self.UNPAD_FROM)

    def apply_layer(self, depth: int, x: torch.Tensor, sequences: Sequences) -> torch.Tensor:
        """The layer at `depth`: attention, then feed-forward. Under --checkpoint-activations its
        activations are recomputed in the backward instead of kept."""
        attention, feed_forward = self.layer(depth)
        if self.checkpoint_activations:
            return checkpoint(lambda x: feed_forward(attention(x, sequences)), x, use_reentrant=False)
        return feed_forward(attention(x, sequences))


def init_weights(module: nn.Module, config: ModelConfig) -> None:
    """BERT's initialisation: N(0, 0.02) weights, zero biases, LayerNorm = identity."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=config.initializer_range)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
