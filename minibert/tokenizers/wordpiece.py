"""BERT's WordPiece tokenizer, written from scratch.

BERT (Devlin et al., 2019) turns text into ids in two stages:

1. **Basic tokenization** cuts raw text into words: clean out invalid and control
   characters, split on whitespace, make every CJK ideograph its own word,
   optionally lowercase and strip accents, and split punctuation off into
   one-character words.
2. **WordPiece** (Wu et al., 2016) cuts each word into pieces of a fixed
   vocabulary, greedily taking the longest matching piece first. A piece that
   continues a word carries a `##` prefix, so "unaffable" -> un ##aff ##able and
   the word boundaries survive for decoding. A word that cannot be cut, or is
   absurdly long, becomes one [UNK].

The rules follow Google's original `tokenization.py` and the Hugging Face
tokenizers, so a checkpoint's `vocab.txt` gives the same ids as the tokenizer
shipped with it. Where the references differ we follow Google's: we do not
NFC-normalise before splitting (the original BERT and the fast Hugging Face
tokenizer do not; the slow Python one does, which only matters for cased
vocabularies fed decomposed accents); we lowercase with Python's `str.lower`
(a word-final "Σ" becomes "ς"; the fast tokenizer lowercases letter by letter
and gives "σ"); and only control and format characters are dropped, so a word
holding an unassigned or private-use code point stays a word (CONTROL_CATEGORIES
says why).

Special-token strings typed in the text ("paris is the [MASK] of france") become
their special id, exactly as in the references; the match is on the raw text
and case-sensitive, so "[mask]" is ordinary text.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Sequence

from ..operations.files import read_flags, write_atomic, write_json
from .base import CONFIG_FILE, SPECIAL_TOKENS, Tokenizer
from .offsets import Aligned, Span, special_matches

VOCAB_FILE = "vocab.txt"
CONTINUATION = "##"
MAX_WORD_CHARS = 100

# The CJK Unified Ideographs blocks (and extensions / compatibility forms) that BERT
# treats as one word per character. Hangul, Hiragana and Katakana are not here: those
# scripts put spaces between words, so they need no special treatment.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# The `tokenizers` library (what a tokenizer.json runs on) starts the sixth block at U+2B920,
# so the 256 ideographs U+2B820-U+2B91F stay inside words there.
FAST_TOKENIZER_CJK_RANGES = tuple((0x2B920, hi) if lo == 0x2B820 else (lo, hi) for lo, hi in CJK_RANGES)

# What `clean_text` deletes: the Unicode categories Cc (control) and Cf (format), as Google's
# tokenization.py decides in `_is_control` since March 2019. Its first release deleted every C*
# category, unassigned (Cn) and private use (Co) included, and the slow Hugging Face tokenizer
# still does; Google narrowed it "to support emojis": a code point that the running Python's
# Unicode tables do not know yet (every emoji, under Python 2's Unicode 5.2) is text those tables
# are too old for, not debris, and deleting it glues the letters around it into a word the text
# never had. Kept, it stays in its word, which WordPiece makes [UNK] unless the vocabulary has it.
CONTROL_CATEGORIES = ("Cc", "Cf")
# The `tokenizers` library (a tokenizer.json) keeps unassigned code points too, but deletes
# private use (Co) with the control and format characters.
FAST_TOKENIZER_CONTROL_CATEGORIES = ("Cc", "Cf", "Co")

SPECIAL_TOKEN_PATTERN = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


# --- basic tokenization: text -> words ------------------------------------------


def is_whitespace(char: str) -> bool:
    """Space separators (category Zs, e.g. the no-break space), the line and paragraph
    separators U+2028 U+2029, and tab/newline/return.

    Tabs and newlines are control characters to Unicode, but in text they mean
    "a gap between words", so they count as whitespace, not as noise to delete.
    """
    return char in " \t\n\r" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def is_control(char: str, categories: tuple[str, ...] = CONTROL_CATEGORIES) -> bool:
    """Control and format characters (`categories`) except tab/newline/return.

    They carry no meaning for the model (zero-width joiners, byte-order marks,
    stray escape codes) and would otherwise end up as [UNK] inside words.
    """
    return char not in "\t\n\r" and unicodedata.category(char) in categories


def is_punctuation(char: str) -> bool:
    """Unicode punctuation (P*) plus every ASCII symbol that is neither letter nor digit.

    "$", "^", "`", "+" and friends are Unicode *symbols*, not punctuation, but BERT
    splits them off like punctuation so that "$5" and "5" share the piece "5".
    """
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(char: str, ranges: tuple[tuple[int, int], ...] = CJK_RANGES) -> bool:
    """True for a CJK ideograph: Chinese is written without spaces, so each character is a word."""
    cp = ord(char)
    return any(lo <= cp <= hi for lo, hi in ranges)


def clean_text(text: str, control: tuple[str, ...] = CONTROL_CATEGORIES) -> str:
    """Drop control characters (NUL among them) and U+FFFD, the mark of a decoding error; make all whitespace a plain space.

    Web text is full of invisible debris; removing it here means the same visible
    text always gives the same ids. `control`: the categories deleted.
    """
    out = []
    for char in text:
        if char == "\ufffd" or is_control(char, control):
            continue
        out.append(" " if is_whitespace(char) else char)
    return "".join(out)


def separate_cjk(text: str, ranges: tuple[tuple[int, int], ...] = CJK_RANGES) -> str:
    """Put spaces around every CJK ideograph so that whitespace splitting makes it a word of its own."""
    return "".join(f" {char} " if is_cjk(char, ranges) else char for char in text)


def strip_accents(word: str) -> str:
    """Decompose (NFD) and drop the combining marks (category Mn): "café" -> "cafe".

    Uncased BERT does this so that accented and plain spellings share pieces; it
    is what "uncased" means besides lowercasing.
    """
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def split_punctuation(word: str) -> list[str]:
    """Cut a word around each punctuation character, which becomes a word of its own: "don't" -> don ' t."""
    pieces: list[str] = []
    run = ""
    for char in word:
        if is_punctuation(char):
            if run:
                pieces.append(run)
            pieces.append(char)
            run = ""
        else:
            run += char
    if run:
        pieces.append(run)
    return pieces


def basic_tokenize(text: str, lowercase: bool) -> list[str]:
    """Text -> words, the input WordPiece expects: clean, separate CJK, split on whitespace, normalise case, split punctuation.

    Lowercasing and accent stripping come after the whitespace split and before the
    punctuation split, as in the original.
    """
    words = []
    for word in separate_cjk(clean_text(text)).split():
        if lowercase:
            word = strip_accents(word.lower())
        words.extend(split_punctuation(word))
    return words


NON_SPACE = re.compile(r"\S+")  # what str.split() keeps


def basic_words(text: str, start: int, lowercase: bool) -> list[Aligned]:
    """`basic_tokenize(text)`'s words, each knowing its characters' spans in the original
    (`text` begins at `start` there): "Café!" -> cafe (0, 4), ! (4, 5).

    The same steps in the same order; tests/test_offsets.py checks that the words agree."""
    words = []
    cleaned = Aligned.original(text, start).rewrite(clean_text).rewrite(separate_cjk)
    for word in cleaned.find(NON_SPACE):
        if lowercase:
            word = word.rewrite(lambda w: strip_accents(w.lower()))
        at = 0
        for piece in split_punctuation(word.text):
            words.append(word.slice(at, at + len(piece)))
            at += len(piece)
    return words


# --- WordPiece: word -> pieces ---------------------------------------------------


def wordpiece(word: str, vocab: dict[str, int], unk_token: str, continuation: str = CONTINUATION,
              max_chars: int = MAX_WORD_CHARS) -> list[str]:
    """Cut one word into vocabulary pieces, greedy longest-match-first.

    At each position take the longest vocabulary entry that matches (with the `##`
    prefix after the first piece). There is no backtracking: if some position has
    no match at all, the whole word becomes [UNK] — as does any word longer than
    100 characters, which is almost always noise (URLs, hashes, base64). A
    tokenizer.json may choose another prefix and length limit.
    """
    if len(word) > max_chars:
        return [unk_token]
    pieces = []
    start = 0
    while start < len(word):
        prefix = continuation if start > 0 else ""
        for end in range(len(word), start, -1):
            piece = prefix + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return [unk_token]
    return pieces


# --- the tokenizer ----------------------------------------------------------------


class WordPieceTokenizer(Tokenizer):
    """BERT's tokenizer: basic tokenization, then WordPiece, over a fixed vocabulary.

    `vocab` lists the pieces in id order (line i of `vocab.txt` is id i); it must
    contain the five special tokens [PAD] [UNK] [CLS] [SEP] [MASK]. Uncased models
    (bert-base-uncased) want `lowercase=True`, cased ones `lowercase=False`.
    """

    kind = "WordPiece"

    def __init__(self, vocab: Sequence[str], lowercase: bool = True):
        if not isinstance(lowercase, bool):
            raise TypeError(f"lowercase must be True or False, got {lowercase!r}")
        bad = [t for t in vocab if "\n" in t]
        if bad:
            raise ValueError(f"vocabulary token {bad[0]!r} contains a newline; a vocab.txt holds one token per line")
        self.id_to_token = list(vocab)
        self.token_to_id = {token: i for i, token in enumerate(self.id_to_token)}  # a repeated line: the last id wins, as in BERT
        missing = [t for t in SPECIAL_TOKENS if t not in self.token_to_id]
        if missing:
            raise ValueError(f"the vocabulary lacks the special token(s) {' '.join(missing)}; a BERT vocab.txt must list {' '.join(SPECIAL_TOKENS)}")
        self.lowercase = lowercase
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.token_to_id[t] for t in SPECIAL_TOKENS)

    @classmethod
    def from_file(cls, path: str | Path, lowercase: bool | None = None) -> "WordPieceTokenizer":
        """Load a BERT `vocab.txt`, or a directory holding one (a checkpoint or a `save`d tokenizer).

        With `lowercase=None` the casing comes from `do_lower_case` in a
        `tokenizer_config.json` beside the vocabulary, and defaults to True (uncased
        BERT) when there is none.
        """
        path = Path(path)
        vocab_path = path / VOCAB_FILE if path.is_dir() else path
        if not vocab_path.is_file():
            raise FileNotFoundError(f"no WordPiece vocabulary at {vocab_path}; pass a BERT vocab.txt (one token per line) or a directory holding one")
        vocab = vocab_path.read_text(encoding="utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()  # the newline that ends the last line
        if lowercase is None:
            lowercase = read_lowercase(vocab_path.parent / CONFIG_FILE)
        try:
            return cls(vocab, lowercase=lowercase)
        except ValueError as error:
            raise ValueError(f"{vocab_path}: {error}") from None

    def save(self, directory: str | Path) -> Path:
        """Write `vocab.txt` and `tokenizer_config.json` (the casing) into `directory`; return the directory.

        The file names are Hugging Face's, so the directory also loads with
        `transformers.BertTokenizer.from_pretrained`.
        """
        directory = Path(directory)
        write_atomic(directory / VOCAB_FILE, "".join(t + "\n" for t in self.id_to_token))
        write_json(directory / CONFIG_FILE, {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase})
        return directory

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    def tokens(self, text: str) -> list[str]:
        """Text -> its WordPiece strings, no [CLS]/[SEP] added: "Unaffable!" -> un ##aff ##able !"""
        if not isinstance(text, str):
            raise TypeError(f"expected text as a str, got {type(text).__name__}")
        unk = self.id_to_token[self.unk_id]
        pieces = []
        for chunk in SPECIAL_TOKEN_PATTERN.split(text):
            if chunk in SPECIAL_TOKENS:
                pieces.append(chunk)
                continue
            for word in basic_tokenize(chunk, self.lowercase):
                pieces.extend(wordpiece(word, self.token_to_id, unk))
        return pieces

    def tokenize_to_ids(self, text: str) -> list[int]:
        return [self.token_to_id[piece] for piece in self.tokens(text)]

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[Span]]:
        """As `Tokenizer.tokenize_with_offsets`. A piece covers the original characters of its
        letters ("Café" -> cafe (0, 4); "unaffable" -> un (0, 2) ##aff (2, 5) ##able (5, 9)); a
        word WordPiece cannot cut is one [UNK] covering the whole word."""
        if not isinstance(text, str):
            raise TypeError(f"expected text as a str, got {type(text).__name__}")
        unk = self.id_to_token[self.unk_id]
        ids: list[int] = []
        spans: list[Span] = []
        for start, end, special in special_matches(SPECIAL_TOKEN_PATTERN, text):
            if special is not None:
                ids.append(self.token_to_id[special])
                spans.append((start, end))
                continue
            for word in basic_words(text[start:end], start, self.lowercase):
                pieces = wordpiece(word.text, self.token_to_id, unk)
                ids += [self.token_to_id[piece] for piece in pieces]
                if pieces == [unk]:
                    spans.append(word.source(0, len(word)))
                else:
                    spans += word.pieces([len(piece) - (len(CONTINUATION) if n else 0) for n, piece in enumerate(pieces)])
        return ids, spans

    def decode_ids(self, ids: Sequence[int]) -> str:
        """Ids -> text: pieces joined by spaces, `##` continuations glued back onto their word.

        Lowercasing, accents and the spaces around punctuation are lost in encoding,
        so "Don't" comes back as "don ' t".
        """
        for i in ids:
            if not 0 <= i < len(self.id_to_token):
                raise ValueError(f"id {i} is outside the vocabulary (0..{len(self.id_to_token) - 1})")
        return " ".join(self.id_to_token[i] for i in ids).replace(" " + CONTINUATION, "").strip()


def read_lowercase(config_path: Path) -> bool:
    """`do_lower_case` from a tokenizer_config.json; True (uncased BERT) when the file is absent."""
    return read_flags(config_path, {"do_lower_case": True}, "fix or delete it, or pass lowercase= explicitly")["do_lower_case"]
