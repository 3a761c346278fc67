"""The five reference families as tables: our names on the left, Hugging Face's on the right.

Our encoder names its parts after what they are (`attention.{i}.fn.qkv`, `feed_forward.{i}.norm`);
each reference family names them after its own classes (`encoder.layer.{i}.attention.self.query`,
`transformer.layer.{i}.sa_layer_norm`, ...). Loading reads a table left to right, exporting
reads the same table right to left, so the two can never disagree.

How to read a tensor table:
- a key is one of our module paths (its `.weight` / `.bias` follow) or a full parameter name;
- `{i}` is the index of one of our sublayer modules. With ALBERT's sharing there is one module
  for all depths, and HF calls it layer *group* 0 — so one table serves shared and unshared ALBERT;
- a tuple means our one tensor is their several tensors stacked along the rows: our fused qkv
  projection holds their separate query, key and value weights, in that order.

How to read a config table: ModelConfig field -> config.json key. What a family cannot vary is
in `fixed` (set on load, checked on export); what a family's *shape* allows follows from its
tensor table: no "pooler" entry = no pooler, no "embedding_projection" entry = no factorized
embeddings, no "embeddings.token_type_embeddings" entry = no segments (type_vocab_size 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import ModelConfig

Names = dict[str, str | tuple[str, ...]]

# --- config.json ------------------------------------------------------------------------------

BERT_CONFIG = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "intermediate_size": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "activation": "hidden_act",
    "hidden_dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "layer_norm_eps": "layer_norm_eps",
    "pad_token_id": "pad_token_id",
    "initializer_range": "initializer_range",
}
FACTORIZED_CONFIG = {**BERT_CONFIG, "embedding_size": "embedding_size"}
DISTILBERT_CONFIG = {
    "vocab_size": "vocab_size",
    "hidden_size": "dim",
    "num_layers": "n_layers",
    "num_heads": "n_heads",
    "intermediate_size": "hidden_dim",
    "max_positions": "max_position_embeddings",
    "activation": "activation",
    "hidden_dropout": "dropout",
    "attention_dropout": "attention_dropout",
    "pad_token_id": "pad_token_id",
    "initializer_range": "initializer_range",
}
# Training settings, not shapes: a config.json without them gets ModelConfig's defaults.
OPTIONAL_FIELDS = ("hidden_dropout", "attention_dropout", "layer_norm_eps", "pad_token_id", "initializer_range")

# minibert activation -> HF name. ALBERT's "gelu_new" is GELU's tanh approximation.
ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}

# config.json values a BERT-style checkpoint must have for minibert to compute the same function.
BERT_REQUIRES = {"position_embedding_type": "absolute", "is_decoder": False, "add_cross_attention": False}

# --- tensors ----------------------------------------------------------------------------------

BERT_EMBEDDINGS = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
}
BERT_LAYERS = {
    "attention.{i}.fn.qkv": (
        "encoder.layer.{i}.attention.self.query",
        "encoder.layer.{i}.attention.self.key",
        "encoder.layer.{i}.attention.self.value",
    ),
    "attention.{i}.fn.out": "encoder.layer.{i}.attention.output.dense",
    "attention.{i}.norm": "encoder.layer.{i}.attention.output.LayerNorm",
    "feed_forward.{i}.fn.up": "encoder.layer.{i}.intermediate.dense",
    "feed_forward.{i}.fn.down": "encoder.layer.{i}.output.dense",
    "feed_forward.{i}.norm": "encoder.layer.{i}.output.LayerNorm",
}
ALBERT_LAYERS = {
    "embedding_projection": "encoder.embedding_hidden_mapping_in",
    "attention.{i}.fn.qkv": (
        "encoder.albert_layer_groups.{i}.albert_layers.0.attention.query",
        "encoder.albert_layer_groups.{i}.albert_layers.0.attention.key",
        "encoder.albert_layer_groups.{i}.albert_layers.0.attention.value",
    ),
    "attention.{i}.fn.out": "encoder.albert_layer_groups.{i}.albert_layers.0.attention.dense",
    "attention.{i}.norm": "encoder.albert_layer_groups.{i}.albert_layers.0.attention.LayerNorm",
    "feed_forward.{i}.fn.up": "encoder.albert_layer_groups.{i}.albert_layers.0.ffn",
    "feed_forward.{i}.fn.down": "encoder.albert_layer_groups.{i}.albert_layers.0.ffn_output",
    "feed_forward.{i}.norm": "encoder.albert_layer_groups.{i}.albert_layers.0.full_layer_layer_norm",
}
DISTILBERT_TENSORS = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
    "attention.{i}.fn.qkv": (
        "transformer.layer.{i}.attention.q_lin",
        "transformer.layer.{i}.attention.k_lin",
        "transformer.layer.{i}.attention.v_lin",
    ),
    "attention.{i}.fn.out": "transformer.layer.{i}.attention.out_lin",
    "attention.{i}.norm": "transformer.layer.{i}.sa_layer_norm",
    "feed_forward.{i}.fn.up": "transformer.layer.{i}.ffn.lin1",
    "feed_forward.{i}.fn.down": "transformer.layer.{i}.ffn.lin2",
    "feed_forward.{i}.norm": "transformer.layer.{i}.output_layer_norm",
}

# Buffers the reference recomputes from the config; some older checkpoints store them.
BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
# Checkpoints converted from TensorFlow name LayerNorm parameters gamma/beta.
LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}


@dataclass(frozen=True)
class Family:
    """One reference family: its config keys, its tensor names, and what it cannot vary."""

    model_type: str
    prefix: str  # the backbone's prefix inside task checkpoints ("bert." in BertForMaskedLM)
    config_keys: dict[str, str]
    backbone: Names
    heads: dict[str, Names]  # "mlm" / "rtd" -> table of our head's parameters
    architectures: dict[str | None, str]  # head -> the HF class that holds it
    fixed: dict[str, object] = field(default_factory=dict)  # value, or fn(ModelConfig fields)
    head_fixed: dict[str, dict[str, object]] = field(default_factory=dict)  # head -> fixed
    requires: dict[str, object] = field(default_factory=dict)  # config.json key -> only value
    share_key: str | None = None  # config.json key counting distinct layers (ALBERT's groups)
    always_projects: bool = False  # HF builds the E -> H projection even when E == H
    # Tensors of task checkpoints we tolerate without loading them:
    tied: tuple[str, ...] = ()  # decoder copies of the word embeddings (and of the MLM bias)
    other_heads: tuple[str, ...] = ()  # pretraining heads minibert does not load

    # --- tensor names ----------------------------------------------------------------------
    def reference_names(self, name: str, head: str | None, prefixed: bool) -> tuple[str, ...]:
        """Our parameter name (of an Encoder, or `encoder.*` / `head.*` of a task model)
        -> the checkpoint tensor(s) it is made of."""
        if name.startswith("head."):
            return lookup(self.heads[head], name.removeprefix("head."))
        prefix = self.prefix if prefixed else ""
        return tuple(prefix + reference for reference in lookup(self.backbone, name.removeprefix("encoder.")))

    def head_tensors(self, head: str) -> list[str]:
        """The reference modules / parameters of one head (prefixes of its tensor names)."""
        return flatten(self.heads[head].values())

    def tolerated(self, head: str | None, prefixed: bool) -> tuple[str, ...]:
        """Module / tensor paths a checkpoint may hold although nothing is loaded from them."""
        prefix = self.prefix if prefixed else ""
        unrequested = [n for h in self.heads if h != head for n in self.head_tensors(h)]
        return (*(prefix + b for b in BUFFERS), *self.tied, *self.other_heads, *unrequested)

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
            values["embedding_size"] = config.embedding_dim
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
        if head is not None and head not in self.heads:
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


def inside(name: str, path: str) -> bool:
    """Is tensor `name` the module or parameter `path`, or inside it?"""
    return name == path or name.startswith(path + ".")


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


BERT = Family(
    model_type="bert",
    prefix="bert.",
    config_keys=BERT_CONFIG,
    backbone={**BERT_EMBEDDINGS, **BERT_LAYERS, "pooler": "pooler.dense"},
    heads={"mlm": {
        "transform": "cls.predictions.transform.dense",
        "norm": "cls.predictions.transform.LayerNorm",
        "bias": "cls.predictions.bias",
    }},
    architectures={None: "BertModel", "mlm": "BertForMaskedLM"},
    fixed={"position_offset": 0},
    requires=BERT_REQUIRES,
    tied=("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"),
    other_heads=("cls.seq_relationship",),  # next-sentence prediction
)

ROBERTA = Family(
    model_type="roberta",
    prefix="roberta.",
    config_keys=BERT_CONFIG,
    backbone={**BERT_EMBEDDINGS, **BERT_LAYERS, "pooler": "pooler.dense"},
    heads={"mlm": {"transform": "lm_head.dense", "norm": "lm_head.layer_norm", "bias": "lm_head.bias"}},
    architectures={None: "RobertaModel", "mlm": "RobertaForMaskedLM"},
    # Position ids count from pad_token_id + 1 (fairseq's convention), hence 514 positions.
    fixed={"position_offset": lambda fields: fields.get("pad_token_id", 0) + 1},
    head_fixed={"mlm": {"activation": "gelu"}},  # RoBERTa's LM head applies GELU whatever hidden_act says
    requires=BERT_REQUIRES,
    tied=("lm_head.decoder.weight", "lm_head.decoder.bias"),
)

ALBERT = Family(
    model_type="albert",
    prefix="albert.",
    config_keys=FACTORIZED_CONFIG,
    backbone={**BERT_EMBEDDINGS, **ALBERT_LAYERS, "pooler": "pooler"},
    heads={"mlm": {"transform": "predictions.dense", "norm": "predictions.LayerNorm", "bias": "predictions.bias"}},
    architectures={None: "AlbertModel", "mlm": "AlbertForMaskedLM"},
    fixed={"position_offset": 0},
    requires={"inner_group_num": 1},
    share_key="num_hidden_groups",
    always_projects=True,
    tied=("predictions.decoder.weight", "predictions.decoder.bias"),
    other_heads=("sop_classifier",),  # sentence-order prediction
)

DISTILBERT = Family(
    model_type="distilbert",
    prefix="distilbert.",
    config_keys=DISTILBERT_CONFIG,
    backbone=DISTILBERT_TENSORS,
    heads={"mlm": {"transform": "vocab_transform", "norm": "vocab_layer_norm", "bias": "vocab_projector.bias"}},
    architectures={None: "DistilBertModel", "mlm": "DistilBertForMaskedLM"},
    fixed={"position_offset": 0, "layer_norm_eps": 1e-12},  # DistilBERT hard-codes its LayerNorm eps
    requires={"sinusoidal_pos_embds": False},
    tied=("vocab_projector.weight",),
)

ELECTRA = Family(
    model_type="electra",
    prefix="electra.",
    config_keys=FACTORIZED_CONFIG,
    backbone={**BERT_EMBEDDINGS, **BERT_LAYERS, "embedding_projection": "embeddings_project"},
    heads={
        "mlm": {  # the generator
            "transform": "generator_predictions.dense",
            "norm": "generator_predictions.LayerNorm",
            "bias": "generator_lm_head.bias",
        },
        "rtd": {  # the discriminator
            "dense": "discriminator_predictions.dense",
            "prediction": "discriminator_predictions.dense_prediction",
        },
    },
    architectures={None: "ElectraModel", "mlm": "ElectraForMaskedLM", "rtd": "ElectraForPreTraining"},
    fixed={"position_offset": 0},
    head_fixed={"mlm": {"activation": "gelu"}},  # the generator head applies GELU whatever hidden_act says
    requires=BERT_REQUIRES,
    tied=("generator_lm_head.weight",),
)

FAMILIES = {f.model_type: f for f in (BERT, ROBERTA, ALBERT, DISTILBERT, ELECTRA)}
# Export picks the first family that holds a model exactly, in this order: the plainest first.
EXPORT_ORDER = (BERT, ROBERTA, ELECTRA, ALBERT, DISTILBERT)
