"""Save a model and load it again: `from_pretrained` and `save_pretrained`.

    model = minibert.from_pretrained("checkpoints/albert", head="mlm")
    minibert.save_pretrained(model, "mine/")

A checkpoint directory holds config.json and model.safetensors (or a pytorch_model.bin).
minibert's own format is the simplest there is: config.json is the `ModelConfig` plus a
`"minibert"` marker (which head was saved), and every tensor is stored under our own parameter
name. Loading builds a fresh model from the config on the meta device (shapes, no memory), then
copies every tensor in by name, refusing a missing, unexpected or misshapen one, as nanoGPT's
from_pretrained does (minibert/operations/tensor_files.py).

Other libraries' layouts are translations beside this: a config.json without our marker is read
by the translation registered under `TRANSLATIONS` — Hugging Face's five families, which
minibert/interop/huggingface/ registers when minibert is imported — and
`save_pretrained(format="hf")` writes through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .config import ModelConfig
from .heads import MaskedLM, ReplacedTokenDetector
from .model import Encoder
from .operations.files import write_json
from .operations.old_files import upgrade
from .operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, TensorFile, load_tensors, open_tensors, read_json, save_tensors

HEADS: dict[str | None, type[nn.Module]] = {None: Encoder, "mlm": MaskedLM, "rtd": ReplacedTokenDetector}
HEAD_NAMES = {None: "bare encoder", "mlm": "masked-LM head", "rtd": "replaced-token-detection head"}
FORMAT_KEY, FORMAT_VERSION = "minibert", 1

# How to read one checkpoint: the model to build and where each of its parameters is stored
# (config, our name -> checkpoint name(s), names tolerated without being loaded).
CheckpointPlan = tuple[ModelConfig, Callable[[str], tuple[str, ...]], tuple[str, ...]]


@dataclass(frozen=True)
class Translation:
    """A foreign checkpoint layout: how to plan reading its config.json (stored, head, tensors),
    how to write a model in it (model, directory, head, tokenizer, family), and how to read a
    sequence classifier fine-tuned in it, with its class names (directory, stored: fine-tuning's
    --teacher, finetune/teacher.py)."""

    read_plan: Callable[[dict, str | None, TensorFile], CheckpointPlan]
    save: Callable[[nn.Module, Path, str | None, object, str | None], None]
    read_classifier: Callable[[Path, dict], tuple[nn.Module, list[str] | None]]


# format name -> its translation; "hf" comes from minibert/interop/huggingface/ (registered on import)
TRANSLATIONS: dict[str, Translation] = {}
FOREIGN = "hf"  # the layout of a config.json without our marker


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
    """The plan of minibert's own format, or of the foreign layout a config.json without our
    marker is in; an error names the config.json it comes from."""
    plan = own_plan if FORMAT_KEY in stored else TRANSLATIONS[FOREIGN].read_plan
    try:
        return plan(stored, head, tensors)
    except ValueError as error:
        raise type(error)(f"{directory / CONFIG_FILE}: {error}") from None


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
    return stored_config(fields), lambda ours: (prefix + ours,), ("head",) if prefix else ()


def stored_config(fields: dict) -> ModelConfig:
    """The ModelConfig a file holds (a checkpoint's config.json, a run's run.json), every
    stored field name read as today's (operations/old_files.py holds the old names)."""
    return ModelConfig.from_dict(upgrade("model config", fields))


def save_pretrained(
    model: nn.Module, directory: str | Path, format: str = "minibert", tokenizer=None, family: str | None = None
) -> Path:
    """Write `model` (Encoder, MaskedLM or ReplacedTokenDetector) as a checkpoint directory.

    format="minibert": our config and parameter names, read back by `from_pretrained`.
    format="hf": a Hugging Face directory of the first family (BERT, RoBERTa, ELECTRA, ALBERT,
    DistilBERT, in that order; RoFormer for rotary positions) whose checkpoints hold the model
    exactly, or of `family` if given (minibert/interop/huggingface/); family="minibert" is
    transformers' custom code, which holds any model (interop/huggingface/custom_code.py).
    `tokenizer` (a WordPieceTokenizer or SentencePieceTokenizer) is saved beside the weights;
    with format="hf" in files that `transformers.AutoTokenizer` loads. Files are written
    atomically. Returns the directory.
    """
    head = head_of(model)
    formats = (FORMAT_KEY, *TRANSLATIONS)
    if format not in formats:
        raise ValueError(f"format must be one of {', '.join(formats)}; got {format!r}")
    if family is not None and format == FORMAT_KEY:
        raise ValueError("family= picks a Hugging Face family; use it with format='hf'")
    if tokenizer is not None:
        tokenizer.check_fits(model.config.vocab_size, "save_pretrained", "pass the tokenizer the model was trained with")
    directory = Path(directory)
    if format != FORMAT_KEY:
        TRANSLATIONS[format].save(model, directory, head, tokenizer, family)
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    save_tensors(model, {ours: (ours,) for ours in model.state_dict()}, directory / SAFETENSORS_FILE)
    write_json(directory / CONFIG_FILE, {FORMAT_KEY: {"format": FORMAT_VERSION, "head": head}, **model.config.to_dict()})
    if tokenizer is not None:
        tokenizer.save(directory)
    return directory


def head_of(model: nn.Module) -> str | None:
    for head, cls in HEADS.items():
        if isinstance(model, cls):
            return head
    raise TypeError(f"save_pretrained saves an Encoder, MaskedLM or ReplacedTokenDetector; got {type(model).__name__}")
