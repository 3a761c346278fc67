"""The one Transformer encoder of the BERT family.

    input ids ─► Embeddings (token + position + segment, LayerNorm, dropout)
              ─► [projection E → H, when the embedding width E differs from H]
              ─► depth × ( self-attention sublayer ─► feed-forward sublayer )
              ─► last_hidden_state  (─► pooler: tanh(Linear) of the first token)

BERT, RoBERTa, ALBERT, DistilBERT and ELECTRA are all this encoder with different
`ModelConfig` values. Two speed tricks live in `Encoder.forward`, each in one place:
padding is removed once at the start ("unpadding": the layers run on the real tokens only
and the result is scattered back into the padded grid at the end), and with `needed` the
last layer runs only where a loss reads (`Encoder.last_layer_at`). `ModelConfig.reference`
(`python train.py --reference`) turns both off: the padded grid, every layer at every
position, the naive attention — the textbook path, for reading and debugging.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import Rotary, SelfAttention, TokenLayout, gather_rows, scatter_rows
from .config import ModelConfig

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

    last_hidden_state    [B, T, H], the last layer at every position. None when the caller
                         passed `needed` on the fast path: the last layer then ran at the
                         needed positions only, and its output is in needed_hidden_state.
    needed_hidden_state  [B, T, H], what a caller that passed `needed` reads: exact at the
                         needed positions, ZERO elsewhere on the fast path (sparse); the same
                         tensor as last_hidden_state when every position was computed
                         (`needed` None, the reference path, looking inside).
    pooler_output        [B, H], tanh(Linear) of the first position, with a pooler.
    hidden_states        with output_hidden_states: num_layers + 1 tensors [B, T, H], the
                         embeddings (projected to H) and then each layer's output.
    attentions           with output_attentions: num_layers tensors [B, heads, T, T], each
                         layer's attention probabilities (before dropout; rows sum to 1).
    """

    last_hidden_state: torch.Tensor | None = None
    pooler_output: torch.Tensor | None = None
    needed_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class Embeddings(nn.Module):
    """token + position (+ segment) embeddings, then LayerNorm and dropout.

    The tables are `embedding_dim` (E) wide. BERT uses E = H. ALBERT's factorization picks
    a small E (128): the vocabulary costs V·E + E·H parameters (table + projection) instead
    of V·H — for V = 30k, H = 4096 that is 4M instead of 123M. The projection E → H lives
    in the Encoder, so that ELECTRA's generator and discriminator can share these tables
    while each projects them to its own width.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        E = config.embedding_dim
        self.word_embeddings = nn.Embedding(config.vocab_size, E)
        self.position_embeddings = nn.Embedding(config.max_positions, E) if config.position_encoding == "learned" else None
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E) if config.type_vocab_size else None
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, input_ids, position_ids, token_type_ids=None) -> torch.Tensor:
        x = self.word_embeddings(input_ids)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(position_ids)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
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
        self.fn = fn
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.pre_norm = config.norm == "pre"

    def forward(self, x: torch.Tensor, *args) -> torch.Tensor:
        return self.add(x, self.fn(self.branch_input(x), *args))

    def branch_input(self, x: torch.Tensor) -> torch.Tensor:
        """What f reads: LayerNorm(x) under pre-LN, x itself under post-LN."""
        return self.norm(x) if self.pre_norm else x

    def add(self, residual: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """The residual connection: x + dropout(f(...)), then LayerNorm under post-LN."""
        x = residual + self.dropout(branch)
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
    """The backbone. forward() -> ModelOutput(last_hidden_state [B,T,H], pooler_output [B,H])."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        E, H = config.embedding_dim, config.hidden_size
        self.embedding_projection = nn.Linear(E, H) if E != H else None
        self.rotary = Rotary(config.head_dim) if config.position_encoding == "rotary" else None
        self.attention, self.feed_forward = build_layers(config)
        self.final_norm = nn.LayerNorm(H, eps=config.layer_norm_eps) if config.norm == "pre" else None
        self.pooler = nn.Linear(H, H) if config.pooler else None
        init_weights(self, config)

    def layer(self, depth: int) -> tuple[Sublayer, Sublayer]:
        """The (attention, feed-forward) sublayers applied at `depth` — shared ones repeat."""
        return self.attention[depth % len(self.attention)], self.feed_forward[depth % len(self.feed_forward)]

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, needed=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> ModelOutput:
        """input ids [B, T] -> ModelOutput (last_hidden_state [B, T, H], pooler_output [B, H]).

        `needed` (optional, [B, T] bool): the positions whose final hidden state the caller
        will read, e.g. the labelled positions of a masked-LM loss. The last layer then runs
        there only (`last_layer_at`), and the result is `needed_hidden_state` (zero
        elsewhere; last_hidden_state is None). `output_hidden_states` / `output_attentions`
        return every layer's states / attention probabilities, as transformers does; looking
        inside runs the padded grid at every position, like the reference path.
        """
        batch, seq_len = input_ids.shape
        if seq_len > self.config.max_length:
            raise ValueError(
                f"sequence length {seq_len} exceeds the {self.config.max_length} positions this model has; "
                f"truncate inputs to {self.config.max_length} tokens"
            )
        # The textbook path: padded grid, every layer at every position (no speed tricks).
        textbook = self.config.reference or output_hidden_states or output_attentions
        sparse = needed is not None and not textbook  # the last layer at the needed positions only
        position_ids = self.config.position_offset + torch.arange(seq_len, device=input_ids.device).expand(batch, -1)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        has_padding = attention_mask is not None and not bool(attention_mask.bool().all())
        layout = key_mask = None
        if has_padding and not textbook and (self.config.unpad or self.config.attention_backend == "triton"):
            # Unpadding: gather the real tokens once; every layer then works on [tokens, H].
            layout = TokenLayout.from_mask(attention_mask)
            input_ids, position_ids, token_type_ids = map(layout.pack, (input_ids, position_ids, token_type_ids))
        elif has_padding:
            key_mask = attention_mask.bool()
            key_mask = key_mask | ~key_mask.any(dim=1, keepdim=True)  # an all-padding row sees itself

        x = self.embeddings(input_ids, position_ids, token_type_ids)  # [B, T, E], or [tokens, E] unpadded
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)  # E -> H
        rotary = self.rotary(position_ids) if self.rotary is not None else None  # the same angles at every depth
        attention_inputs = (layout, key_mask, rotary)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        depth = self.config.num_layers
        for i in range(depth - 1 if sparse else depth):
            attention, feed_forward = self.layer(i)
            if attentions is not None:
                attentions.append(attention.fn.probabilities(attention.branch_input(x), key_mask, rotary))
            x = feed_forward(attention(x, *attention_inputs))  # [B, T, H], or [tokens, H] unpadded
            if hidden_states is not None:
                hidden_states.append(x)
        if sparse:
            token_index, grid_index = self._needed_index(needed, layout)
            x = self.last_layer_at(token_index, x, *attention_inputs)  # [needed, H]
        if self.final_norm is not None:
            x = self.final_norm(x)

        if sparse:
            hidden, needed_hidden = None, scatter_rows(x, grid_index, batch, seq_len)  # [needed, H] -> [B, T, H], zeros elsewhere
        else:
            hidden = needed_hidden = x if layout is None else layout.unpack(x)  # [tokens, H] -> [B, T, H]
        pooled = torch.tanh(self.pooler(needed_hidden[:, 0])) if self.pooler is not None else None
        return ModelOutput(hidden, pooled, needed_hidden,
                           None if hidden_states is None else tuple(hidden_states),
                           None if attentions is None else tuple(attentions))

    def last_layer_at(self, token_index: torch.Tensor, x: torch.Tensor, *attention_inputs) -> torch.Tensor:
        """The last layer, computed for the tokens at `token_index` only: [tokens, H] -> [needed, H].

        Why: a loss often reads a few positions (the masked share for masked-LM, one for NSP), and the
        last layer's output anywhere else would be thrown away — for a 4-layer model that is
        about a sixth of the encoder's matmul FLOPs. Attention still reads every token (its
        keys and values); the output projection, the feed-forward and the LayerNorms run on
        the needed tokens alone. The same formulas as `Sublayer` and `SelfAttention`, only
        with the rows gathered before the output projection.
        """
        attention, feed_forward = self.layer(self.config.num_layers - 1)
        context = attention.fn.context(attention.branch_input(x), *attention_inputs)  # [tokens, H]: every token
        needed = gather_rows(context, token_index)  # [needed, H]
        x = attention.add(gather_rows(x, token_index), attention.fn.out(needed))
        return feed_forward(x)

    def _needed_index(self, needed: torch.Tensor, layout: TokenLayout | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The needed positions as indices: among the layers' tokens (packed, or the flattened
        grid) and in the flattened [B * T] grid. Position 0 is always needed with a pooler."""
        needed = needed.bool()
        if self.pooler is not None:  # the pooler reads position 0
            needed = needed.clone()
            needed[:, 0] = True
        if layout is None:
            grid_index = needed.flatten().nonzero().squeeze(1)
            return grid_index, grid_index
        token_index = layout.pack(needed).nonzero().squeeze(1)
        return token_index, layout.grid_index.index_select(0, token_index)


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


def compile_model(model: nn.Module) -> nn.Module:
    """Opt-in `torch.compile` of every residual sublayer, in place; returns the model.

    Compiling fuses the small memory-bound steps around the matmuls (bias, GELU, residual
    add, LayerNorm). Only the sublayers are compiled: building the `TokenLayout` reads the
    mask's values (data-dependent shapes), which would break a whole-model graph, while a
    sublayer compiles without a break. The number of real tokens changes from batch to
    batch, so shapes are dynamic. Not the default: the first step pays the compilation
    (about a minute on a 2-core CPU) and docs/throughput.md found no measurable gain there.
    """
    for module in model.modules():
        if isinstance(module, Sublayer):
            module.compile(dynamic=True)
    return model
