"""SentencePiece's precompiled character map, read from scratch, applied as `tokenizers` does.

A SentencePiece model carries its text normalization (e.g. `nmt_nfkc`: NFKC plus a few
whitespace and control-character rules) not as code but as data, the `precompiled_charsmap`:
a table from source strings ("ﬁ", "𝔾", "e" + combining acute) to their replacements ("fi",
"G", "é"). A `tokenizer.json` of a SentencePiece family (ALBERT, T5, XLM-R) keeps that blob,
base64-encoded, in its `Precompiled` normalizer. The blob is laid out as

    uint32 (little-endian)   n, the size in bytes of the trie that follows
    n bytes                  the trie: n/4 uint32 units of a double-array trie (darts-clone)
    the rest                 the replacements, UTF-8, each ended by a NUL byte

**The double-array trie.** The keys (source strings, as UTF-8 bytes) form a trie whose edges
are bytes. Darts stores it in one array of 32-bit units, one per node. Walking an edge is
arithmetic instead of a search: from a node whose unit holds the offset `o`, the child along
byte `b` sits at index `node ^ o ^ b`, and it is a real child only if the unit found there
has `b` as its label (otherwise no key continues with `b`). A unit packs:

    bits 0-7   label: the byte on the edge into this node (bit 31 is set in unused units, so
               they never equal a byte)
    bit 8      has_leaf: a key ends here; the unit at `node ^ offset` then holds its value
    bit 9      the offset is stored shifted by 8 (for large offsets)
    bits 10-   offset
    value      (in a leaf unit) bits 0-30: where the replacement starts in the strings blob

So `prefix_values(key)` walks the bytes of `key` and collects the value of every key that is
a prefix of it, shortest first.

**How `tokenizers` applies the map** (its `Precompiled` normalizer, which ids must match;
SentencePiece itself instead takes the longest match at every byte). The text is cut into
grapheme clusters (what a reader sees as one character: a letter with its combining marks, a
CR LF, a Hangul syllable in jamo). A cluster shorter than 6 bytes is looked up whole, and if
any key is a prefix of it the *shortest* such key's replacement stands for the whole cluster
(so "ﬁ" + a combining mark becomes "fi", the mark dropped; Arabic alef + madda becomes "آ").
Otherwise each character is looked up alone. `tokenizers` has comments calling this odd but
tested against SentencePiece on many languages; we reproduce it, oddities included.

**Grapheme clusters** follow Unicode's rules (UAX #29) as far as they can change the result:
CR LF; breaks around controls; Hangul syllable sequences; Extend, ZWJ and SpacingMark
characters joining what precedes them; Prepend characters joining what follows. The emoji and
regional-indicator rules are left out: their clusters are 6 bytes or longer, which are looked
up character by character anyway, so joining or splitting them changes nothing. Character
classes come from Python's `unicodedata`, so a character that Unicode assigned after Python's
tables were made may be classed differently than in `tokenizers`.
"""

from __future__ import annotations

import struct
import unicodedata
from typing import Iterator

WHOLE_CLUSTER_BYTES = 6  # clusters shorter than this are looked up whole

# --- the double-array trie ------------------------------------------------------------------


class CharsMap:
    """A `precompiled_charsmap` blob: `replace(text)` normalizes text as `tokenizers` does."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise ValueError(f"a precompiled_charsmap needs at least 4 bytes, got {len(blob)}")
        (trie_bytes,) = struct.unpack_from("<I", blob)
        if trie_bytes % 4 or 4 + trie_bytes > len(blob) or trie_bytes == 0:
            raise ValueError(f"a precompiled_charsmap announces a {trie_bytes}-byte trie in a {len(blob)}-byte blob")
        self.units = struct.unpack_from(f"<{trie_bytes // 4}I", blob, 4)
        self.strings = blob[4 + trie_bytes:]
        self._cache: dict[str, str | None] = {}

    def prefix_values(self, key: bytes) -> Iterator[int]:
        """The values of the keys that are prefixes of `key`, shortest first (a NUL byte ends `key`)."""
        units = self.units
        node = offset(units[0])
        for byte in key:
            if byte == 0:
                return
            node ^= byte
            if node >= len(units) or units[node] & 0x800000FF != byte:  # label: no key continues with this byte
                return
            unit = units[node]
            node ^= offset(unit)
            if unit >> 8 & 1:  # a key ends here; its value sits at the child position
                yield units[node] & 0x7FFFFFFF

    def lookup(self, chunk: str) -> str | None:
        """The replacement of the shortest key that begins `chunk`, or None if no key does."""
        if chunk not in self._cache:
            value = next(self.prefix_values(chunk.encode("utf-8")), None)
            if value is None:
                self._cache[chunk] = None
            else:
                end = self.strings.find(b"\0", value)
                self._cache[chunk] = self.strings[value:None if end < 0 else end].decode("utf-8", errors="replace")
        return self._cache[chunk]

    def replace(self, text: str) -> str:
        out = []
        for cluster in grapheme_clusters(text):
            whole = self.lookup(cluster) if len(cluster.encode("utf-8")) < WHOLE_CLUSTER_BYTES else None
            if whole is not None:
                out.append(whole)
                continue
            for char in cluster:
                replacement = self.lookup(char)
                out.append(char if replacement is None else replacement)
        return "".join(out)


def offset(unit: int) -> int:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


# --- grapheme clusters ----------------------------------------------------------------------

CR, LF, CONTROL, EXTEND, ZWJ, SPACING_MARK, PREPEND, L, V, T, LV, LVT, OTHER = range(13)

# Unicode's Other_Grapheme_Extend: spacing vowel signs and the like that still extend a cluster.
OTHER_GRAPHEME_EXTEND = frozenset([
    0x09BE, 0x09D7, 0x0B3E, 0x0B57, 0x0BBE, 0x0BD7, 0x0CC2, 0x0CD5, 0x0CD6, 0x0D3E, 0x0D57, 0x0DCF,
    0x0DDF, 0x1B35, 0x200C, 0x302E, 0x302F, 0xFF9E, 0xFF9F, 0x1133E, 0x11357, 0x114B0, 0x114BD,
    0x115AF, 0x11930, 0x1D165, *range(0x1D16E, 0x1D173), *range(0x1F3FB, 0x1F400), *range(0xE0020, 0xE0080),
])
# Prepend: characters that join the character after them (Arabic number signs and a few more).
PREPENDS = frozenset([*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x0D4E, 0x110BD,
                      0x110CD, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, *range(0x11A84, 0x11A8A), 0x11D46])
# Spacing marks that do not join (Grapheme_Cluster_Break excludes them), and two letters that do.
NOT_SPACING_MARKS = frozenset([0x102B, 0x102C, 0x1038, *range(0x1062, 0x1065), *range(0x1067, 0x106E), 0x1083,
                               *range(0x1087, 0x108D), 0x108F, *range(0x109A, 0x109D), 0x1A61, 0x1A63, 0x1A64,
                               0xAA7B, 0xAA7D, 0x11720, 0x11721])
SPACING_LETTERS = frozenset([0x0E33, 0x0EB3])


def cluster_class(char: str) -> int:
    """The Grapheme_Cluster_Break class of a character (the ones `grapheme_clusters` uses)."""
    cp = ord(char)
    if char == "\r":
        return CR
    if char == "\n":
        return LF
    if char == "\u200d":
        return ZWJ
    if cp in PREPENDS:
        return PREPEND
    category = unicodedata.category(char)
    if category in ("Mn", "Me") or cp in OTHER_GRAPHEME_EXTEND:
        return EXTEND
    if category in ("Cc", "Cf", "Zl", "Zp"):
        return CONTROL
    if (category == "Mc" and cp not in NOT_SPACING_MARKS) or cp in SPACING_LETTERS:
        return SPACING_MARK
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return L
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return V
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return T
    if 0xAC00 <= cp <= 0xD7A3:
        return LV if (cp - 0xAC00) % 28 == 0 else LVT
    return OTHER


def joins(before: int, after: int) -> bool:
    """Whether no cluster boundary falls between characters of these classes (UAX #29, GB3-GB9b)."""
    if before == CR and after == LF:
        return True
    if before in (CR, LF, CONTROL) or after in (CR, LF, CONTROL):
        return False
    if before == L and after in (L, V, LV, LVT):
        return True
    if before in (LV, V) and after in (V, T):
        return True
    if before in (LVT, T) and after == T:
        return True
    return after in (EXTEND, ZWJ, SPACING_MARK) or before == PREPEND


def grapheme_clusters(text: str) -> list[str]:
    clusters: list[str] = []
    previous = None
    for char in text:
        current = cluster_class(char)
        if previous is not None and joins(previous, current):
            clusters[-1] += char
        else:
            clusters.append(char)
        previous = current
    return clusters
