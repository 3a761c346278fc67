"""`python -m minibert export CHECKPOINT OUT`: a checkpoint and its tokenizer as a Hugging Face
folder, published only once transformers has read it back.

It is the README's recipe (from_pretrained with the checkpoint's own head, save_pretrained with
format="hf" and the checkpoint's tokenizer) as one command, plus the check of export_check.py.
The folder is written beside OUT under a temporary name and renamed to OUT only when the check
passes (or is skipped because transformers is not installed), so a refused export leaves OUT
as it was. OUT is never clobbered by accident: a folder that holds a model is replaced only with
`overwrite`, and never one that holds anything an export does not write (a training run's
checkpoints, the checkpoint being exported).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...operations.files import TMP_PREFIX, publish_dir
from ...tokenizers.load import load_tokenizer, tokenizer_file_names
from ...pretrained import FORMAT_KEY, HEADS, checkpoint_directory, from_pretrained, save_pretrained
from . import export_family, export_names
from ...operations.tensor_files import CONFIG_FILE, PICKLE_FILE, SAFETENSORS_FILE, listing, open_tensors, read_json
from .export_check import AUTO_CLASSES, INSTALL, TOLERANCE, Check, ExportMismatch, check_export
from .families import FAMILIES

MODEL_FILES = (CONFIG_FILE, SAFETENSORS_FILE, PICKLE_FILE)


@dataclass(frozen=True)
class Exported:
    out: Path
    family: str  # the Hugging Face model_type
    architecture: str  # the class config.json names
    head: str | None
    files: tuple[str, ...]  # what OUT holds
    check: Check | None  # None: transformers is not installed


def export(checkpoint: str | Path, out: str | Path, overwrite: bool = False) -> Exported:
    """Export `checkpoint` (minibert's format or a Hugging Face family's) with its tokenizer to
    the folder `out`, checked by transformers where it is installed. Every refusal is a one-line
    error (ValueError, FileExistsError, ...) and leaves `out` untouched."""
    source, out = checkpoint_directory(checkpoint), Path(out)
    check_out(out, source, overwrite)
    head = checkpoint_head(source)
    model = from_pretrained(source, head=head)
    family = export_family(model.config, head, None)  # a model no family holds: refused here, in one line
    tokenizer = load_tokenizer(source)
    names = export_names(family, model, head)
    checks: list[Check | None] = []

    def write_and_check(folder: Path) -> None:
        save_pretrained(model, folder, format="hf", tokenizer=tokenizer)
        checks.append(check_export(folder, model, tokenizer, head, names))

    try:
        publish_dir(write_and_check, out, replace=overwrite)
    except ExportMismatch as error:
        raise ExportMismatch(
            f"{error}; {out} left untouched. This is a bug in minibert's export to {family.model_type}, not in "
            f"the checkpoint: please report this line"
        ) from None
    files = tuple(sorted(path.name for path in out.iterdir()))
    return Exported(out, family.model_type, family.architectures[head], head, files, checks[0])


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
    writable = set(MODEL_FILES) | set(tokenizer_file_names())
    foreign = [name for name in held if name not in writable or (out / name).is_dir()]
    if foreign or not model:
        raise FileExistsError(
            f"{out} holds {listing(foreign or held)}, which an export does not write; an export replaces only a "
            f"folder that holds nothing but a model and its tokenizer: move those away or choose another OUT"
        )


def checkpoint_head(directory: Path) -> str | None:
    """The head the checkpoint holds, which the export keeps: its marker's for minibert's format,
    the first one whose tensors are present for a Hugging Face checkpoint."""
    stored = read_json(directory / CONFIG_FILE)
    marker = stored.get(FORMAT_KEY)
    if isinstance(marker, dict):
        if marker.get("head") not in HEADS:
            raise ValueError(
                f"{directory} holds a fine-tuned model ({marker.get('head')!r} head); export writes pretrained "
                f"models (encoder, masked-LM or replaced-token head): export the checkpoint it was fine-tuned from"
            )
        return marker.get("head")
    family = FAMILIES.get(stored.get("model_type"))
    if family is None:  # from_pretrained says what is not supported
        return None
    with open_tensors(directory) as tensors:
        held = family.held_heads(tensors.names())
    return (held or [None])[0]


def summary(exported: Exported) -> list[str]:
    """What `python -m minibert export` prints: what was written, then what the check found."""
    lines = [f"wrote {exported.out}: {exported.architecture} ({exported.family}) with its tokenizer "
             f"({', '.join(exported.files)})"]
    check = exported.check
    if check is None:
        return lines + [f"check skipped: transformers is not installed; to check this export, {INSTALL} and run "
                        f"the same command with --overwrite"]
    unused = (f"; {', '.join(check.unused)} left out, as expected ({check.architecture} has no pooler)"
              if check.unused else "")
    return lines + [
        f"checked with transformers {check.version}, loaded by {AUTO_CLASSES[exported.head]} and AutoTokenizer, "
        f"on {check.probes} probe texts:",
        f"  ids      {', '.join(check.inputs)} equal to minibert's",
        f"  weights  every one read as written{unused}",
        f"  {check.output:<8} largest difference {check.difference:.2e} (allowed {TOLERANCE * check.scale:.1e}: "
        f"{TOLERANCE:.0e} x the largest |{check.output}|, at least 1)",
    ]
