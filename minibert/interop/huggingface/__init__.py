"""Hugging Face checkpoints of the five families (and RoFormer, BERT with rotary positions),
read and written as a translation of minibert's own format.

    model = minibert.from_pretrained("bert-base-uncased/", head="mlm")
    minibert.save_pretrained(model, "exported/", format="hf")

`minibert.from_pretrained` and `save_pretrained` (minibert/pretrained.py) read and write our
own format; this package registers Hugging Face's layout with them as the translation "hf". A
Hugging Face config.json names its family in `model_type`, and the family's tables
(families.py) translate its config and tensor names to ours; the same loader then builds a
fresh model from the config and copies every tensor by name. A model no family holds exactly
is written as transformers' custom code instead (custom_code.py): `model_type` "minibert", the
folder carrying minibert's own source.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ...config import ModelConfig
from ...operations.files import write_json
from ...operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, TensorFile, inside, read_json, save_tensors
from ...pretrained import HEAD_NAMES, TRANSLATIONS, CheckpointPlan, MissingHead, Translation, from_pretrained, save_pretrained
from ...tokenizers import SentencePieceTokenizer
from ..tokenizers.json_export import CONFIG_FILE as TOKENIZER_CONFIG_FILE, hugging_face_files
from .classifiers import reference_classifier
from .custom_code import MODEL_TYPE as CUSTOM_CODE, custom_plan, save_custom_code
from .families import EXPORT_ORDER, FAMILIES, ROFORMER
from .family import TASK_HEADS, Family
from .task_heads import label_fields

def reference_plan(stored: dict, head: str | None, tensors: TensorFile) -> CheckpointPlan:
    """A Hugging Face checkpoint: the family's tables name every tensor."""
    present = tensors.names()
    model_type = stored.get("model_type")
    if model_type == CUSTOM_CODE:
        return custom_plan(stored, head, tensors)
    if model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r} is not supported; minibert loads {', '.join([*FAMILIES, CUSTOM_CODE])}")
    family = FAMILIES[model_type]
    if head is not None and head not in family.heads:
        raise MissingHead(f"{model_type} checkpoints have no {head!r} head; choose head=None or {', '.join(family.heads)}")
    prefixed = any(name.startswith(family.prefix) for name in present)
    if head is not None:
        head_tensors = family.head_tensors(head)
        if not any(inside(n, t) for n in present for t in head_tensors):
            kind = ", ".join(stored.get("architectures") or [model_type])
            raise MissingHead(
                f"this {kind} checkpoint has no {HEAD_NAMES[head]} ({', '.join(head_tensors)}); load it with head=None"
            )
        if head == "mlm" and stored.get("tie_word_embeddings", True) is not True:
            raise ValueError("tie_word_embeddings is false, but minibert's MLM decoder is always the word-embedding table")
    pooler = "pooler" in family.backbone and family.reference_names("pooler.weight", head, prefixed)[0] in present
    config = family.model_config(stored, head, pooler)
    for name, expected in family.computed_tensors(config, prefixed).items():
        if name in present and not torch.allclose(tensors.take(name).float(), expected, rtol=0, atol=1e-4):
            raise ValueError(f"tensor {name!r} is not the one its config implies, so minibert cannot compute this checkpoint exactly")
    return config, lambda ours: family.reference_names(ours, head, prefixed), family.tolerated(head, prefixed)


def save_hf(model: nn.Module, directory: Path, head: str | None, tokenizer, family: str | None,
            labels: list | None = None) -> None:
    """`save_pretrained(format="hf")`: a Hugging Face directory of the first family whose
    checkpoints hold the model exactly, or of `family`; with family="minibert" transformers'
    custom code (custom_code.py: any model); a fine-tuned classifier with its `labels`. A
    SentencePiece tokenizer is also written as tokenizer.json & co., which
    `transformers.AutoTokenizer` loads (a WordPiece vocab.txt is already Hugging Face's format)."""
    chosen = None if family == CUSTOM_CODE else export_family(model.config, head, family)
    # built first, so that a tokenizer they cannot describe is refused before anything is written
    tokenizer_files = hugging_face_files(tokenizer.model_proto) if isinstance(tokenizer, SentencePieceTokenizer) else {}
    if chosen is None:
        save_custom_code(model, directory, head, labels)
    else:
        stored_config = chosen.reference_config(model.config, head)
        if head in TASK_HEADS:  # a fine-tuned model (written by export, in its family's layout: task_heads.py)
            stored_config.update(label_fields(model, labels))
        names = export_names(chosen, model, head)
        computed = chosen.computed_tensors(model.config, prefixed=head is not None)
        directory.mkdir(parents=True, exist_ok=True)
        save_tensors(model, names, directory / SAFETENSORS_FILE, computed)
        write_json(directory / CONFIG_FILE, stored_config)
    if tokenizer is not None:
        tokenizer.save(directory)
        for name, value in tokenizer_files.items():
            write_json(directory / name, value)
        describe_inputs(directory / TOKENIZER_CONFIG_FILE, model.config)


def export_names(family: Family, model: nn.Module, head: str | None) -> dict[str, tuple[str, ...]]:
    """Our parameter -> the tensor(s) `format="hf"` writes it as in `family` (a task model's
    backbone under the family's prefix, as transformers' task classes name it)."""
    return {ours: family.reference_names(ours, head, prefixed=head is not None) for ours in model.state_dict()}


def describe_inputs(path: Path, config: ModelConfig) -> None:
    """Tell the exported tokenizer what the model takes: no token_type_ids for a family without
    segment embeddings (DistilBERT's forward refuses them) nor for a model with one segment type
    (RoBERTa's: a pair's second segment, numbered 1, would index past its table), and at most
    max_length tokens."""
    tokenizer_config = read_json(path) if path.is_file() else {}
    segments = ["token_type_ids"] if config.type_vocab_size > 1 else []
    tokenizer_config["model_input_names"] = ["input_ids", *segments, "attention_mask"]
    tokenizer_config["model_max_length"] = config.max_length
    write_json(path, tokenizer_config)


# What a model no built-in family holds can be saved as instead
ELSEWHERE = f"save with family='{CUSTOM_CODE}' (transformers' custom code, for any model) or format='minibert'"


def export_family(config: ModelConfig, head: str | None, family: str | None) -> Family:
    """The Hugging Face family whose checkpoints hold `config` exactly."""
    if config.norm != "post":
        raise ValueError(
            f"norm={config.norm!r} has no Hugging Face equivalent (all these families are post-LN); "
            f"{ELSEWHERE}"
        )
    if config.share_layers not in ("none", "all"):
        raise ValueError(
            f"share_layers={config.share_layers!r} has no Hugging Face equivalent (ALBERT shares all layers "
            f"or none); {ELSEWHERE}"
        )
    if family is not None:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; choose one of {', '.join([*FAMILIES, CUSTOM_CODE])}")
        reason = FAMILIES[family].mismatch(config, head)
        if reason:
            raise ValueError(f"cannot export as {family}: {reason}")
        return FAMILIES[family]
    if config.position_encoding == "rotary":  # RoFormer is the one family with rotary positions
        reason = ROFORMER.mismatch(config, head)
        if reason:
            raise ValueError(
                f"rotary positions export only as roformer, and {reason}; train with --position-encoding learned "
                f"to export to the BERT families, or {ELSEWHERE}"
            )
        return ROFORMER
    reasons = []
    for candidate in EXPORT_ORDER:
        reason = candidate.mismatch(config, head)
        if reason is None:
            return candidate
        reasons.append(reason)
    raise ValueError(f"no Hugging Face family holds this model exactly: {'; '.join(reasons)}; {ELSEWHERE}")


TRANSLATIONS["hf"] = Translation(read_plan=reference_plan, save=save_hf, read_classifier=reference_classifier)
