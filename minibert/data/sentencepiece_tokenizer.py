"""Step 2 of the pipeline: a subword vocabulary learned from the corpus (SentencePiece).

The models we pretrain ourselves get their own vocabulary, learned from their own
corpus, as ALBERT's did: a SentencePiece *unigram* model (or BPE, as in RoBERTa's
byte-level BPE). Two settings make it fit the rest of minibert:

* the special tokens sit at fixed ids — [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 — so
  the masking and padding code never has to look them up;
* byte fallback: a character never seen in training is spelled as its UTF-8 bytes
  (<0xE2> <0x98> <0x83>) instead of collapsing to [UNK], so no character is lost.

Training is cached: the model file is named by a hash of the corpus bytes and every
setting, so a second run with the same inputs reuses it in milliseconds. Training reads
a random sample of at most `max_sentences` sentences (SentencePiece's own reservoir
sample, seeded): 50k sentences — a few MB of text — are plenty for a vocabulary of a
few thousand pieces, and keep training to seconds and memory bounded for any corpus.

`load_tokenizer(folder)` opens whichever tokenizer a checkpoint folder holds: ours
(`tokenizer.model`), a released ALBERT's (`spiece.model`, albert_tokenizer.py) or a WordPiece
vocabulary (`vocab.txt`, e.g. an imported BERT).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Sequence

import sentencepiece as spm

from ..files import publish_file, write_atomic
from .cache import DEFAULT_DATA_DIR, fingerprint
from .corpus import PathLike, corpus_files, corpus_fingerprint, read_documents
from .albert_tokenizer import FILE_NAME as ALBERT_FILE, AlbertTokenizer
from .sentencepiece_backed import SentencePieceBacked
from .tokenizer import SPECIAL_TOKENS, Tokenizer
from .tokenizer_json import hugging_face_files

MODEL_TYPES = ("unigram", "bpe")
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256 + 64  # specials + byte pieces + room for characters


class SentencePieceTokenizer(SentencePieceBacked):
    """A trained SentencePiece model behind minibert's `Tokenizer` interface."""

    pad_id, unk_id, cls_id, sep_id, mask_id = range(len(SPECIAL_TOKENS))
    FILE_NAME = "tokenizer.model"

    def __init__(self, model_proto: bytes):
        super().__init__(model_proto)
        pieces = tuple(self._sp.id_to_piece(i) for i in range(len(SPECIAL_TOKENS)))
        if pieces != SPECIAL_TOKENS:
            raise ValueError(f"SentencePiece model has {pieces} at ids 0-4, not {SPECIAL_TOKENS}; train it with SentencePieceTokenizer.train")

    def tokenize_to_ids(self, text: str) -> list[int]:
        return self._sp.encode(text)

    # --- training, saving, loading ------------------------------------------------
    @classmethod
    def train(
        cls,
        paths: PathLike | Sequence[PathLike],
        *,
        vocab_size: int = 8000,
        model_type: str = "unigram",
        cache_dir: str | Path = DEFAULT_DATA_DIR,
        max_sentences: int = 50_000,
        seed: int = 0,
    ) -> "SentencePieceTokenizer":
        """Learn a vocabulary from the corpus at `paths`, or reuse the cached one.

        `vocab_size` is an upper bound: on a tiny corpus SentencePiece may stop earlier.
        """
        if model_type not in MODEL_TYPES:
            raise ValueError(f"model_type={model_type!r} is not one of {MODEL_TYPES}")
        if vocab_size < MIN_VOCAB_SIZE:
            raise ValueError(f"vocab_size={vocab_size} is too small: 5 special tokens + 256 byte pieces need at least {MIN_VOCAB_SIZE}")
        files = corpus_files(paths)
        key = fingerprint(corpus_fingerprint(files), vocab_size, model_type, max_sentences, seed, spm.__version__)
        path = Path(cache_dir) / f"spm-{model_type}-{vocab_size}-{key}.model"
        if not path.exists():
            publish_file(lambda tmp: tmp.write_bytes(_train_model_proto(files, vocab_size, model_type, max_sentences, seed)), path)
        return cls(path.read_bytes())

    def save(self, directory: str | Path) -> Path:
        """Write `tokenizer.model` into `directory` (e.g. a checkpoint folder), atomically."""
        return write_atomic(Path(directory) / self.FILE_NAME, self._model_proto)

    def hugging_face_files(self) -> dict[str, dict]:
        """file name -> JSON of tokenizer.json, tokenizer_config.json and special_tokens_map.json,
        which `transformers.AutoTokenizer` loads (tokenizer_json.py); a one-line error for a
        model they cannot describe (BPE). `save_pretrained(format="hf")` writes them."""
        return hugging_face_files(self._model_proto)

    @classmethod
    def load(cls, directory: str | Path) -> "SentencePieceTokenizer":
        path = Path(directory) / cls.FILE_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no {cls.FILE_NAME} in {directory}; save a tokenizer there first")
        return cls(path.read_bytes())


def _train_model_proto(files: list[Path], vocab_size: int, model_type: str, max_sentences: int, seed: int) -> bytes:
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    sentences = (sentence for document in read_documents(files) for sentence in document)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=sentences,
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            hard_vocab_limit=False,  # a tiny corpus yields a smaller vocabulary instead of failing
            pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            pad_piece=SPECIAL_TOKENS[0], unk_piece=SPECIAL_TOKENS[1],
            user_defined_symbols=list(SPECIAL_TOKENS[2:]),  # [CLS] [SEP] [MASK] -> ids 2, 3, 4
            byte_fallback=True,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,
        )
    except RuntimeError as error:
        raise ValueError(f"SentencePiece training failed on {files[0]}...: {error}") from None
    return model.getvalue()


def _wordpiece(directory: Path) -> Tokenizer:
    from .wordpiece import WordPieceTokenizer  # only needed for imported BERT vocabularies

    return WordPieceTokenizer.from_file(directory / "vocab.txt")  # casing from its tokenizer_config.json


# The tokenizer files a checkpoint folder may hold, in the order `load_tokenizer` looks for
# them: file name -> (what it is, how to open the folder that holds it).
TOKENIZER_FILES = {
    SentencePieceTokenizer.FILE_NAME: ("SentencePiece, minibert's own", SentencePieceTokenizer.load),
    ALBERT_FILE: ("SentencePiece, a released ALBERT's", AlbertTokenizer.load),  # switches from its tokenizer_config.json
    "vocab.txt": ("WordPiece", _wordpiece),
}


def has_tokenizer(directory: str | Path) -> bool:
    return any((Path(directory) / name).is_file() for name in TOKENIZER_FILES)


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """Open the tokenizer saved in `directory`: `tokenizer.model`, an ALBERT `spiece.model`
    or a WordPiece `vocab.txt`."""
    directory = Path(directory)
    for name, (_, load) in TOKENIZER_FILES.items():
        if (directory / name).is_file():
            return load(directory)
    supported = "; ".join(f"{name} ({kind})" for name, (kind, _) in TOKENIZER_FILES.items())
    if (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
        raise ValueError(f"{directory} holds a byte-level BPE tokenizer (vocab.json + merges.txt, as RoBERTa's), which "
                         f"minibert cannot read; supported: {supported}")
    raise FileNotFoundError(f"no tokenizer in {directory}: expected {supported}")
