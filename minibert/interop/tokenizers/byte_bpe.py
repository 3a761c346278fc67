"""RoBERTa's tokenizer: byte-level BPE (GPT-2's, Radford et al., 2019), written from scratch.

A byte-level BPE vocabulary never meets a character it cannot spell, because it spells bytes:

1. **Pre-tokenization** cuts the text into words with GPT-2's pattern: the English
   contractions 's 't 're 've 'm 'll 'd; a run of letters, of digits, or of other symbols,
   each with at most one space in front; and whitespace. A space belongs to the word after
   it, so " cat" and "cat" are different words: the first is a word inside a sentence, the
   second one that starts the text (`add_prefix_space` makes them the same).
2. **Bytes as characters**: each word's UTF-8 bytes are written as printable characters
   (`byte_to_char`), so every string of bytes is a string of the vocabulary's alphabet.
3. **BPE** (Sennrich et al., 2016): starting from single bytes, merge the adjacent pair that
   was learned first (the lowest rank, the line number in merges.txt), again and again, until
   no learned pair is left. The pieces are looked up in vocab.json.

Decoding reverses step 2 and 3 exactly, so `decode_ids(tokenize_to_ids(text)) == text`.

The files are those of every released RoBERTa (and GPT-2): `vocab.json` (piece -> id) and
`merges.txt` (a `#version` line, then one merge "a b" per line). RoBERTa's special tokens are
`<s>` (first, the [CLS] role), `</s>` (separator), `<pad>`, `<unk>` and `<mask>`; one text is
laid out `<s> A </s>`, a pair `<s> A </s></s> B </s>`, all in segment 0 (RoBERTa has one segment
type). Special-token spellings typed in the text become their ids, and `<mask>` takes the
whitespace before it along (it "lstrips"), so "the <mask>." masks a word with its space, as
RoBERTa was pretrained. The ids equal those of transformers' RobertaTokenizer and of the
`tokenizers` library on the same files (tests/test_byte_bpe.py).
"""

from __future__ import annotations

import functools
import json
import re
import sys
import unicodedata
from pathlib import Path
from typing import Sequence

import torch

from ...operations.files import read_flags, read_json_object, write_atomic, write_json
from ...tokenizers.base import CONFIG_FILE, Tokenizer, special_spellings
from ...tokenizers.offsets import Span, special_matches, trim_spaces

VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
MERGES_HEADER = "#version: 0.2"  # what GPT-2's and RoBERTa's merges.txt start with
# the five roles and RoBERTa's spellings of them (tokenizer_config.json may spell them otherwise)
ROBERTA_SPECIALS = {"cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>"}
STANDS_IN = {"cls_token": "bos_token", "sep_token": "eos_token"}  # read when the first is absent
CACHE_SIZE = 100_000  # words whose ids are remembered (cleared when full)

# Unicode's White_Space property: what `\s` means to the regex engines GPT-2 and the `tokenizers`
# library use. Python's str.isspace (and so `re`'s \s) also counts the separators U+001C-U+001F,
# which GPT-2 treats as symbols, so the set is written out.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"


# --- bytes as printable characters -----------------------------------------------------


@functools.cache
def byte_to_char() -> dict[int, str]:
    """Byte -> the character that spells it in the vocabulary (GPT-2's `bytes_to_unicode`).

    BPE works on strings, and a vocabulary file is text, so each of the 256 bytes needs a
    character of its own — a visible one: a space, a newline or a NUL in merges.txt would
    break its "a b" lines, and would be unreadable anyway. The 188 bytes that are printable
    Latin-1 characters ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68
    (controls, space, the no-break and soft hyphens) are given U+0100, U+0101, ... in byte
    order. So the space 0x20 is 'Ġ' (U+0120) and the newline 'Ċ', which is why RoBERTa's
    pieces read "Ġcat" and "ĊĊ". The table must be exactly this one: the vocabulary is
    written in it.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    others = [byte for byte in range(256) if byte not in table]
    table.update({byte: chr(256 + n) for n, byte in enumerate(others)})
    return dict(sorted(table.items()))


@functools.cache
def char_to_byte() -> dict[str, bytes]:
    return {char: bytes([byte]) for byte, char in byte_to_char().items()}


# --- pre-tokenization: text -> words ---------------------------------------------------


def character_class(first_letter: str) -> str:
    """A `re` character class body for every code point whose Unicode category starts with
    `first_letter` ("L": letters, what `\\p{L}` means; "N": numbers, `\\p{N}`), as ranges."""
    ranges, start = [], None
    for cp in range(sys.maxunicode + 2):
        inside = cp <= sys.maxunicode and unicodedata.category(chr(cp))[0] == first_letter
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            ranges.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(ranges)


@functools.cache
def pretokenizer() -> re.Pattern:
    """GPT-2's pre-tokenization pattern, for Python's `re`.

    GPT-2 writes it with the third-party `regex` package, for the Unicode classes `\\p{L}`
    (letters) and `\\p{N}` (numbers) that `re` lacks:

        's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

    We build those two classes from `unicodedata` instead (once per process), so minibert needs no
    extra dependency for one pattern. Read left to right, the first alternative that matches
    wins: a contraction (lowercase only, as in GPT-2: "'S" is a symbol and a letter); letters,
    digits or other symbols with an optional space in front; whitespace not followed by a
    non-space — so in "a   b" the run gives up its last space to " b"; any other whitespace.
    """
    letters, numbers = character_class("L"), character_class("N")
    pattern = (f"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+| ?[^{WHITESPACE}{letters}{numbers}]+"
               f"|[{WHITESPACE}]+(?![^{WHITESPACE}])|[{WHITESPACE}]+")
    return re.compile(pattern)


# --- BPE: one word -> pieces --------------------------------------------------------------


def merge(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply learned merges to a word's symbols (its byte characters), lowest rank first.

    Each round finds the adjacent pair with the lowest rank and joins every occurrence of it,
    left to right (in "a a a" only the first two); the word is done when no adjacent pair
    has a rank. This replays the order in which training learned the merges.
    """
    while len(symbols) > 1:
        best = min(zip(symbols, symbols[1:]), key=lambda pair: ranks.get(pair, len(ranks)))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                merged.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    return symbols


# --- the tokenizer ------------------------------------------------------------------------


class ByteLevelBPETokenizer(Tokenizer):
    """RoBERTa's tokenizer over a byte-level BPE vocabulary.

    Built from plain data, so any source of a vocabulary can make one (`load` reads
    vocab.json + merges.txt; a tokenizer.json's BPE model carries the same two things):

    vocab:            piece (in `byte_to_char`'s alphabet) -> id, as in vocab.json; it must
                      hold the five special tokens.
    merges:           (left, right) pairs in rank order, as the lines of merges.txt.
    add_prefix_space: put a space before text that does not start with one, so its first word
                      is spelled like a word inside a sentence ("Ġcat"). RoBERTa: False.
    cls_token ... mask_token: the special tokens' spellings (RoBERTa's by default).
    """

    kind = "byte-level BPE"

    def __init__(
        self,
        vocab: dict[str, int],
        merges: Sequence[tuple[str, str]],
        add_prefix_space: bool = False,
        *,
        cls_token: str = "<s>",
        sep_token: str = "</s>",
        pad_token: str = "<pad>",
        unk_token: str = "<unk>",
        mask_token: str = "<mask>",
    ):
        if not isinstance(add_prefix_space, bool):
            raise TypeError(f"add_prefix_space must be True or False, got {add_prefix_space!r}")
        bad = next((item for item in vocab.items() if not (isinstance(item[0], str) and type(item[1]) is int and item[1] >= 0)), None)
        if bad is not None:
            raise ValueError(f"the vocabulary maps {bad[0]!r} to {bad[1]!r}; it must map each piece to an id >= 0")
        self.vocab = dict(vocab)
        self.merges = [tuple(pair) for pair in merges]
        for rank, pair in enumerate(self.merges):
            if len(pair) != 2 or not all(isinstance(part, str) and part for part in pair):
                raise ValueError(f"merge {rank} is {pair!r}; each merge must be two non-empty pieces, (left, right)")
            if "".join(pair) not in self.vocab:
                raise ValueError(f"merge {rank} {' '.join(pair)!r} makes {''.join(pair)!r}, which the vocabulary lacks; "
                                 f"the merges and the vocabulary are not one tokenizer's")
        self.specials = {"cls_token": cls_token, "sep_token": sep_token, "pad_token": pad_token,
                         "unk_token": unk_token, "mask_token": mask_token}
        missing = [token for token in self.specials.values() if token not in self.vocab]
        if missing:
            raise ValueError(f"the vocabulary lacks the special token(s) {' '.join(missing)}; "
                             f"add them, or name its own spellings (cls_token=..., as in tokenizer_config.json)")
        self.add_prefix_space = add_prefix_space
        self.cls_id, self.sep_id, self.pad_id, self.unk_id, self.mask_id = (self.vocab[t] for t in self.specials.values())
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.id_to_piece = {i: piece for piece, i in self.vocab.items()}
        self.cache: dict[str, tuple[list[int], list[int]]] = {}
        # Typed special tokens: the mask with the whitespace before it (its lstrip), the others as written.
        spellings = sorted(set(self.specials.values()) - {mask_token}, key=len, reverse=True)
        self.special_pattern = re.compile(
            f"([{WHITESPACE}]*{re.escape(mask_token)}|{'|'.join(map(re.escape, spellings))})")

    # --- plain data, for pickling (tokenizing worker processes receive the tokenizer) ----
    def __getstate__(self) -> dict:
        return {"vocab": self.vocab, "merges": self.merges, "add_prefix_space": self.add_prefix_space, **self.specials}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    # --- text -> ids -------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return max(self.vocab.values()) + 1

    def tokenize_word(self, word: str) -> list[int]:
        """A word of pre-split text with the space before it ("Ġword"), as inside a sentence:
        transformers asks for add_prefix_space=True on such input for the same reason."""
        return self.tokenize_to_ids(" " + word)

    def tokenize_to_ids(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"expected text as a str, got {type(text).__name__}")
        ids = []
        for n, chunk in enumerate(self.special_pattern.split(text)):
            if n % 2:  # a typed special token (odd places of a split on a group)
                ids.append(self.vocab[chunk.lstrip(WHITESPACE)])
            elif chunk:
                if self.add_prefix_space and not chunk.startswith(" "):
                    chunk = " " + chunk
                for word in pretokenizer().findall(chunk):
                    ids.extend(self.word_ids(word))
        return ids

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[Span]]:
        """As `Tokenizer.tokenize_with_offsets`. A piece covers the characters of its bytes (each
        piece holding a byte of a multi-byte character covers that character), without the
        spaces at its ends ("Ġcat" covers "cat"), as the `tokenizers` library's trim_offsets
        does; a space `add_prefix_space` adds is no character of the text. A typed <mask>
        covers "<mask>", not the whitespace it takes along."""
        if not isinstance(text, str):
            raise TypeError(f"expected text as a str, got {type(text).__name__}")
        ids: list[int] = []
        spans: list[Span] = []
        for start, end, special in special_matches(self.special_pattern, text):
            if special is not None:
                ids.append(self.vocab[special.lstrip(WHITESPACE)])
                spans.append(trim_spaces(text, (start, end), WHITESPACE))
                continue
            chunk = text[start:end]
            added = self.add_prefix_space and not chunk.startswith(" ")
            chunk = " " + chunk if added else chunk
            for match in pretokenizer().finditer(chunk):
                word_ids, lengths = self.word_pieces(match.group())
                ids += word_ids
                char_of_byte = [n for n, char in enumerate(match.group(), start - added + match.start())
                                for _ in range(len(char.encode("utf-8")))]
                at = 0
                for length in lengths:
                    span = max(start, char_of_byte[at]), char_of_byte[at + length - 1] + 1
                    spans.append(trim_spaces(text, span, " "))
                    at += length
        return ids, spans

    def word_ids(self, word: str) -> list[int]:
        """One pre-tokenized word -> its pieces' ids; remembered, since words repeat."""
        return self.word_pieces(word)[0]

    def word_pieces(self, word: str) -> tuple[list[int], list[int]]:
        """One pre-tokenized word -> its pieces' ids and how many bytes each spells; remembered."""
        found = self.cache.get(word)
        if found is None:
            try:
                # bytes -> Latin-1 characters of the same numbers -> the vocabulary's characters, in C
                spelled = word.encode("utf-8").decode("latin-1").translate(byte_to_char())
            except UnicodeEncodeError:
                raise ValueError(f"the text holds a lone surrogate {word!r}, which is no character; "
                                 f"decode the text with errors='replace'") from None
            pieces = merge(list(spelled), self.ranks)
            found = [self.vocab.get(piece, self.unk_id) for piece in pieces], [len(piece) for piece in pieces]
            if len(self.cache) >= CACHE_SIZE:
                self.cache.clear()
            self.cache[word] = found
        return found

    # --- ids -> text -------------------------------------------------------------------------
    def decode_ids(self, ids: Sequence[int]) -> str:
        """Ids -> text: the pieces' characters back to bytes, the bytes as UTF-8.

        Any sequence of ids is some bytes, but not always valid UTF-8 (a piece may hold half a
        character); such bytes become U+FFFD, as in transformers (errors="replace").
        """
        to_byte = char_to_byte()
        data = b"".join(to_byte.get(char) or char.encode("utf-8") for char in "".join(map(self.piece, ids)))
        return data.decode("utf-8", errors="replace")

    def piece(self, token_id: int) -> str:
        """The piece as the vocabulary spells it ("Ġcat": the Ġ is its leading space)."""
        piece = self.id_to_piece.get(int(token_id))
        if piece is None:
            raise ValueError(f"id {token_id} is not in the vocabulary (ids 0..{self.vocab_size - 1})")
        return piece

    @property
    def word_starts(self) -> torch.Tensor:
        """Bool [vocab_size]: True for pieces that begin a word (a leading space, 'Ġ') and for
        the special tokens. Whole-word masking masks all pieces of a word together."""
        space, special = byte_to_char()[ord(" ")], self.special_ids | {self.unk_id}
        starts = torch.zeros(self.vocab_size, dtype=torch.bool)
        for piece, i in self.vocab.items():
            starts[i] = piece.startswith(space) or i in special
        return starts

    def join(self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
        """RoBERTa's layout: `<s> A </s>`, or `<s> A </s></s> B </s>`; one segment type, so all 0."""
        ids = [self.cls_id, *ids_a, self.sep_id]
        if ids_b is not None:
            ids += [self.sep_id, *ids_b, self.sep_id]
        return ids, [0] * len(ids)

    # --- files ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: str | Path) -> "ByteLevelBPETokenizer":
        """vocab.json + merges.txt from `directory`, with the special-token spellings and
        add_prefix_space of its tokenizer_config.json / special_tokens_map.json if present."""
        directory = Path(directory)
        vocab = read_json_object(directory / VOCAB_FILE, "it must map each piece to its id, as a RoBERTa vocab.json does")
        merges = read_merges(directory / MERGES_FILE)
        fix = "fix or delete it (add_prefix_space and the special tokens are read from it)"
        flags = read_flags(directory / CONFIG_FILE, {"add_prefix_space": False}, fix)
        try:
            return cls(vocab, merges, **flags, **read_special_tokens(directory))
        except ValueError as error:
            raise ValueError(f"{directory / VOCAB_FILE} + {MERGES_FILE}: {error}") from None

    def save(self, directory: str | Path) -> Path:
        """Write vocab.json, merges.txt and tokenizer_config.json (Hugging Face's names) into
        `directory`; transformers' AutoTokenizer opens it as a RobertaTokenizer with the same ids.
        The mask token is written with its lstrip, which transformers would not assume."""
        directory = Path(directory)
        unwritable = next((pair for pair in self.merges if any(c in "".join(pair) for c in " \n")), None)
        if unwritable is not None:
            raise ValueError(f"the merge {unwritable!r} holds a space or newline, which a merges.txt line cannot; "
                             f"save the tokenizer in the format it came from")
        write_atomic(directory / VOCAB_FILE, json.dumps(self.vocab, ensure_ascii=False, indent=2) + "\n")
        write_atomic(directory / MERGES_FILE, "".join(f"{line}\n" for line in [MERGES_HEADER, *map(" ".join, self.merges)]))
        mask = {"content": self.specials["mask_token"], "lstrip": True, "rstrip": False, "normalized": False,
                "single_word": False, "special": True, "__type": "AddedToken"}
        write_json(directory / CONFIG_FILE, {
            "tokenizer_class": "RobertaTokenizer", "add_prefix_space": self.add_prefix_space,
            "bos_token": self.specials["cls_token"], "eos_token": self.specials["sep_token"], **self.specials, "mask_token": mask})
        return directory


def read_merges(path: Path) -> list[tuple[str, str]]:
    """The merges of a merges.txt in rank order: an optional `#version` first line, then "a b" lines."""
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name} in {path.parent}; a byte-level BPE tokenizer needs vocab.json and merges.txt")
    lines = path.read_text(encoding="utf-8").split("\n")
    merges = []
    for number, line in enumerate(lines, start=1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{path}, line {number}: {line!r} is not one merge; each line must be two pieces "
                             f"separated by one space, \"a b\"")
        merges.append((parts[0], parts[1]))
    return merges


def read_special_tokens(directory: Path) -> dict[str, str]:
    """The special-token spellings the folder names (`base.special_spellings`). `<s>` plays
    [CLS] and `</s>` [SEP], so bos/eos stand in for cls/sep when those are absent."""
    def read(name: str) -> dict | None:
        path = directory / name
        return read_json_object(path, "fix or delete it (the special tokens' spellings are read from it)") if path.is_file() else None

    named = special_spellings(read)
    found = {role: named.get(role, named.get(STANDS_IN.get(role, ""))) for role in ROBERTA_SPECIALS}
    return {role: value for role, value in found.items() if value is not None}
