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
spec by one of the tables: json_components.py's for the steps on text, json_models.py's for
the models, the post-processors' here (the tokenizer reads their layouts). A component or
setting outside them is a one-line error naming it and the file, never a tokenization that
silently differs. The rules follow the `tokenizers` library: its ids are what a checkpoint
was trained with.

transformers 5 rebuilds the normalizer and pre-tokenizer of a family's tokenizer class from
that class's own settings in `tokenizer_config.json` and takes only the vocabulary and the
post-processor from `tokenizer.json`; in the folders it writes the two agree, and
tests/test_tokenizer_json.py checks our ids against its AutoTokenizer on such folders.

A `JsonTokenizer` keeps the files it was read from and writes them back unchanged in `save`,
so a folder it saves loads in transformers with the same ids.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Sequence

import torch

from ...operations.files import parse_json_object, write_atomic
from ...tokenizers.base import SPECIAL_TOKEN_FILES, Tokenizer, special_spellings
from .json_components import (BYTE_LEVEL_KEYS, DECODERS, NORMALIZERS, PRE_TOKENIZERS, WHITE_SPACE, Spec, Unsupported,
                              build, is_word_char)
from .json_models import MODELS, BPEModel

FILE_NAME = "tokenizer.json"
# Files that only accompany a layout (settings, special-token spellings) in Hugging Face folders.
COMPANION_FILES = SPECIAL_TOKEN_FILES
FIX = "fix it, or save the tokenizer again with transformers"
ROLES = ("pad", "unk", "cls", "sep", "mask")
CONVENTIONAL = {"pad": ("[PAD]", "<pad>"), "unk": ("[UNK]", "<unk>"), "cls": ("[CLS]", "<s>"),
                "sep": ("[SEP]", "</s>"), "mask": ("[MASK]", "<mask>")}


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
        self.kind = self.model.kind
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
        configured = special_spellings(lambda name: parse_json_object(self.files[name], name, FIX) if name in self.files else None)
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
            spellings = [configured.get(f"{role}_token"), *(CONVENTIONAL[role])]
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

    def tokenize_word(self, word: str) -> list[int]:
        """As `Tokenizer.tokenize_word`; a byte-level BPE word takes the space before it (see byte_bpe.py)."""
        return self.tokenize_to_ids(" " + word if isinstance(self.model, BPEModel) else word)

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
