"""How a family's tables are read: `Family` turns names and configs in both directions.

families.py holds the tables themselves (one `Family` per reference family); this file holds
what every table shares: looking our parameter names up in a table, translating a config.json
into a ModelConfig and back, and saying why a family cannot hold a given model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ...config import ModelConfig
from ...model import ACTIVATIONS as MODULES
from ...operations.tensor_files import inside

Names = dict[str, str | tuple[str, ...]]

# Training settings, not shapes: a config.json without them gets ModelConfig's defaults.
OPTIONAL_FIELDS = ("hidden_dropout", "attention_dropout", "layer_norm_eps", "pad_token_id", "initializer_range")

# minibert activation -> HF name. ALBERT's "gelu_new" is GELU's tanh approximation.
ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}

# Buffers the reference recomputes from the config; some older checkpoints store them.
BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")

# A fine-tuned model's heads (finetune/checkpoint.py), which export writes as a family's task class
TASK_HEADS = ("classifier", "token_classifier", "span_extractor")
# The heads that are one Linear on every token's vector, as every family's task class holds them:
# tags, and an answer's start and end (transformers' qa_outputs: start and end its two outputs)
TOKEN_HEADS = ("token_classifier", "span_extractor")
HIDDEN_ACT = "hidden_act"  # a classification head applying the encoder's own activation (RoFormer's)


@dataclass(frozen=True)
class SequenceHead:
    """How a family's *ForSequenceClassification turns the first token into logits: with
    `activation` None, the backbone's pooler, then the Linear `out` (BERT, ALBERT); otherwise a
    Linear `dense`, the activation, then `out` (RoBERTa: tanh; ELECTRA: GELU; DistilBERT: ReLU;
    RoFormer: HIDDEN_ACT)."""

    activation: str | None = None
    dense: str = "classifier.dense"
    out: str = "classifier.out_proj"

    def activation_name(self, config: ModelConfig) -> str | None:
        """The activation between `dense` and `out` by name, for a model of `config` (None: no dense layer)."""
        return config.activation if self.activation == HIDDEN_ACT else self.activation

    def dense_activation(self, config: ModelConfig) -> nn.Module | None:
        """That activation as a module (None: no dense layer)."""
        name = self.activation_name(config)
        return None if name is None else nn.Tanh() if name == "tanh" else MODULES[name]

    @property
    def needs_pooler(self) -> bool:
        """Whether it holds minibert's head on a model with a pooler, Linear(tanh(dense(first))):
        a pooler and a Linear, or a dense layer, tanh and a Linear. Any other activation holds
        minibert's head on a model without one (task_heads.py)."""
        return self.activation in (None, "tanh")


@dataclass(frozen=True)
class Family:
    """One reference family: its config keys, its tensor names, and what it cannot vary."""

    model_type: str
    prefix: str  # the backbone's prefix inside task checkpoints ("bert." in BertForMaskedLM)
    config_keys: dict[str, str]
    backbone: Names
    heads: dict[str, Names]  # "mlm" / "rtd" -> table of our head's parameters
    architectures: dict[str | None, str]  # head -> the HF class that holds it
    sequence_head: SequenceHead = SequenceHead(out="classifier")
    fixed: dict[str, object] = field(default_factory=dict)  # value, or fn(ModelConfig fields)
    head_fixed: dict[str, dict[str, object]] = field(default_factory=dict)  # head -> fixed
    requires: dict[str, object] = field(default_factory=dict)  # config.json key -> only value
    share_key: str | None = None  # config.json key counting distinct layers (ALBERT's groups)
    always_projects: bool = False  # HF builds the E -> H projection even when E == H
    # Tensors of task checkpoints we tolerate without loading them:
    tied: tuple[str, ...] = ()  # decoder copies of the word embeddings (and of the MLM bias)
    other_heads: dict[str, str] = field(default_factory=dict)  # pretraining heads minibert does not load -> what they are
    # Tensors the reference stores but that follow from the config: written on export, not loaded.
    computed: dict[str, Callable[[ModelConfig], torch.Tensor]] = field(default_factory=dict)

    # --- tensor names ----------------------------------------------------------------------
    def reference_names(self, name: str, head: str | None, prefixed: bool) -> tuple[str, ...]:
        """Our parameter name (of an Encoder, or `encoder.*` / `head.*` of a task model)
        -> the checkpoint tensor(s) it is made of."""
        if name.startswith("head."):
            table = self.task_head_table(head) if head in TASK_HEADS else self.heads[head]
            return lookup(table, name.removeprefix("head."))
        prefix = self.prefix if prefixed else ""
        return tuple(prefix + reference for reference in lookup(self.backbone, name.removeprefix("encoder.")))

    def task_head_table(self, head: str) -> Names:
        """A fine-tuned head as export writes it (task_heads.py) -> the task class's modules: one
        Linear on every token (`classifier` of a token classifier, `qa_outputs` of a span
        extractor, whose head is that Linear itself), one Linear `classifier` on the pooler (BERT's
        and ALBERT's sequence classifier), or `dense` and `out_proj` on the first token."""
        if head == "span_extractor":
            return {"weight": "qa_outputs.weight", "bias": "qa_outputs.bias"}
        if head == "token_classifier":
            return {"classifier": "classifier"}
        if self.sequence_head.activation is None:
            return {"classifier": self.sequence_head.out}
        return {"dense": self.sequence_head.dense, "out_proj": self.sequence_head.out}

    def head_tensors(self, head: str) -> list[str]:
        """The reference modules / parameters of one head (prefixes of its tensor names)."""
        return flatten(self.heads[head].values())

    def held_heads(self, present: set[str]) -> list[str]:
        """The heads whose tensors are among `present` (a checkpoint's tensor names)."""
        return [h for h in self.heads if any(inside(n, t) for n in present for t in self.head_tensors(h))]

    def tolerated(self, head: str | None, prefixed: bool) -> tuple[str, ...]:
        """Module / tensor paths a checkpoint may hold although nothing is loaded from them."""
        prefix = self.prefix if prefixed else ""
        unrequested = [n for h in self.heads if h != head for n in self.head_tensors(h)]
        computed = (prefix + c for c in self.computed)
        return (*(prefix + b for b in BUFFERS), *computed, *self.tied, *self.other_heads, *unrequested)

    def computed_tensors(self, config: ModelConfig, prefixed: bool) -> dict[str, torch.Tensor]:
        prefix = self.prefix if prefixed else ""
        return {prefix + name: compute(config) for name, compute in self.computed.items()}

    # --- config ----------------------------------------------------------------------------
    def model_config(self, reference: dict, head: str | None, pooler: bool) -> ModelConfig:
        """config.json of this family -> ModelConfig (`pooler`: whether the checkpoint has one)."""
        for key, value in self.requires.items():
            if reference.get(key, value) != value:
                raise ValueError(
                    f"{key}={reference[key]!r} is not supported; minibert computes {self.model_type} with {key}={value!r}"
                )
        absent = [k for f, k in self.config_keys.items() if reference.get(k) is None and f not in OPTIONAL_FIELDS]
        if absent:
            raise ValueError(f"config.json lacks {', '.join(absent)}, which a {self.model_type} config must give")
        fields = {f: reference[k] for f, k in self.config_keys.items() if reference.get(k) is not None}
        fields["activation"] = from_reference_activation(fields["activation"])
        if fields.get("embedding_size") == fields["hidden_size"]:
            if self.always_projects:
                raise ValueError(
                    f"this {self.model_type} checkpoint projects its embeddings from size {fields['hidden_size']} "
                    f"to the same size; minibert has no projection when embedding_size == hidden_size"
                )
            fields["embedding_size"] = None
        if self.share_key is not None:
            groups = reference.get(self.share_key, 1)
            fields["share_layers"] = share_from_groups(groups, fields["num_layers"], self.share_key)
        if "embeddings.token_type_embeddings" not in self.backbone:
            fields["type_vocab_size"] = 0
        fields["pooler"] = pooler
        for name, value in self.fixed.items():
            fields[name] = value(fields) if callable(value) else value
        config = ModelConfig(**fields)
        reason = self.mismatch(config, head)
        if reason:
            raise ValueError(f"minibert cannot compute this {self.model_type} checkpoint exactly: {reason}")
        return config

    def reference_config(self, config: ModelConfig, head: str | None) -> dict:
        """ModelConfig -> config.json of this family (the config table read backwards)."""
        values = {k: getattr(config, f) for f, k in self.config_keys.items()}
        values[self.config_keys["activation"]] = ACTIVATIONS[config.activation]
        if "embedding_size" in self.config_keys:
            values["embedding_size"] = config.embedding_size or config.hidden_size
        if self.share_key is not None:
            values[self.share_key] = 1 if config.share_layers == "all" else config.num_layers
        return {
            "model_type": self.model_type,
            "architectures": [self.architectures[head]],
            **self.requires,
            **values,
            "tie_word_embeddings": True,
        }

    def mismatch(self, config: ModelConfig, head: str | None) -> str | None:
        """Why this family's checkpoints cannot hold `config` exactly, or None if they can."""
        name = self.model_type
        if head is not None and head not in self.heads and head not in TASK_HEADS:
            return f"{name} has no {head!r} head"
        if config.pooler and "pooler" not in self.backbone:
            return f"pooler=True, but {name} has no pooler"
        if config.embedding_size is not None and "embedding_projection" not in self.backbone:
            return f"embedding_size={config.embedding_size}, but {name} has no embedding projection"
        if config.embedding_size is None and self.always_projects:
            return f"embedding_size=None, but {name} always projects its embeddings (embedding_size != hidden_size)"
        has_segments = "embeddings.token_type_embeddings" in self.backbone
        if has_segments != (config.type_vocab_size > 0):
            has = "has" if has_segments else "has no"
            return f"type_vocab_size={config.type_vocab_size}, but {name} {has} segment embeddings"
        if self.share_key is None and config.share_layers != "none":
            return f"share_layers={config.share_layers!r}, but {name} does not share layers"
        if head == "classifier" and config.pooler != self.sequence_head.needs_pooler:
            if config.pooler:
                return f"{self.architectures[head]} reads the first token through {self.sequence_head.activation_name(config)}, not a pooler's tanh"
            return f"{self.architectures[head]} reads a pooler (tanh of a dense layer), and this model has none"
        fields = config.to_dict()
        for field_name, value in {**self.fixed, **self.head_fixed.get(head, {})}.items():
            expected = value(fields) if callable(value) else value
            if fields[field_name] != expected:
                return f"{field_name}={fields[field_name]!r}, but {name} needs {field_name}={expected!r}"
        return None


def lookup(table: Names, name: str) -> tuple[str, ...]:
    """Find our parameter `name` in a table keyed by module paths (or full names) with `{i}`."""
    index = None
    match = re.fullmatch(r"(attention|feed_forward)\.(\d+)\.(.+)", name)
    if match:
        index, name = match[2], f"{match[1]}.{{i}}.{match[3]}"
    module, _, leaf = name.rpartition(".")
    if name in table:
        targets, suffix = table[name], ""
    elif module in table:
        targets, suffix = table[module], "." + leaf
    else:
        raise KeyError(name)
    targets = (targets,) if isinstance(targets, str) else targets
    return tuple(t.replace("{i}", str(index)) + suffix for t in targets)


def flatten(values) -> list[str]:
    return [n for v in values for n in ((v,) if isinstance(v, str) else v)]


def from_reference_activation(name: str) -> str:
    ours = {v: k for k, v in ACTIVATIONS.items()}
    if name not in ours:
        raise ValueError(f"activation {name!r} has no minibert equivalent; supported: {', '.join(ours)}")
    return ours[name]


def share_from_groups(groups: int, num_layers: int, key: str) -> str:
    """ALBERT's layer groups: 1 group = every layer shares one; one group per layer = no sharing."""
    if groups == 1:
        return "all"
    if groups == num_layers:
        return "none"
    raise ValueError(
        f"{key}={groups} with {num_layers} layers is not supported: minibert shares all layers "
        f"({key}=1) or none ({key}={num_layers})"
    )
