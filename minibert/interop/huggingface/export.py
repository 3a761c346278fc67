"""`python -m minibert export CHECKPOINT OUT`: a checkpoint and its tokenizer as a Hugging Face
folder, published only once transformers has read it back.

It is the README's recipe (from_pretrained with the checkpoint's own head, save_pretrained with
format="hf" and the checkpoint's tokenizer) as one command, plus the check of export_check.py.
Where a built-in transformers family holds the model exactly, the folder is of that family (a
fine-tuned classifier: its *ForSequenceClassification or *ForTokenClassification; a span
extractor: its *ForQuestionAnswering; task_heads.py);
otherwise (rotary positions with shared layers, a
replaced-token head or no segment embeddings, pre-LN, attention-only or FFN-only sharing, a
classifier head no built-in class computes) it is transformers' custom code, minibert's own
source in the folder, loaded with `trust_remote_code=True` (custom_code.py). A fine-tuned model
gets a model card either way (model_card.py).
The folder is written beside OUT under a temporary name and renamed to OUT only when the check
passes (or is skipped because transformers is not installed), so a refused export leaves OUT
as it was. OUT is never clobbered by accident: a folder that holds a model is replaced only with
`overwrite`, and never one that holds anything an export does not write (a training run's
checkpoints, the checkpoint being exported).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from ...finetune.checkpoint import is_classifier, load_classifier
from ...operations.files import TMP_PREFIX, publish_dir, write_atomic
from ...tokenizers.base import Tokenizer
from ...tokenizers.load import load_tokenizer, tokenizer_file_names
from ...pretrained import FORMAT_KEY, HEADS, checkpoint_directory, from_pretrained
from . import CUSTOM_CODE, export_family, export_names, save_hf
from ...operations.tensor_files import CONFIG_FILE, PICKLE_FILE, SAFETENSORS_FILE, listing, open_tensors, read_json
from .custom_code import ARCHITECTURES, HEAD_OF, code_file_names
from .export_check import AUTO_CLASSES, INSTALL, SCORE_TOLERANCE, Check, ExportMismatch, check_export
from .families import FAMILIES
from .model_card import CARD_FILE, model_card
from .family import TASK_HEADS, Family
from .task_heads import in_family_layout, misfit

MODEL_FILES = (CONFIG_FILE, SAFETENSORS_FILE, PICKLE_FILE)


@dataclass(frozen=True)
class Exported:
    out: Path
    family: str  # the Hugging Face model_type
    architecture: str  # the class config.json names
    head: str | None
    files: tuple[str, ...]  # what OUT holds
    check: Check | None  # None: transformers is not installed
    why: str | None = None  # why a fine-tuned model is custom code: no built-in class computes it


def export(checkpoint: str | Path, out: str | Path, overwrite: bool = False) -> Exported:
    """Export `checkpoint` (minibert's format, a fine-tuned classifier, or a Hugging Face family's)
    with its tokenizer to the folder `out`, checked by transformers where it is installed. Every
    refusal is a one-line error (ValueError, FileExistsError, ...) and leaves `out` untouched."""
    source, out = checkpoint_directory(checkpoint), Path(out)
    check_out(out, source, overwrite)
    model, tokenizer, head, labels = load_checkpoint(source)
    tokenizer.check_fits(model.config.vocab_size, f"{source}", "the checkpoint's tokenizer is not its model's")
    family, why = holding_family(model, head)  # None: transformers' custom code
    model_type = CUSTOM_CODE if family is None else family.model_type
    written = model if family is None or head not in TASK_HEADS else in_family_layout(model, family, head)
    names = {name: (name,) for name in model.state_dict()} if family is None else export_names(family, written, head)
    architecture = ARCHITECTURES[head] if family is None else family.architectures[head]
    checks: list[Check | None] = []

    def write_and_check(folder: Path) -> None:
        save_hf(written, folder, head, tokenizer, model_type, labels)
        if head in TASK_HEADS:
            card = model_card(source, out, architecture, head, labels, family is None, model.config.max_length)
            write_atomic(folder / CARD_FILE, card)
        checks.append(check_export(folder, model, tokenizer, head, names, custom=family is None, labels=labels))

    try:
        publish_dir(write_and_check, out, replace=overwrite)
    except ExportMismatch as error:
        raise ExportMismatch(
            f"{error}; {out} left untouched. This is a bug in minibert's export to {model_type}, not in "
            f"the checkpoint: please report this line"
        ) from None
    files = tuple(sorted(path.name for path in out.iterdir()))
    return Exported(out, model_type, architecture, head, files, checks[0], why)


def holding_family(model: nn.Module, head: str | None) -> tuple[Family | None, str | None]:
    """The built-in family whose class holds the model exactly (None: none does), and for a
    fine-tuned model that none holds, why (the export prints it)."""
    family = first_holding(model.config, head)
    if head not in TASK_HEADS:
        return family, None
    why = misfit(model, family or first_holding(model.config, None), head)
    return (None, why) if why else (family, None)


def first_holding(config, head: str | None) -> Family | None:
    """The first family whose checkpoints hold `config` with `head` exactly; None where none does."""
    try:
        return export_family(config, head, None)
    except ValueError:  # export_family says why; the export then writes custom code instead
        return None


def load_checkpoint(source: Path) -> tuple[nn.Module, Tokenizer, str | None, list | None]:
    """(model, tokenizer, head, class names) of a checkpoint: a pretrained model with the head it
    holds, or a fine-tuned model with its labels (None for a regression, a span extractor or
    another head)."""
    if is_classifier(read_json(source / CONFIG_FILE)):
        model, tokenizer, labels = load_classifier(source)
        head = read_json(source / CONFIG_FILE)[FORMAT_KEY]["head"]
        return model, tokenizer, head, None if labels is None else labels.names
    head = checkpoint_head(source)
    return from_pretrained(source, head=head), load_tokenizer(source), head, None


def check_out(out: Path, source: Path, overwrite: bool) -> None:
    """Refuse an OUT whose contents an export would lose: a file, a folder holding a model
    (unless `overwrite`), or anything an export does not write."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"OUT {out} is a file; choose a folder")
    if out.resolve() == source.resolve() or out.resolve() in source.resolve().parents:
        raise ValueError(f"OUT {out} would replace the checkpoint being exported ({source}); choose another folder")
    held = sorted(path.name for path in out.iterdir() if not path.name.startswith(TMP_PREFIX)) if out.is_dir() else []
    if not held:
        return
    model = any(name in held for name in MODEL_FILES)
    if model and not overwrite:
        raise FileExistsError(f"{out} already holds a model; pass --overwrite to replace it, or choose another OUT")
    writable = {*MODEL_FILES, CARD_FILE, *tokenizer_file_names(), *code_file_names()}
    foreign = [name for name in held if name not in writable or (out / name).is_dir()]
    if foreign or not model:
        raise FileExistsError(
            f"{out} holds {listing(foreign or held)}, which an export does not write; an export replaces only a "
            f"folder that holds nothing but a model and its tokenizer: move those away or choose another OUT"
        )


def checkpoint_head(directory: Path) -> str | None:
    """The head a pretrained checkpoint holds, which the export keeps: its marker's for minibert's
    format, its class's for a custom-code export, the first one whose tensors are present for a
    Hugging Face checkpoint."""
    stored = read_json(directory / CONFIG_FILE)
    marker = stored.get(FORMAT_KEY)
    held = marker.get("head") if isinstance(marker, dict) else None
    if stored.get("model_type") == CUSTOM_CODE:
        held = HEAD_OF.get((stored.get("architectures") or [None])[0])
    if held not in HEADS:
        raise ValueError(
            f"{directory} holds a model with a {held!r} head, which export reads only from the minibert checkpoint "
            f"`python train.py finetune` wrote: export that one"
        )
    if isinstance(marker, dict) or stored.get("model_type") == CUSTOM_CODE:
        return held
    family = FAMILIES.get(stored.get("model_type"))
    if family is None:  # from_pretrained says what is not supported
        return None
    with open_tensors(directory) as tensors:
        held = family.held_heads(tensors.names())
    return (held or [None])[0]


def summary(exported: Exported) -> list[str]:
    """What `python -m minibert export` prints: what was written, then what the check found."""
    custom = exported.family == CUSTOM_CODE
    kind = f"{exported.family}: transformers' custom code, load it with trust_remote_code=True" if custom else exported.family
    why = f"; no built-in class: {exported.why}" if exported.why else ""
    lines = [f"wrote {exported.out}: {exported.architecture} ({kind}) with its tokenizer ({', '.join(exported.files)}){why}"]
    check = exported.check
    if check is None:
        return lines + [f"check skipped: transformers is not installed; to check this export, {INSTALL} and run "
                        f"the same command with --overwrite"]
    unused = (f"; {', '.join(check.unused)} left out, as expected ({check.architecture} has no pooler)"
              if check.unused else "")
    trusted = " (trust_remote_code=True)" if custom else ""
    return lines + [
        f"checked with transformers {check.version}, loaded by {AUTO_CLASSES[exported.head]}{trusted} and AutoTokenizer, "
        f"on {check.probes} probe texts:",
        f"  ids      {', '.join(check.inputs)} equal to minibert's",
        f"  weights  every one read as written{unused}",
        f"  {check.output:<8} largest difference {check.difference:.2e} (allowed {check.tolerance * check.scale:.1e}: "
        f"{check.tolerance:.0e} x the largest |{check.output}|, at least 1)",
    ] + ([] if check.scores is None else [
        f"  pipeline text-classification: minibert's labels, scores within {check.scores:.2e} (allowed {SCORE_TOLERANCE:.0e})"])
