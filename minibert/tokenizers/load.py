"""The one loader: which tokenizer a checkpoint folder holds, and opening it.

Every command that reads a folder (`fill-mask`, `detect`, `--init`, `finetune --init`,
`save_pretrained`, `info`) calls `load_tokenizer`, so a layout that works in one works in all.
A folder may hold several layouts at once (transformers writes `tokenizer.json` beside the
files of the older, "slow" tokenizers); the first one found in `TOKENIZER_FILES`' order wins:
minibert's own `tokenizer.model` (its exact vocabulary; the folders we export hold it and a
`tokenizer.json` written from it, json_export.py), then `tokenizer.json` (self-contained, what
transformers' AutoTokenizer itself prefers, and the only file transformers 5 writes;
json_import.py), then the per-family files of the older, "slow" tokenizers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .base import SPECIAL_TOKEN_FILES, Tokenizer
from .sentencepiece_tokenizer import SentencePieceTokenizer
from .wordpiece import VOCAB_FILE as WORDPIECE_FILE, WordPieceTokenizer

# file names that must all be present -> (what they are, how to open the folder that holds them),
# in the order `load_tokenizer` looks for them. The core registers its own two layouts here;
# minibert.interop.tokenizers registers the released checkpoints' layouts (tokenizer.json,
# ALBERT's spiece.model, RoBERTa's vocab.json + merges.txt) when minibert is imported.
TOKENIZER_FILES: dict[tuple[str, ...], tuple[str, Callable[[Path], Tokenizer]]] = {}
_RANKS: dict[tuple[str, ...], int] = {}


def register_layout(names: tuple[str, ...], kind: str, open_folder: Callable[[Path], Tokenizer], rank: int) -> None:
    """Teach `load_tokenizer` a layout: the files that make it, what it is, how to open it, and
    its `rank` (lower = looked for first, when a folder holds several layouts)."""
    _RANKS[names] = rank
    entries = {**TOKENIZER_FILES, names: (kind, open_folder)}
    TOKENIZER_FILES.clear()
    TOKENIZER_FILES.update(sorted(entries.items(), key=lambda entry: _RANKS[entry[0]]))


register_layout((SentencePieceTokenizer.FILE_NAME,), "minibert's own SentencePiece", SentencePieceTokenizer.load, rank=0)
register_layout((WORDPIECE_FILE,), "BERT's WordPiece, also DistilBERT's and ELECTRA's", WordPieceTokenizer.from_file,
                rank=9)  # casing from its tokenizer_config.json


def tokenizer_file_names() -> tuple[str, ...]:
    """Every file name some layout uses, the files of special-token spellings and settings that
    accompany them included (what a folder must lose to forget its tokenizer)."""
    return tuple(dict.fromkeys([*(name for names in TOKENIZER_FILES for name in names), *SPECIAL_TOKEN_FILES]))


def find_layout(directory: str | Path) -> tuple[str, ...] | None:
    """The file names of the layout `load_tokenizer` would open in `directory`, or None."""
    directory = Path(directory)
    return next((names for names in TOKENIZER_FILES if all((directory / n).is_file() for n in names)), None)


def has_tokenizer(directory: str | Path) -> bool:
    return find_layout(directory) is not None


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """Open the tokenizer saved in `directory`, from the first layout of `TOKENIZER_FILES` it holds."""
    directory = Path(directory)
    names = find_layout(directory)
    if names is None:
        supported = "; ".join(f"{' + '.join(names)} ({kind})" for names, (kind, _) in TOKENIZER_FILES.items())
        raise FileNotFoundError(f"no tokenizer in {directory}: expected {supported}")
    return TOKENIZER_FILES[names][1](directory)


def offsets_tokenizer(tokenizer: Tokenizer, directory: str | Path, probe: list[str]) -> Tokenizer:
    """`tokenizer` if it gives each token's characters (question answering needs them), else the
    next layout `directory` holds that does and cuts the `probe` texts into the same ids (a
    tokenizer.json saved beside the vocab.txt it was made from); a one-line error where none does."""
    if tokenizer.gives_offsets:
        return tokenizer
    directory = Path(directory)
    for names, (kind, open_folder) in TOKENIZER_FILES.items():
        if all((directory / name).is_file() for name in names):
            other = open_folder(directory)
            if other.gives_offsets and all(other.tokenize_to_ids(text) == tokenizer.tokenize_to_ids(text) for text in probe):
                return other
    raise ValueError(f"{directory}'s tokenizer ({tokenizer.kind}) does not give each token's characters, which question "
                     f"answering needs, and the folder holds no other layout that cuts text the same way; add the "
                     f"release's vocab.txt, spiece.model, or vocab.json + merges.txt beside it")
