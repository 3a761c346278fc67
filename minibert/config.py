"""ModelConfig: every architectural choice of the BERT family, as one validated dataclass.

The five families differ in a handful of switches, not in code:

    BERT        post-LN, learned positions, 2 segment types, pooler
    RoBERTa     BERT's shape; one segment type, positions start after the pad id
    ALBERT      embedding_size 128 < hidden_size (factorized) and share_layers="all"
    DistilBERT  6 layers, no segment embeddings, no pooler
    ELECTRA     embedding_size ≠ hidden_size for the small model and the generators, no pooler

`ModelConfig.preset(name)` returns the published sizes; their parameter counts equal the
reference backbones exactly (see tests/test_config.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

SHARE_CHOICES = ("none", "all", "attention", "ffn")
NORM_CHOICES = ("post", "pre")
ACTIVATION_CHOICES = ("gelu", "gelu_tanh", "relu", "silu")
ATTENTION_CHOICES = ("auto", "naive", "sdpa", "triton")
POSITION_CHOICES = ("learned", "rotary")


@dataclass
class ModelConfig:
    """The architecture. Each field below is also a `python train.py` flag (--field-name)."""

    # Rows of the word-embedding table (and columns of the tied MLM decoder): the tokenizer's size.
    vocab_size: int = 30522
    # H: the width of every layer's input and output.
    hidden_size: int = 768
    # Depth: how many (attention, feed-forward) layers are applied, shared or not.
    num_layers: int = 12
    # Attention heads; each attends with hidden_size / num_heads dimensions.
    num_heads: int = 12
    # The feed-forward sublayer's inner width (4·H in all five families).
    intermediate_size: int = 3072
    # E: the width of the embedding tables. None means "same as hidden_size" (the code reads
    # `embedding_size or hidden_size`). Otherwise tokens live in an E-wide table and one Linear
    # maps them to H, whichever is larger. Smaller = factorized embeddings (ALBERT,
    # ELECTRA-small): only E < H saves parameters (V·E + E·H instead of V·H), which is ALBERT's
    # argument. Larger is ELECTRA's base and large generators (E = 768 or 1024, H = 256): they
    # share the discriminator's wide embedding table and project it down to their narrow width.
    embedding_size: int | None = None
    # Cross-layer parameter sharing (ALBERT): which sublayers one copy serves at every depth
    # ("none", "all", "attention" or "ffn"); see model.build_layers.
    share_layers: str = "none"
    # Rows of the position table: the longest sequence plus position_offset.
    max_positions: int = 512
    # How a token knows where it is: "learned" = a table of absolute position vectors added to
    # the embeddings (all five families); "rotary" = RoPE, queries and keys rotated by their
    # position so attention scores depend on relative offsets (attention.Rotary).
    position_encoding: str = "learned"
    # Number of segment (token type) embeddings; 0 = none (DistilBERT).
    type_vocab_size: int = 2
    # Position ids start at this value (RoBERTa: pad_token_id + 1 = 2, so 514 positions).
    position_offset: int = 0
    # Where each sublayer's LayerNorm sits: "post" (BERT: after the residual add) or "pre"
    # (before the branch, plus one final LayerNorm); see model.Sublayer.
    norm: str = "post"
    # The feed-forward nonlinearity: "gelu" (BERT), "gelu_tanh" (ALBERT's approximation), "relu", "silu".
    activation: str = "gelu"
    # Dropout on the embeddings and on every sublayer's output (BERT: 0.1; ALBERT: 0).
    hidden_dropout: float = 0.1
    # Dropout on the attention probabilities.
    attention_dropout: float = 0.1
    # LayerNorm's epsilon (BERT 1e-12, RoBERTa 1e-5).
    layer_norm_eps: float = 1e-12
    # The id of [PAD]: the tokenizer's, so that padding is recognised.
    pad_token_id: int = 0
    # A tanh(Linear) of the first token's state, read by NSP/SOP and the classifier (BERT,
    # RoBERTa, ALBERT); without it they read the first token's state itself (ELECTRA, DistilBERT).
    pooler: bool = True
    # Which code computes attention (attention.py): "naive" (readable), "sdpa" (torch's fused
    # kernel), "triton" (our FlashAttention on packed tokens) or "auto" (= sdpa). A run-time
    # choice: the weights are the same for all of them.
    attention_backend: str = "auto"
    # Run the layers on the real tokens only (gathered once by the attention mask, kernels/unpad.py),
    # for a batch whose padding share is at least Encoder.UNPAD_FROM; the Triton kernel always does.
    unpad: bool = True
    # The reference path, to read and debug with (`--reference`): padded batches, the naive
    # attention (scores, mask, softmax, dropout, weighted sum), every layer at every position
    # and a plain F.cross_entropy over the masked positions. Same weights and the same loss
    # and gradients as the fast path (tests/test_reference.py); what the fast path saves:
    # docs/speed.md. Off, the fast path: SDPA, the last layer only where a loss reads,
    # the fused vocabulary loss, and unpadding from Encoder.UNPAD_FROM padding on.
    reference: bool = False
    # Standard deviation of the initial weights (BERT: N(0, 0.02)).
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        def positive(name: str) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")

        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "max_positions"):
            positive(name)
        if self.embedding_size is not None:
            positive("embedding_size")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"ModelConfig.hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})"
            )
        if self.position_encoding == "rotary" and self.head_dim % 2:
            raise ValueError(
                f"ModelConfig.position_encoding 'rotary' rotates pairs of dimensions, but the head size "
                f"{self.head_dim} (hidden_size / num_heads) is odd; change num_heads or hidden_size"
            )
        for name, choices in (
            ("share_layers", SHARE_CHOICES),
            ("norm", NORM_CHOICES),
            ("activation", ACTIVATION_CHOICES),
            ("attention_backend", ATTENTION_CHOICES),
            ("position_encoding", POSITION_CHOICES),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"ModelConfig.{name} must be one of {', '.join(choices)}; got {getattr(self, name)!r}")
        for name in ("type_vocab_size", "position_offset"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ModelConfig.{name} must be a non-negative integer, got {value!r}")
        if self.position_offset >= self.max_positions:
            raise ValueError(
                f"ModelConfig.position_offset ({self.position_offset}) must be smaller than max_positions ({self.max_positions})"
            )
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"ModelConfig.{name} must be in [0, 1), got {value!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"ModelConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"ModelConfig.pad_token_id ({self.pad_token_id}) must be a valid id below vocab_size ({self.vocab_size})"
            )

    # -- derived sizes ------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def max_length(self) -> int:
        """The longest sequence the position table can describe."""
        return self.max_positions - self.position_offset

    # -- construction -------------------------------------------------------------
    def for_length(self, length: int) -> "ModelConfig | None":
        """This config, able to read `length`-token sequences; None where it cannot.

        Rotary positions have no table (the angles are computed for any position), so their
        max_positions simply grows to fit; a learned position table cannot grow."""
        if length <= self.max_length:
            return self
        if self.position_encoding == "rotary":
            return self.replace(max_positions=length + self.position_offset)
        return None

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(known))}")
        return cls(**values)

    @classmethod
    def preset(cls, name: str, **overrides) -> "ModelConfig":
        """The published architecture called `name`, optionally with some fields changed."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


_ALBERT = dict(
    vocab_size=30000, embedding_size=128, share_layers="all", activation="gelu_tanh",
    hidden_dropout=0.0, attention_dropout=0.0,
)
_ELECTRA = dict(pooler=False)

# Published backbones (Hugging Face configs of the original checkpoints).
PRESETS: dict[str, dict] = {
    "bert-base": dict(),
    "bert-large": dict(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
    "roberta-base": dict(
        vocab_size=50265, max_positions=514, type_vocab_size=1, pad_token_id=1, position_offset=2,
        layer_norm_eps=1e-5,
    ),
    "albert-base": dict(_ALBERT),
    "albert-large": dict(_ALBERT, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
    "albert-xlarge": dict(_ALBERT, hidden_size=2048, num_layers=24, num_heads=16, intermediate_size=8192),
    "distilbert-base": dict(num_layers=6, type_vocab_size=0, pooler=False),
    "electra-small": dict(_ELECTRA, embedding_size=128, hidden_size=256, num_heads=4, intermediate_size=1024),
    "electra-base": dict(_ELECTRA),
}
