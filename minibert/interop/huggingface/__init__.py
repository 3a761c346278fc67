"""Load and save checkpoint directories: the five Hugging Face families (and RoFormer, BERT
with rotary positions), and minibert's own.

    model = minibert.from_pretrained("bert-base-uncased/", head="mlm")
    minibert.save_pretrained(model, "exported/", format="hf")

A directory holds config.json and model.safetensors (or a pytorch_model.bin). Its config.json
says which kind it is: a `model_type` names a Hugging Face family, whose names are translated by
the tables in families.py; a `"minibert"` key marks our own format, whose tensor names are our
parameter names. Either way the same loader (checkpoint.py) builds a fresh model from the config
and copies every tensor by name, as nanoGPT's from_pretrained does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch import nn

from ...config import ModelConfig
from ...tokenizers import SentencePieceTokenizer
from ..tokenizers.json_export import CONFIG_FILE as TOKENIZER_CONFIG_FILE
from ...heads import MaskedLM, ReplacedTokenDetector
from ...model import Encoder
from ...operations.files import write_json
from .checkpoint import CONFIG_FILE, SAFETENSORS_FILE, TensorFile, load_tensors, open_tensors, read_json, save_tensors
from .families import EXPORT_ORDER, FAMILIES, ROFORMER
from .family import Family, inside

HEADS: dict[str | None, type[nn.Module]] = {None: Encoder, "mlm": MaskedLM, "rtd": ReplacedTokenDetector}
HEAD_NAMES = {None: "bare encoder", "mlm": "masked-LM head", "rtd": "replaced-token-detection head"}
FORMAT_KEY, FORMAT_VERSION = "minibert", 1
FORMATS = ("minibert", "hf")

# How to read one checkpoint: the model to build and where each of its parameters is stored
# (config, our name -> checkpoint name(s), names tolerated without being loaded).
CheckpointPlan = tuple[ModelConfig, Callable[[str], tuple[str, ...]], tuple[str, ...]]


class MissingHead(ValueError):
    """The checkpoint holds no weights for the requested head (e.g. an MLM head asked of an
    ELECTRA discriminator). A ValueError of its own so that commands can add their own fix."""


def from_pretrained(path: str | Path, head: str | None = None) -> nn.Module:
    """Load a checkpoint directory as an Encoder (head=None), MaskedLM ("mlm") or
    ReplacedTokenDetector ("rtd"), in eval mode, with float32 parameters."""
    if head not in HEADS:
        raise ValueError(f"head must be None, 'mlm' or 'rtd'; got {head!r}")
    directory = checkpoint_directory(path)
    stored_config = read_json(directory / CONFIG_FILE)
    with open_tensors(directory) as tensors:
        model = build_and_load(HEADS[head], read_plan(directory, stored_config, head, tensors), tensors)
    return model.eval()


def build_and_load(make: Callable[[ModelConfig], nn.Module], plan: CheckpointPlan, tensors: TensorFile,
                   tolerate: tuple[str, ...] = ()) -> nn.Module:
    """`make(config)` built on the meta device (shapes only), then every parameter taken from
    the checkpoint under the name the plan gives it; names in `tolerate` may stay unread (a
    caller that reads them itself, e.g. a classifier's head)."""
    config, name_of, tolerated = plan
    with torch.device("meta"):
        model = make(config)
    load_tensors(model, {ours: name_of(ours) for ours in model.state_dict()}, tensors, (*tolerated, *tolerate))
    return model


def checkpoint_directory(path: str | Path) -> Path:
    """`path` if it is a directory; otherwise a one-line error that says what belongs there."""
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"no checkpoint directory at {directory}; pass a directory holding {CONFIG_FILE} and {SAFETENSORS_FILE} "
            f"(python train.py --variant V leaves one in checkpoints/V)"
        )
    return directory


def read_plan(directory: Path, stored: dict, head: str | None, tensors: TensorFile) -> CheckpointPlan:
    """The plan of minibert's own format or of a Hugging Face family, as config.json says;
    an error names the config.json it comes from."""
    plan = own_plan if FORMAT_KEY in stored else reference_plan
    try:
        return plan(stored, head, tensors)
    except ValueError as error:
        raise type(error)(f"{directory / CONFIG_FILE}: {error}") from None


def reference_plan(stored: dict, head: str | None, tensors: TensorFile) -> CheckpointPlan:
    """A Hugging Face checkpoint: the family's tables name every tensor."""
    present = tensors.names()
    model_type = stored.get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r} is not supported; minibert loads {', '.join(FAMILIES)}")
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


def own_plan(stored: dict, head: str | None, tensors: TensorFile) -> CheckpointPlan:
    """minibert's format: ModelConfig fields plus a marker; tensors under our own names."""
    fields = dict(stored)
    marker = fields.pop(FORMAT_KEY)
    if not isinstance(marker, dict) or marker.get("format") != FORMAT_VERSION or marker.get("head") not in HEADS:
        raise ValueError(f'"{FORMAT_KEY}" must be {{"format": {FORMAT_VERSION}, "head": null | "mlm" | "rtd"}}, got {marker!r}')
    saved_head = marker["head"]
    if head not in (None, saved_head):
        also = "" if saved_head is None else f" or head={saved_head!r}"
        raise MissingHead(f"this minibert checkpoint holds a {HEAD_NAMES[saved_head]}; load it with head=None{also}")
    prefix = "encoder." if saved_head is not None and head is None else ""
    return ModelConfig.from_dict(fields), lambda ours: (prefix + ours,), ("head",) if prefix else ()


def save_pretrained(
    model: nn.Module, directory: str | Path, format: str = "minibert", tokenizer=None, family: str | None = None
) -> Path:
    """Write `model` (Encoder, MaskedLM or ReplacedTokenDetector) as a checkpoint directory.

    format="minibert": our config and parameter names, read back by `from_pretrained`.
    format="hf": a Hugging Face directory of the first family (BERT, RoBERTa, ELECTRA, ALBERT,
    DistilBERT, in that order; RoFormer for rotary positions) whose checkpoints hold the model
    exactly, or of `family` if given.
    `tokenizer` (a WordPieceTokenizer or SentencePieceTokenizer) is saved beside the weights, in
    files that `transformers.AutoTokenizer` loads. Files are written atomically. Returns the directory.
    """
    head = head_of(model)
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    if family is not None and format != "hf":
        raise ValueError("family= picks a Hugging Face family; use it with format='hf'")
    if tokenizer is not None:
        tokenizer.check_fits(model.config.vocab_size, "save_pretrained", "pass the tokenizer the model was trained with")
    if format == "hf":
        chosen = export_family(model.config, head, family)
        # tokenizer.json & co. for a SentencePiece tokenizer (a WordPiece vocab.txt is already
        # Hugging Face's format); built first, so that a tokenizer they cannot describe is
        # refused before anything is written.
        tokenizer_files = tokenizer.hugging_face_files() if isinstance(tokenizer, SentencePieceTokenizer) else {}
        stored_config = chosen.reference_config(model.config, head)
        names = export_names(chosen, model, head)
        computed = chosen.computed_tensors(model.config, prefixed=head is not None)
    else:
        stored_config = {FORMAT_KEY: {"format": FORMAT_VERSION, "head": head}, **model.config.to_dict()}
        names, computed, tokenizer_files = {ours: (ours,) for ours in model.state_dict()}, {}, {}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_tensors(model, names, directory / SAFETENSORS_FILE, computed)
    write_json(directory / CONFIG_FILE, stored_config)
    if tokenizer is not None:
        tokenizer.save(directory)
        for name, value in tokenizer_files.items():
            write_json(directory / name, value)
        if format == "hf":
            describe_inputs(directory / TOKENIZER_CONFIG_FILE, model.config)
    return directory


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


def head_of(model: nn.Module) -> str | None:
    for head, cls in HEADS.items():
        if isinstance(model, cls):
            return head
    raise TypeError(f"save_pretrained saves an Encoder, MaskedLM or ReplacedTokenDetector; got {type(model).__name__}")


def export_family(config: ModelConfig, head: str | None, family: str | None) -> Family:
    """The Hugging Face family whose checkpoints hold `config` exactly."""
    if config.norm != "post":
        raise ValueError(
            f"norm={config.norm!r} has no Hugging Face equivalent (all these families are post-LN); "
            f"save with format='minibert'"
        )
    if config.share_layers not in ("none", "all"):
        raise ValueError(
            f"share_layers={config.share_layers!r} has no Hugging Face equivalent (ALBERT shares all layers "
            f"or none); save with format='minibert'"
        )
    if family is not None:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
        reason = FAMILIES[family].mismatch(config, head)
        if reason:
            raise ValueError(f"cannot export as {family}: {reason}")
        return FAMILIES[family]
    if config.position_encoding == "rotary":  # RoFormer is the one family with rotary positions
        reason = ROFORMER.mismatch(config, head)
        if reason:
            raise ValueError(
                f"rotary positions export only as roformer, and {reason}; train with --position-encoding learned "
                f"to export to the BERT families, or save with format='minibert'"
            )
        return ROFORMER
    reasons = []
    for candidate in EXPORT_ORDER:
        reason = candidate.mismatch(config, head)
        if reason is None:
            return candidate
        reasons.append(reason)
    raise ValueError(f"no Hugging Face family holds this model exactly: {'; '.join(reasons)}")
