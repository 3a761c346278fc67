"""A `tokenizer.json` read directly: the one tokenizer file today's transformers writes.

`tokenizer.json` is the format of the `tokenizers` library: a tokenizer described as data, a
pipeline of five steps (DESIGN.md section 7). A folder saved by transformers 5 holds only it
and `tokenizer_config.json`, so this module is how minibert opens any model fine-tuned with a
current transformers. It runs the pipeline itself, with no dependency on `tokenizers`:

1. **added tokens** ("[CLS]", "<mask>", ...) are cut out of the text first and become their
   ids, so a special token typed in the text is that token. Those marked `normalized: false`
   are found in the raw text; the others in the normalized text, spelled as normalized. A
   match is the leftmost, longest one; `single_word` refuses a match inside a word, `lstrip`
   / `rstrip` make the token swallow the whitespace before / after it;
2. the **normalizer** rewrites each remaining stretch of text (lowercasing, accents, Unicode
   forms, SentencePiece's character map);
3. the **pre-tokenizer** cuts it into words (on whitespace and punctuation as BERT does, or
   into ▁-prefixed words as SentencePiece does, or GPT-2's byte-level pieces);
4. the **model** cuts each word into vocabulary ids (WordPiece, Unigram or byte-level BPE);
5. the **post-processor** lays the ids of one text or a pair out between the special tokens
   ([CLS] A [SEP] B [SEP], or RoBERTa's <s> A </s></s> B </s>) with their segment ids.

The `decoder` turns ids back into text. Each step is a small function built from its JSON
spec by one of the tables below; a component or setting outside them is a one-line error
naming it and the file, never a tokenization that silently differs. The rules follow the
`tokenizers` library (its ids are what a checkpoint was trained with), e.g. its lowercasing is
letter by letter, so a word-final "Σ" becomes "σ", not Python's "ς".

transformers 5 rebuilds the normalizer and pre-tokenizer of a family's tokenizer class from
that class's own settings in `tokenizer_config.json` and takes only the vocabulary and the
post-processor from `tokenizer.json`; in the folders it writes the two agree, and
tests/test_tokenizer_json.py checks our ids against its AutoTokenizer on such folders.

A `JsonTokenizer` keeps the files it was read from and writes them back unchanged in `save`,
so a folder it saves loads in transformers with the same ids.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import unicodedata
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..files import parse_json_object, write_atomic
from .base import Tokenizer
from .byte_bpe import ByteLevelBPETokenizer, byte_to_char, char_to_byte, pretokenizer
from .charsmap import CharsMap
from .unigram import Unigram
from .wordpiece import FAST_TOKENIZER_CJK_RANGES, clean_text, separate_cjk, split_punctuation, strip_accents, wordpiece

FILE_NAME = "tokenizer.json"
# Files that only accompany a layout (settings, special-token spellings) in Hugging Face folders.
COMPANION_FILES = ("tokenizer_config.json", "special_tokens_map.json")
FIX = "fix it, or save the tokenizer again with transformers"
ROLES = ("pad", "unk", "cls", "sep", "mask")
CONVENTIONAL = {"pad": ("[PAD]", "<pad>"), "unk": ("[UNK]", "<unk>"), "cls": ("[CLS]", "<s>"),
                "sep": ("[SEP]", "</s>"), "mask": ("[MASK]", "<mask>")}

# Unicode's White_Space characters: what `tokenizers` splits on and strips.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                        "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# Letters Unicode counts as alphabetic although their category is a symbol (circled letters).
ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))

Split = tuple[str, bool]  # a stretch of text, and whether it starts at the very beginning of the input


class Unsupported(ValueError):
    """A component or setting of tokenizer.json this reader does not implement."""


# --- characters ---------------------------------------------------------------------------------


def is_word_char(char: str) -> bool:
    """A regex `\\w` character as `tokenizers` (Rust's regex crate) sees it: letters, marks,
    decimal digits, letter numbers, connectors, the joiners. Python's `\\w` differs on marks
    and on digits like "²"."""
    category = unicodedata.category(char)
    return (category[0] in "LM" or category in ("Nd", "Nl", "Pc") or char in "\u200c\u200d"
            or any(lo <= ord(char) <= hi for lo, hi in ALPHABETIC_SYMBOLS))


def lowercase(text: str) -> str:
    """Lowercase letter by letter, as `tokenizers` does (no final-sigma rule)."""
    return "".join(char.lower() for char in text)


def strip_marks(text: str) -> str:
    """Drop every combining mark (categories Mn, Mc, Me): the `StripAccents` normalizer, which
    follows an NFD or NFKD step that has split the accents off their letters."""
    return "".join(char for char in text if unicodedata.category(char)[0] != "M")


# --- reading the JSON ---------------------------------------------------------------------------


class Spec:
    """One component's JSON object, read with its file's name at hand for errors."""

    def __init__(self, value, kind: str, where: str):
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise ValueError(f"{where}: a {kind} must be a JSON object with a \"type\", got {json.dumps(value)[:80]}")
        self.value, self.kind, self.where = value, kind, where
        self.type = value["type"]

    def get(self, key: str, default=None, allowed: tuple | None = None):
        value = self.value.get(key, default)
        if value is None:
            value = default
        if allowed is not None and value not in allowed:
            raise Unsupported(f"{self.where}: the {self.kind} {self.type} with {key}={json.dumps(value)} is not "
                              f"supported (only {', '.join(json.dumps(a) for a in allowed)})")
        return value

    def require(self, key: str, kinds: type | tuple[type, ...]):
        value = self.value.get(key)
        if not isinstance(value, kinds):
            raise ValueError(f"{self.where}: the {self.kind} {self.type} needs \"{key}\", got {json.dumps(value)[:80]}")
        return value

    def parts(self, key: str, kind: str) -> list["Spec"]:
        return [Spec(part, kind, self.where) for part in self.require(key, list)]


def build(table: dict[str, tuple[Callable, str]], value, kind: str, where: str):
    """The component `value` describes, made by its type's builder in `table` (type -> (builder,
    the settings it reads)). An unknown type or setting is refused: it would tokenize differently."""
    spec = Spec(value, kind, where)
    if spec.type not in table:
        raise Unsupported(f"{where}: the {kind} {spec.type!r} is not supported (supported: {', '.join(table)})")
    builder, keys = table[spec.type]
    unknown = sorted(set(spec.value) - {"type", *keys.split()})
    if unknown:
        raise Unsupported(f"{where}: the {kind} {spec.type} setting {unknown[0]!r} is not supported (only {keys or 'none'})")
    return builder(spec)


# --- 2. normalizers: text -> text ------------------------------------------------------------


def bert_normalizer(spec: Spec) -> Callable[[str], str]:
    """BERT's text cleanup: drop control characters, isolate CJK ideographs, strip accents
    (by default exactly when lowercasing), lowercase."""
    clean, cjk = spec.get("clean_text", True, (True, False)), spec.get("handle_chinese_chars", True, (True, False))
    lower = spec.get("lowercase", True, (True, False))
    accents = spec.get("strip_accents", lower, (True, False))

    def normalize(text: str) -> str:
        if clean:
            text = clean_text(text)
        if cjk:
            text = separate_cjk(text, FAST_TOKENIZER_CJK_RANGES)
        if accents:
            text = strip_accents(text)
        return lowercase(text) if lower else text
    return normalize


def replace_normalizer(spec: Spec) -> Callable[[str], str]:
    pattern, content = spec.require("pattern", dict), spec.require("content", str)
    if set(pattern) == {"String"} and isinstance(pattern["String"], str) and pattern["String"]:
        target = pattern["String"]
        return lambda text: text.replace(target, content)
    if set(pattern) == {"Regex"} and isinstance(pattern["Regex"], str):
        regex = python_regex(pattern["Regex"], spec)
        return lambda text: regex.sub(lambda _: content, text) if text else text
    raise Unsupported(f"{spec.where}: the normalizer Replace with pattern {json.dumps(pattern)} is not supported "
                      "(only a non-empty {\"String\": ...} or a {\"Regex\": ...})")


def python_regex(pattern: str, spec: Spec) -> re.Pattern:
    """An Oniguruma pattern (what `tokenizers` compiles) as Python's `re`: the same syntax but
    for the end-of-text anchors (\\z is Python's \\Z; Oniguruma's \\Z also matches before a
    final newline). A construct Python lacks (\\p{L}, \\h, ...) is refused."""
    translated = re.sub(r"\\\\|\\z|\\Z", lambda m: {"\\z": r"\Z", "\\Z": r"(?=\n?\Z)"}.get(m.group(), m.group()), pattern)
    try:
        return re.compile(translated)
    except re.error as error:
        raise Unsupported(f"{spec.where}: the {spec.kind} {spec.type} pattern {pattern!r} uses regex syntax this "
                          f"reader does not support ({error})") from None


def precompiled_normalizer(spec: Spec) -> Callable[[str], str]:
    try:
        blob = base64.b64decode(spec.require("precompiled_charsmap", str), validate=True)
        charsmap = CharsMap(blob) if blob else None
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"{spec.where}: the normalizer Precompiled has an unreadable precompiled_charsmap ({error})") from None
    return charsmap.replace if charsmap else (lambda text: text)


def sequence_normalizer(spec: Spec) -> Callable[[str], str]:
    steps = [build(NORMALIZERS, part.value, "normalizer", spec.where) for part in spec.parts("normalizers", "normalizer")]

    def normalize(text: str) -> str:
        for step in steps:
            text = step(text)
        return text
    return normalize


def unicode_form(form: str) -> Callable[[Spec], Callable[[str], str]]:
    return lambda spec: lambda text: unicodedata.normalize(form, text)


NORMALIZERS: dict[str, tuple[Callable[[Spec], Callable[[str], str]], str]] = {
    "BertNormalizer": (bert_normalizer, "clean_text handle_chinese_chars strip_accents lowercase"),
    "Lowercase": (lambda spec: lowercase, ""),
    **{form: (unicode_form(form), "") for form in ("NFD", "NFKD", "NFC", "NFKC")},
    "StripAccents": (lambda spec: strip_marks, ""),
    "Replace": (replace_normalizer, "pattern content"),
    "Precompiled": (precompiled_normalizer, "precompiled_charsmap"),
    "Sequence": (sequence_normalizer, "normalizers"),
}


# --- 3. pre-tokenizers: stretches of text -> words ---------------------------------------------
# Each takes one stretch and returns (start, word) pairs; `pre_tokenize` keeps, for each word,
# whether it still starts the input (Metaspace's prepend_scheme "first" asks).


def runs(text: str, kind: Callable[[str], object], keep: Callable[[object], bool]) -> list[tuple[int, str]]:
    """Maximal runs of characters of one kind, where `keep(kind)`, with their start positions."""
    out, start = [], 0
    for key, group in itertools.groupby(text, kind):
        length = len(list(group))
        if keep(key):
            out.append((start, text[start:start + length]))
        start += length
    return out


def whitespace_split(text: str) -> list[tuple[int, str]]:
    return runs(text, lambda char: char in WHITE_SPACE, lambda space: not space)


def bert_pre_tokenizer(spec: Spec):
    """Whitespace splits, each punctuation character a word of its own (wordpiece.py's rules)."""
    def pre_tokenize(text: str) -> list[tuple[int, str]]:
        out = []
        for start, word in whitespace_split(text):
            for piece in split_punctuation(word):
                out.append((start, piece))
                start += len(piece)
        return out
    return pre_tokenize


def whitespace_pre_tokenizer(spec: Spec):
    """`\\w+|[^\\w\\s]+`: runs of word characters and runs of other non-space characters."""
    def kind(char: str) -> int:
        return 0 if char in WHITE_SPACE else 1 if is_word_char(char) else 2
    return lambda text: runs(text, kind, lambda k: k != 0)


def metaspace_pre_tokenizer(spec: Spec):
    """SentencePiece's convention: spaces become ▁ (the replacement), a ▁ is put before the text
    (always, only before the start of the input, or never), and each word starts at a ▁."""
    replacement = spec.require("replacement", str)
    if len(replacement) != 1:
        raise ValueError(f"{spec.where}: the pre_tokenizer Metaspace needs a one-character replacement, got {replacement!r}")
    add_prefix = spec.get("add_prefix_space", True, (True, False))
    scheme = spec.get("prepend_scheme", "always" if add_prefix else "never", ("always", "first", "never"))
    if not add_prefix and scheme != "never":
        raise ValueError(f"{spec.where}: the pre_tokenizer Metaspace has add_prefix_space=false but prepend_scheme={scheme}")
    split = spec.get("split", True, (True, False))

    def pre_tokenize(text: str, at_start: bool) -> list[tuple[int, str]]:
        text = text.replace(" ", replacement)
        if (scheme == "always" or (scheme == "first" and at_start)) and not text.startswith(replacement):
            text = replacement + text
        if not split:
            return [(0, text)]
        starts = [0, *(i for i, char in enumerate(text) if char == replacement and i > 0), len(text)]
        return [(a, text[a:b]) for a, b in zip(starts, starts[1:])]
    pre_tokenize.needs_start = True
    return pre_tokenize


def byte_level_pre_tokenizer(spec: Spec):
    """GPT-2's pre-tokenization (byte_bpe.py's pattern), with a space put first if
    add_prefix_space. The words stay text here; the byte-level BPE model spells their bytes."""
    prefix = spec.get("add_prefix_space", True, (True, False))
    use_regex = spec.get("use_regex", True, (True, False))

    def pre_tokenize(text: str) -> list[tuple[int, str]]:
        if prefix and not text.startswith(" "):
            text = " " + text
        return [(m.start(), m.group()) for m in pretokenizer().finditer(text)] if use_regex else [(0, text)]
    return pre_tokenize


def sequence_pre_tokenizer(spec: Spec):
    steps = [build(PRE_TOKENIZERS, part.value, "pre_tokenizer", spec.where)
             for part in spec.parts("pretokenizers", "pre_tokenizer")]

    def pre_tokenize(splits: list[Split]) -> list[Split]:
        for step in steps:
            splits = step(splits)
        return splits
    return pre_tokenize


def on_each_split(pre_tokenize) -> Callable[[list[Split]], list[Split]]:
    """Apply a one-stretch pre-tokenizer to every split; a word starts the input only if its
    split did and it begins at the split's start. Empty words are dropped."""
    def apply(splits: list[Split]) -> list[Split]:
        out = []
        for text, at_start in splits:
            words = pre_tokenize(text, at_start) if getattr(pre_tokenize, "needs_start", False) else pre_tokenize(text)
            out.extend((word, at_start and start == 0) for start, word in words if word)
        return out
    return apply


BYTE_LEVEL_KEYS = "add_prefix_space trim_offsets use_regex"
METASPACE_KEYS = "replacement prepend_scheme add_prefix_space split str_rep"
PRE_TOKENIZERS: dict[str, tuple[Callable[[Spec], Callable[[list[Split]], list[Split]]], str]] = {
    "BertPreTokenizer": (lambda spec: on_each_split(bert_pre_tokenizer(spec)), ""),
    "WhitespaceSplit": (lambda spec: on_each_split(whitespace_split), ""),
    "Whitespace": (lambda spec: on_each_split(whitespace_pre_tokenizer(spec)), ""),
    "Metaspace": (lambda spec: on_each_split(metaspace_pre_tokenizer(spec)), METASPACE_KEYS),
    "ByteLevel": (lambda spec: on_each_split(byte_level_pre_tokenizer(spec)), BYTE_LEVEL_KEYS),
    "Sequence": (sequence_pre_tokenizer, "pretokenizers"),
}


# --- 4. models: word -> ids --------------------------------------------------------------------


class Model:
    """A vocabulary (token -> id), how a word becomes ids, and how a piece that begins a word
    looks (`begins_word`)."""

    vocab: dict[str, int]
    unk_token: str | None

    def __call__(self, word: str) -> list[int]:
        raise NotImplementedError

    def use_specials(self, spellings: dict[str, str]) -> None:
        """Told the special tokens' spellings (role_token -> token) once they are known."""

    def begins_word(self, piece: str) -> bool:
        raise NotImplementedError


class WordPieceModel(Model):
    def __init__(self, spec: Spec):
        self.vocab = vocabulary(spec)
        self.unk_token = spec.require("unk_token", str)
        if self.unk_token not in self.vocab:
            raise ValueError(f"{spec.where}: the WordPiece unk_token {self.unk_token!r} is not in its vocabulary")
        self.prefix = spec.get("continuing_subword_prefix", "##")
        self.max_chars = spec.get("max_input_chars_per_word", 100)

    def __call__(self, word: str) -> list[int]:
        return [self.vocab[piece] for piece in wordpiece(word, self.vocab, self.unk_token, self.prefix, self.max_chars)]

    def begins_word(self, piece: str) -> bool:
        return not piece.startswith(self.prefix)


class UnigramModel(Model):
    def __init__(self, spec: Spec):
        pieces = spec.require("vocab", list)
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], (int, float))
                   for p in pieces):
            raise ValueError(f"{spec.where}: a Unigram vocab must be a list of [piece, score] pairs")
        unk_id = spec.get("unk_id")
        if unk_id is not None and not (isinstance(unk_id, int) and 0 <= unk_id < len(pieces)):
            raise ValueError(f"{spec.where}: the Unigram unk_id {unk_id!r} is not an index into its {len(pieces)} pieces")
        self.segment = Unigram(pieces, unk_id, spec.get("byte_fallback", False, (True, False)))
        self.vocab = self.segment.ids
        self.unk_token = None if unk_id is None else pieces[unk_id][0]
        self.mark = "▁"

    def __call__(self, word: str) -> list[int]:
        return self.segment(word)

    def begins_word(self, piece: str) -> bool:
        return piece.startswith(self.mark)


class BPEModel(Model):
    """Byte-level BPE (RoBERTa): a word's UTF-8 bytes in GPT-2's alphabet, merged by rank —
    byte_bpe.py's `ByteLevelBPETokenizer` over the file's vocab and merges does it."""

    def __init__(self, spec: Spec):
        self.vocab, self.where = vocabulary(spec), spec.where
        for key, allowed in (("dropout", None), ("continuing_subword_prefix", ""), ("end_of_word_suffix", ""),
                             ("byte_fallback", False), ("ignore_merges", False)):
            spec.get(key, allowed, (allowed,))
        self.merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec.require("merges", list)]
        self.unk_token = spec.get("unk_token")
        self.bpe: ByteLevelBPETokenizer | None = None

    def use_specials(self, spellings: dict[str, str]) -> None:
        try:
            self.bpe = ByteLevelBPETokenizer(self.vocab, self.merges, **spellings)
        except ValueError as error:
            raise ValueError(f"{self.where}: {error}") from None

    def __call__(self, word: str) -> list[int]:
        return self.bpe.word_ids(word)

    def begins_word(self, piece: str) -> bool:
        return piece.startswith(byte_to_char()[ord(" ")])


def vocabulary(spec: Spec) -> dict[str, int]:
    vocab = spec.require("vocab", dict)
    if not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise ValueError(f"{spec.where}: the {spec.type} vocab must map tokens to non-negative integer ids")
    return vocab


MODELS: dict[str, tuple[Callable[[Spec], Model], str]] = {
    "WordPiece": (WordPieceModel, "unk_token continuing_subword_prefix max_input_chars_per_word vocab"),
    "Unigram": (UnigramModel, "unk_id vocab byte_fallback"),
    "BPE": (BPEModel, "dropout unk_token continuing_subword_prefix end_of_word_suffix fuse_unk byte_fallback ignore_merges vocab merges"),
}


# --- 5. post-processors: the layout of one text or a pair ----------------------------------------
# A template is a list of parts: ("A" or "B", type id) for a text, (ids, type id) for special tokens.

Template = list[tuple[object, int]]


def template_processing(spec: Spec) -> tuple[Template, Template]:
    specials = spec.require("special_tokens", dict)

    def template(key: str) -> Template:
        parts = []
        for part in spec.require(key, list):
            (name, body), = part.items() if isinstance(part, dict) and len(part) == 1 else [(None, None)]
            if name == "Sequence" and body.get("id") in ("A", "B"):
                parts.append((body["id"], int(body.get("type_id", 0))))
            elif name == "SpecialToken" and body.get("id") in specials:
                parts.append((list(specials[body["id"]].get("ids", [])), int(body.get("type_id", 0))))
            else:
                raise ValueError(f"{spec.where}: the TemplateProcessing part {json.dumps(part)[:80]} is neither $A/$B nor a listed special token")
        return parts
    return template("single"), template("pair")


def bert_processing(spec: Spec) -> tuple[Template, Template]:
    """[CLS] A [SEP] (segment 0), B [SEP] in segment 1."""
    (_, cls), (_, sep) = spec.require("cls", list), spec.require("sep", list)
    return ([([cls], 0), ("A", 0), ([sep], 0)],
            [([cls], 0), ("A", 0), ([sep], 0), ("B", 1), ([sep], 1)])


def roberta_processing(spec: Spec) -> tuple[Template, Template]:
    """<s> A </s> and <s> A </s></s> B </s>, all in segment 0 (RoBERTa has one segment type)."""
    (_, cls), (_, sep) = spec.require("cls", list), spec.require("sep", list)
    return ([([cls], 0), ("A", 0), ([sep], 0)],
            [([cls], 0), ("A", 0), ([sep, sep], 0), ("B", 0), ([sep], 0)])


def sequence_processing(spec: Spec) -> tuple[Template, Template] | None:
    layouts = [layout for part in spec.parts("processors", "post_processor")
               if (layout := build(POST_PROCESSORS, part.value, "post_processor", spec.where)) is not None]
    if len(layouts) > 1:
        raise Unsupported(f"{spec.where}: a post_processor Sequence with {len(layouts)} layouts is not supported (only one)")
    return layouts[0] if layouts else None


POST_PROCESSORS: dict[str, tuple[Callable[[Spec], tuple[Template, Template] | None], str]] = {
    "TemplateProcessing": (template_processing, "single pair special_tokens"),
    "BertProcessing": (bert_processing, "sep cls"),
    "RobertaProcessing": (roberta_processing, "sep cls trim_offsets add_prefix_space"),
    "ByteLevel": (lambda spec: None, BYTE_LEVEL_KEYS),  # only moves character offsets; no ids
    "Sequence": (sequence_processing, "processors"),
}


# --- decoders: token strings -> text ------------------------------------------------------------


def wordpiece_decoder(spec: Spec):
    prefix = spec.get("prefix", "##")
    cleanup = spec.get("cleanup", True, (True, False))

    def decode(tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i and token.startswith(prefix):
                token = token[len(prefix):]
            elif i:
                token = " " + token
            out.append(clean_up_spaces(token) if cleanup else token)
        return out
    return decode


def clean_up_spaces(text: str) -> str:
    """The spaces tokenization put before punctuation and inside English contractions, removed."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


def metaspace_decoder(spec: Spec):
    replacement = spec.require("replacement", str)
    prefixed = spec.get("prepend_scheme", "always" if spec.get("add_prefix_space", True) else "never") != "never"
    return lambda tokens: [token.replace(replacement, "" if i == 0 and prefixed else " ") for i, token in enumerate(tokens)]


def byte_fallback_decoder(spec: Spec):
    """Runs of <0xNN> tokens -> the text their bytes spell (U+FFFD per byte if they spell none)."""
    def decode(tokens: list[str]) -> list[str]:
        out = []
        for is_byte, group in itertools.groupby(tokens, lambda t: re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t) is not None):
            group = list(group)
            if not is_byte:
                out.extend(group)
                continue
            data = bytes(int(t[3:5], 16) for t in group)
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" for _ in data)
        return out
    return decode


def strip_decoder(spec: Spec):
    content, start, stop = spec.require("content", str), spec.get("start", 0), spec.get("stop", 0)

    def strip(token: str) -> str:
        for _ in range(start):
            token = token[len(content):] if token.startswith(content) else token
        for _ in range(stop):
            token = token[:-len(content)] if content and token.endswith(content) else token
        return token
    return lambda tokens: [strip(token) for token in tokens]


def replace_decoder(spec: Spec):
    normalize = replace_normalizer(spec)
    return lambda tokens: [normalize(token) for token in tokens]


def byte_level_decoder(spec: Spec):
    """GPT-2's byte alphabet back to bytes (a token with a character outside it, such as an
    added token, is taken as its own UTF-8), the bytes read as UTF-8."""
    to_byte = char_to_byte()

    def decode(tokens: list[str]) -> list[str]:
        data = b"".join(b"".join(to_byte[c] for c in t) if all(c in to_byte for c in t) else t.encode("utf-8") for t in tokens)
        return [data.decode("utf-8", errors="replace")]
    return decode


def sequence_decoder(spec: Spec):
    steps = [build(DECODERS, part.value, "decoder", spec.where) for part in spec.parts("decoders", "decoder")]

    def decode(tokens: list[str]) -> list[str]:
        for step in steps:
            tokens = step(tokens)
        return tokens
    return decode


DECODERS: dict[str, tuple[Callable[[Spec], Callable[[list[str]], list[str]]], str]] = {
    "WordPiece": (wordpiece_decoder, "prefix cleanup"),
    "Metaspace": (metaspace_decoder, METASPACE_KEYS),
    "ByteLevel": (byte_level_decoder, BYTE_LEVEL_KEYS),
    "ByteFallback": (byte_fallback_decoder, ""),
    "Fuse": (lambda spec: lambda tokens: ["".join(tokens)], ""),
    "Strip": (strip_decoder, "content start stop"),
    "Replace": (replace_decoder, "pattern content"),
    "Sequence": (sequence_decoder, "decoders"),
}


# --- 1. added tokens ------------------------------------------------------------------------------


class AddedTokens:
    """The tokens cut out of the text before the model sees it, as `tokenizers` finds them."""

    def __init__(self, entries: list, where: str, normalize: Callable[[str], str]):
        self.tokens: dict[int, dict] = {}
        for entry in entries:
            if not (isinstance(entry, dict) and isinstance(entry.get("id"), int) and isinstance(entry.get("content"), str)):
                raise ValueError(f"{where}: each of added_tokens needs an integer \"id\" and a string \"content\", got {json.dumps(entry)[:80]}")
            if entry["content"]:
                self.tokens[entry["id"]] = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                                            "special": False, **entry}
        self.raw = self.matcher({t["content"]: i for i, t in self.tokens.items() if not t["normalized"]})
        self.normalized = self.matcher({normalize(t["content"]): i for i, t in self.tokens.items() if t["normalized"]})

    @staticmethod
    def matcher(spellings: dict[str, int]) -> tuple[re.Pattern, dict[str, int]] | None:
        """Leftmost-longest matching: an alternation tried longest first."""
        spellings = {s: i for s, i in spellings.items() if s}
        if not spellings:
            return None
        return re.compile("|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))), spellings

    def split(self, text: str, matcher) -> list[str | int]:
        """`text` cut into stretches (str) and added token ids (int)."""
        if matcher is None or not text:
            return [text]
        pattern, ids = matcher
        out: list[str | int] = []
        done = 0
        for match in pattern.finditer(text):
            token_id = ids[match.group()]
            token = self.tokens[token_id]
            start, stop = match.span()
            if token["single_word"] and ((start > 0 and is_word_char(text[start - 1]))
                                         or (stop < len(text) and is_word_char(text[stop]))):
                continue
            if token["lstrip"]:
                while start > done and text[start - 1] in WHITE_SPACE:
                    start -= 1
            if token["rstrip"]:
                while stop < len(text) and text[stop] in WHITE_SPACE:
                    stop += 1
            if done < start:
                out.append(text[done:start])
            out.append(token_id)
            done = stop
        if done < len(text):
            out.append(text[done:])
        return out


# --- the tokenizer --------------------------------------------------------------------------------


class JsonTokenizer(Tokenizer):
    """A `tokenizer.json` (and its tokenizer_config.json) behind minibert's `Tokenizer` interface.

    `files` maps file names to their text as read; `where` names the folder in errors.
    """

    def __init__(self, files: dict[str, str], where: str = FILE_NAME):
        self.files = dict(files)
        source = f"{where}/{FILE_NAME}" if where != FILE_NAME else FILE_NAME
        spec = parse_json_object(files[FILE_NAME], source, FIX)
        for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
            if key not in spec:
                spec[key] = None
        if not isinstance(spec.get("model"), dict):
            raise ValueError(f"{source}: no \"model\" object; a tokenizer.json describes its model (WordPiece, Unigram or BPE)")
        self.model = build(MODELS, spec["model"], "model", source)
        if isinstance(self.model, BPEModel) != ("ByteLevel" in pre_tokenizer_types(spec["pre_tokenizer"])):
            raise Unsupported(f"{source}: only byte-level BPE is supported: a BPE model with a ByteLevel pre_tokenizer, "
                              f"and ByteLevel with no other model (got {spec['model'].get('type')} with "
                              f"{json.dumps(spec['pre_tokenizer'])[:60]})")
        self.normalize = (lambda text: text) if spec["normalizer"] is None else build(NORMALIZERS, spec["normalizer"], "normalizer", source)
        self.pre_tokenize = (lambda splits: splits) if spec["pre_tokenizer"] is None else build(PRE_TOKENIZERS, spec["pre_tokenizer"], "pre_tokenizer", source)
        layout = None if spec["post_processor"] is None else build(POST_PROCESSORS, spec["post_processor"], "post_processor", source)
        self.single, self.pair = layout or ([("A", 0)], [("A", 0), ("B", 1)])
        self.decode_chain = (lambda tokens: [" ".join(tokens)]) if spec["decoder"] is None else build(DECODERS, spec["decoder"], "decoder", source)
        self.added = AddedTokens(spec.get("added_tokens") or [], source, self.normalize)
        self.id_to_token = {i: token for token, i in self.model.vocab.items()}
        self.id_to_token.update((i, t["content"]) for i, t in self.added.tokens.items())
        self.token_to_id = {token: i for i, token in self.id_to_token.items()}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = self.roles(spec, source)
        self.model.use_specials({f"{role}_token": self.id_to_token[getattr(self, f"{role}_id")] for role in ROLES})

    # --- special tokens' roles -----------------------------------------------------------------
    def roles(self, spec: dict, source: str) -> list[int]:
        """The ids of pad, unk, cls, sep and mask: [CLS]/[SEP] from the post-processor's layout,
        unk from the model, then the spellings of tokenizer_config.json / special_tokens_map.json,
        then the family's conventional spellings."""
        configured = {}
        for name in reversed(COMPANION_FILES):  # tokenizer_config.json wins
            if name in self.files:
                configured.update(parse_json_object(self.files[name], name, FIX))
        single_specials = [ids for ids, _ in self.single if isinstance(ids, list)]
        found: dict[str, int] = {}
        if [part for part, _ in self.single if isinstance(part, str)] == ["A"] and len(self.single) == 3 and \
                all(len(ids) == 1 for ids in single_specials):
            found["cls"], found["sep"] = single_specials[0][0], single_specials[1][0]
        if self.model.unk_token in self.token_to_id:
            found["unk"] = self.token_to_id[self.model.unk_token]
        padding = spec.get("padding") if isinstance(spec.get("padding"), dict) else {}
        ids = []
        for role in ROLES:
            spellings = [spelling(configured.get(f"{role}_token")), *(CONVENTIONAL[role])]
            if role == "pad":
                spellings.insert(1, padding.get("pad_token"))
            token_id = found.get(role, next((self.token_to_id[s] for s in spellings if s in self.token_to_id), None))
            if token_id is None:
                raise ValueError(f"{source}: no {role} token found (looked for {', '.join(repr(s) for s in spellings if s)}); "
                                 f"name it as {role}_token in tokenizer_config.json")
            ids.append(token_id)
        return ids

    # --- text -> ids -------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return max(self.id_to_token) + 1

    def tokenize_to_ids(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"expected text as a str, got {type(text).__name__}")
        ids: list[int] = []
        first = True  # the next stretch starts the input
        for raw in self.added.split(text, self.added.raw):
            pieces = [raw] if isinstance(raw, int) else self.added.split(self.normalize(raw), self.added.normalized)
            for piece in pieces:
                if isinstance(piece, int):
                    ids.append(piece)
                elif piece:
                    for word, _ in self.pre_tokenize([(piece, first)]):
                        ids.extend(self.model(word))
                first = False
        return ids

    def text_before_mask(self, text: str) -> str:
        """What a typed mask token leaves of the text before it: the whitespace goes too if
        the mask is declared with lstrip (RoBERTa's <mask>, a released ALBERT's [MASK])."""
        mask = self.added.tokens.get(self.mask_id, {})
        return text.rstrip("".join(WHITE_SPACE)) if mask.get("lstrip") else text

    def join(self, ids_a: Sequence[int], ids_b: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
        """The post-processor's layout: [CLS] A [SEP] (B [SEP]) or <s> A </s></s> B </s>."""
        ids, segments = [], []
        for part, type_id in (self.single if ids_b is None else self.pair):
            part_ids = list(ids_a) if part == "A" else list(ids_b) if part == "B" else part
            ids += part_ids
            segments += [type_id] * len(part_ids)
        return ids, segments

    # --- ids -> text ----------------------------------------------------------------------------------
    def piece(self, token_id: int) -> str:
        if int(token_id) not in self.id_to_token:
            raise ValueError(f"id {token_id} is not in the vocabulary (0..{self.vocab_size - 1})")
        return self.id_to_token[int(token_id)]

    def decode_ids(self, ids: Sequence[int]) -> str:
        return "".join(self.decode_chain([self.piece(i) for i in ids]))

    @property
    def word_starts(self) -> torch.Tensor:
        """Bool [vocab_size]: True for pieces that begin a word (▁ / Ġ-marked, or not a ##
        continuation) and for added tokens; whole-word masking masks a word's pieces together."""
        starts = torch.zeros(self.vocab_size, dtype=torch.bool)
        for i, token in self.id_to_token.items():
            starts[i] = i in self.added.tokens or self.model.begins_word(token)
        return starts

    # --- files ------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: str | Path) -> "JsonTokenizer":
        directory = Path(directory)
        files = {}
        for name in (FILE_NAME, *COMPANION_FILES):
            if (directory / name).is_file():
                try:
                    files[name] = (directory / name).read_text(encoding="utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(f"{directory / name} is not UTF-8 text ({error})") from None
        if FILE_NAME not in files:
            raise FileNotFoundError(f"no {FILE_NAME} in {directory}")
        return cls(files, where=str(directory))

    def save(self, directory: str | Path) -> Path:
        """Write the files this tokenizer was read from, unchanged, into `directory`."""
        directory = Path(directory)
        for name, text in self.files.items():
            write_atomic(directory / name, text)
        return directory

    # Picklable by its files, so tokenizing worker processes can receive it.
    def __getstate__(self) -> dict:
        return {"files": self.files}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["files"])


def pre_tokenizer_types(value) -> list[str]:
    """The types of a pre_tokenizer spec, a Sequence's parts included."""
    if not isinstance(value, dict):
        return []
    parts = value.get("pretokenizers") if value.get("type") == "Sequence" else None
    return [value.get("type"), *(t for part in parts or [] for t in pre_tokenizer_types(part))]


def spelling(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None

