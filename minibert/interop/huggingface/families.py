"""The reference families as tables: our names on the left, Hugging Face's on the right.

The five BERT-family checkpoints learn absolute positions; RoFormer is BERT with rotary
positions (RoPE) instead, so it is where minibert's rotary models go (and come back from).

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

import torch

from ...attention import Rotary
from ...config import ModelConfig
from .family import HIDDEN_ACT, Family, Names, SequenceHead

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

# The five BERT families add a learned vector per absolute position.
LEARNED = {"position_encoding": "learned"}

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
BERT_MLM = {"transform": "cls.predictions.transform.dense", "norm": "cls.predictions.transform.LayerNorm",
            "bias": "cls.predictions.bias"}
BERT_TIED = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")  # copies of the embeddings and bias


def family(stem: str, **tables) -> Family:
    """A family named as transformers names it: model_type `stem` in lower case, the backbone under
    `<model_type>.` inside task checkpoints, the bare model `<stem>Model`, the masked LM
    `<stem>ForMaskedLM`, the fine-tuned classifiers `<stem>For{Sequence,Token}Classification` and
    span extractor `<stem>ForQuestionAnswering` (`architectures` adds another head's class)."""
    model_type = stem.lower()
    architectures = {None: f"{stem}Model", "mlm": f"{stem}ForMaskedLM", "classifier": f"{stem}ForSequenceClassification",
                     "token_classifier": f"{stem}ForTokenClassification", "span_extractor": f"{stem}ForQuestionAnswering",
                     **tables.pop("architectures", {})}
    return Family(model_type=model_type, prefix=f"{model_type}.", architectures=architectures, **tables)


BERT = family(
    "Bert",
    config_keys=BERT_CONFIG,
    backbone={**BERT_EMBEDDINGS, **BERT_LAYERS, "pooler": "pooler.dense"},
    heads={"mlm": BERT_MLM},
    fixed={**LEARNED, "position_offset": 0},
    requires=BERT_REQUIRES,
    tied=BERT_TIED,
    other_heads={"cls.seq_relationship": "next-sentence prediction (NSP)"},
)

ROBERTA = family(
    "Roberta",
    config_keys=BERT_CONFIG,
    backbone={**BERT_EMBEDDINGS, **BERT_LAYERS, "pooler": "pooler.dense"},
    heads={"mlm": {"transform": "lm_head.dense", "norm": "lm_head.layer_norm", "bias": "lm_head.bias"}},
    # Position ids count from pad_token_id + 1 (fairseq's convention), hence 514 positions.
    fixed={**LEARNED, "position_offset": lambda fields: fields.get("pad_token_id", 0) + 1},
    sequence_head=SequenceHead("tanh"),  # RobertaClassificationHead: a pooler of its own
    head_fixed={"mlm": {"activation": "gelu"}},  # RoBERTa's LM head applies GELU whatever hidden_act says
    requires=BERT_REQUIRES,
    tied=("lm_head.decoder.weight", "lm_head.decoder.bias"),
)

ALBERT = family(
    "Albert",
    config_keys=FACTORIZED_CONFIG,
    backbone={**BERT_EMBEDDINGS, **ALBERT_LAYERS, "pooler": "pooler"},
    heads={"mlm": {"transform": "predictions.dense", "norm": "predictions.LayerNorm", "bias": "predictions.bias"}},
    fixed={**LEARNED, "position_offset": 0},
    requires={"inner_group_num": 1},
    share_key="num_hidden_groups",
    always_projects=True,
    tied=("predictions.decoder.weight", "predictions.decoder.bias"),
    other_heads={"sop_classifier": "sentence-order prediction (SOP)"},
)

DISTILBERT = family(
    "DistilBert",
    config_keys=DISTILBERT_CONFIG,
    backbone=DISTILBERT_TENSORS,
    heads={"mlm": {"transform": "vocab_transform", "norm": "vocab_layer_norm", "bias": "vocab_projector.bias"}},
    fixed={**LEARNED, "position_offset": 0, "layer_norm_eps": 1e-12},  # DistilBERT hard-codes its LayerNorm eps
    requires={"sinusoidal_pos_embds": False},
    sequence_head=SequenceHead("relu", dense="pre_classifier", out="classifier"),
    tied=("vocab_projector.weight",),
)

ELECTRA = family(
    "Electra",
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
    architectures={"rtd": "ElectraForPreTraining"},
    sequence_head=SequenceHead("gelu"),  # ElectraClassificationHead applies GELU whatever hidden_act says
    fixed={**LEARNED, "position_offset": 0},
    head_fixed={"mlm": {"activation": "gelu"}},  # the generator head applies GELU whatever hidden_act says
    requires=BERT_REQUIRES,
    tied=("generator_lm_head.weight",),
)


def rotation_table(config: ModelConfig) -> torch.Tensor:
    """RoFormer's stored angles, [max_positions, head_dim]: the sines of each pair's angle, then
    the cosines (attention.Rotary repeats each pair's angle twice; one of each is kept)."""
    cos, sin = Rotary(config.head_dim)(torch.arange(config.max_positions))  # each [P, 1, 1, head_dim]
    return torch.cat((sin[:, 0, 0, 0::2], cos[:, 0, 0, 0::2]), dim=-1)


# RoFormer is BERT without the position table: its attention rotates queries and keys in pairs
# (2i, 2i + 1) at frequencies 10000^(-2i/d), as attention.Rotary does. Its checkpoints store
# those angles (max_position_embeddings rows: the longest sequence it takes); export writes them.
# RoFormerModel has no pooler; ours (BERT's, trained by NSP) travels under `pooler.dense`, which
# transformers reports unused, so that the round trip loses nothing.
ROFORMER = family(
    "RoFormer",
    config_keys=FACTORIZED_CONFIG,
    backbone={
        **{ours: theirs for ours, theirs in BERT_EMBEDDINGS.items() if ours != "embeddings.position_embeddings"},
        "embedding_projection": "embeddings_project",
        **BERT_LAYERS,
        "pooler": "pooler.dense",
    },
    heads={"mlm": BERT_MLM},
    # No position_offset: rotary attention sees only offsets between positions, so a model
    # whose positions start at 1 (RoBERTa's) computes the same function from 0.
    fixed={"position_encoding": "rotary"},
    sequence_head=SequenceHead(HIDDEN_ACT),
    requires={"rotary_value": False, "is_decoder": False, "add_cross_attention": False},
    tied=BERT_TIED,
    computed={"encoder.embed_positions.weight": rotation_table},
)

FAMILIES = {f.model_type: f for f in (BERT, ROBERTA, ALBERT, DISTILBERT, ELECTRA, ROFORMER)}
# Export picks the first family that holds a model exactly, in this order: the plainest first.
EXPORT_ORDER = (BERT, ROBERTA, ELECTRA, ALBERT, DISTILBERT, ROFORMER)
