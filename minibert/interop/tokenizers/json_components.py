"""The steps of a `tokenizer.json` that work on text: normalizers, pre-tokenizers, decoders.

Each is a small function built from its JSON object by the builder its type names in one of
the tables below (`build`); json_import.py puts them together with the models, the added
tokens and the post-processor. The rules are those of the `tokenizers` library, which wrote
and runs these files: e.g. its lowercasing goes letter by letter, so a word-final "Σ" becomes
"σ", not Python's "ς"; its whitespace is Unicode's White_Space, not `str.isspace`.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import unicodedata
from typing import Callable

from .byte_bpe import WHITESPACE, char_to_byte, pretokenizer
from .charsmap import CharsMap
from ...tokenizers.wordpiece import (FAST_TOKENIZER_CJK_RANGES, FAST_TOKENIZER_CONTROL_CATEGORIES, clean_text, separate_cjk,
                        split_punctuation, strip_accents)

WHITE_SPACE = frozenset(WHITESPACE)  # Unicode's White_Space: what `tokenizers` splits on and strips
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
    """BERT's text cleanup as `tokenizers` does it: drop control, format and private-use
    characters, isolate CJK ideographs, strip accents (by default exactly when lowercasing),
    lowercase."""
    clean, cjk = spec.get("clean_text", True, (True, False)), spec.get("handle_chinese_chars", True, (True, False))
    lower = spec.get("lowercase", True, (True, False))
    accents = spec.get("strip_accents", lower, (True, False))

    def normalize(text: str) -> str:
        if clean:
            text = clean_text(text, FAST_TOKENIZER_CONTROL_CATEGORIES)
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
