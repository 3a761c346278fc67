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

from ..interop.tokenizers.albert import FILE_NAME as ALBERT_FILE, AlbertTokenizer
from .base import Tokenizer
from ..interop.tokenizers.byte_bpe import MERGES_FILE, VOCAB_FILE as BPE_VOCAB_FILE, ByteLevelBPETokenizer
from ..interop.tokenizers.json_import import COMPANION_FILES, FILE_NAME as JSON_FILE, JsonTokenizer
from .sentencepiece_tokenizer import SentencePieceTokenizer
from .wordpiece import VOCAB_FILE as WORDPIECE_FILE, WordPieceTokenizer

# file names that must all be present -> (what they are, how to open the folder that holds them),
# in the order `load_tokenizer` looks for them.
TOKENIZER_FILES: dict[tuple[str, ...], tuple[str, Callable[[Path], Tokenizer]]] = {
    (SentencePieceTokenizer.FILE_NAME,): ("minibert's own SentencePiece", SentencePieceTokenizer.load),
    (JSON_FILE,): ("the tokenizers library's, as transformers 5 saves every family", JsonTokenizer.load),  # special-token names from tokenizer_config.json
    (ALBERT_FILE,): ("a released ALBERT's SentencePiece", AlbertTokenizer.load),  # switches from its tokenizer_config.json
    (BPE_VOCAB_FILE, MERGES_FILE): ("RoBERTa's byte-level BPE", ByteLevelBPETokenizer.load),  # specials from tokenizer_config.json
    (WORDPIECE_FILE,): ("BERT's WordPiece, also DistilBERT's and ELECTRA's", WordPieceTokenizer.from_file),  # casing from its tokenizer_config.json
}


def tokenizer_file_names() -> tuple[str, ...]:
    """Every file name some layout uses, companions included (what a folder must lose to
    forget its tokenizer)."""
    return tuple(dict.fromkeys([*(name for names in TOKENIZER_FILES for name in names), *COMPANION_FILES]))


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
