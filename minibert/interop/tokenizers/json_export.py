"""Our SentencePiece tokenizer in the files Hugging Face's `AutoTokenizer` loads.

`tokenizer.json` is the format of the `tokenizers` library (a fast tokenizer described as
data: normalizer, pre-tokenizer, model, post-processor, decoder); every `transformers`
version loads it through `PreTrainedTokenizerFast`, whatever the model family, so one file
serves all six exported families. It is written from the trained SentencePiece model, with
no dependency on `tokenizers` or `protobuf`:

* normalizer: SentencePiece's own character map (`nmt_nfkc`: NFKC plus its whitespace
  rules), copied byte for byte from the model file, then what SentencePiece does around it:
  strip the ends, collapse runs of spaces, spell spaces as ▁ and prefix the text with ▁;
* model: a unigram model with the same pieces and scores, the same [UNK] and byte fallback
  (an unseen character becomes its UTF-8 bytes <0xE2> <0x98> <0x83>, as in SentencePiece);
* [CLS] [SEP] [MASK]: SentencePiece matches them inside the normalized text (they are
  user-defined pieces), so they are "normalized" added tokens here too. [PAD] and [UNK] are
  special tokens as well (SentencePiece spells the literal text "[PAD]" out instead);
* [MASK] absorbs the space before it, as our tokenizer's does (sentencepiece_tokenizer.py),
  so that transformers' fill-mask pipeline reads "a new [MASK]." as minibert's fill-mask does.
  It is a normalizer step (▁[MASK] -> [MASK]), not the added token's `lstrip` that ALBERT's
  tokenizer.json uses: `lstrip` matches [MASK] in the raw text and normalizes the stretches
  between masks apart, which would prefix the text after a mask with ▁ ("[MASK]." -> [MASK] ▁ .);
* post-processor: `Tokenizer.encode_pair`'s layout, [CLS] A [SEP] B [SEP] with segment ids.

Two libraries' Viterbi searches can still part ways where two segmentations made of the
same pieces in another order score exactly the same ("1999" as 1·99·9 or 1·9·99): each
library breaks that tie its own way. On real English text that is about one line in 40,000
(tests/test_hf_roundtrip.py measures it). A text that is nothing but [CLS] or [SEP] gets no ▁
before it, where SentencePiece puts one.
"""

from __future__ import annotations

import base64
import re
from typing import Iterator

import sentencepiece as spm

from ...tokenizers.base import CONFIG_FILE, SPECIAL_TOKENS, SPECIAL_TOKENS_MAP_FILE

TOKENIZER_FILE = "tokenizer.json"
ROLES = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")  # SPECIAL_TOKENS' order
MATCHED_IN_TEXT = SPECIAL_TOKENS[2:]  # the user-defined pieces [CLS] [SEP] [MASK]
MASK = SPECIAL_TOKENS[4]
UNIGRAM, NORMALIZER_SPEC, TRAINER_SPEC, MODEL_TYPE = 1, 3, 2, 3  # protobuf field numbers / enum values


def hugging_face_files(model_proto: bytes) -> dict[str, dict]:
    """file name -> JSON object: tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    normalizer = normalizer_spec(model_proto)
    if model_type(model_proto) != UNIGRAM:
        raise ValueError(
            "only a unigram SentencePiece model has a Hugging Face tokenizer.json export here; train the "
            "tokenizer with model_type='unigram' (the default), or save with format='minibert'"
        )
    if not (normalizer["add_dummy_prefix"] and normalizer["remove_extra_whitespaces"] and normalizer["escape_whitespaces"]):
        raise ValueError("this SentencePiece model was trained with non-default whitespace rules, which the export does not write")
    special = dict(zip(ROLES, SPECIAL_TOKENS))
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token(i, piece) for i, piece in enumerate(SPECIAL_TOKENS)],
        "normalizer": {"type": "Sequence", "normalizers": normalizers(normalizer["charsmap"])},
        "pre_tokenizer": None,  # the normalizer already did all SentencePiece does before its search
        "model": {
            "type": "Unigram",
            "unk_id": sp.unk_id(),
            "vocab": [[sp.id_to_piece(i), sp.get_score(i)] for i in range(sp.get_piece_size())],
            "byte_fallback": any(sp.is_byte(i) for i in range(sp.get_piece_size())),
        },
        "post_processor": post_processor(),
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},  # the ▁ that prefixed the text
        ]},
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
    }
    return {TOKENIZER_FILE: tokenizer, CONFIG_FILE: config, SPECIAL_TOKENS_MAP_FILE: special}


def normalizers(charsmap: bytes) -> list[dict]:
    """SentencePiece's normalization as `tokenizers` steps, in SentencePiece's order."""
    alone = "|".join(rf"{re.escape(token)}\z" for token in MATCHED_IN_TEXT)
    character_map = [{"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")}]
    return [
        *(character_map if charsmap else []),  # empty for SentencePiece's "identity" normalization
        {"type": "Replace", "pattern": {"Regex": r"\A +| +\z"}, "content": ""},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        # The ▁ prefix of a non-empty text. `tokenizers` normalizes the added tokens' own text
        # with these steps too, so a text that is exactly [CLS], [SEP] or [MASK] gets none:
        # otherwise the token would only match as "▁[MASK]".
        {"type": "Replace", "pattern": {"Regex": rf"\A(?!{alone}|\z)"}, "content": "▁"},
        {"type": "Replace", "pattern": {"String": "▁" + MASK}, "content": MASK},  # [MASK] absorbs the space before it
    ]


def added_token(token_id: int, piece: str) -> dict:
    return {"id": token_id, "content": piece, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": piece in MATCHED_IN_TEXT, "special": True}


def post_processor() -> dict:
    """[CLS] A [SEP] (segment 0) and [CLS] A [SEP] B [SEP] (B and its [SEP]: segment 1)."""
    def special(token: str, segment: int) -> dict:
        return {"SpecialToken": {"id": token, "type_id": segment}}

    def text(name: str, segment: int) -> dict:
        return {"Sequence": {"id": name, "type_id": segment}}

    cls, sep = SPECIAL_TOKENS[2], SPECIAL_TOKENS[3]
    return {
        "type": "TemplateProcessing",
        "single": [special(cls, 0), text("A", 0), special(sep, 0)],
        "pair": [special(cls, 0), text("A", 0), special(sep, 0), text("B", 1), special(sep, 1)],
        "special_tokens": {t: {"id": t, "ids": [SPECIAL_TOKENS.index(t)], "tokens": [t]} for t in (cls, sep)},
    }


# --- the few fields of SentencePiece's model file (a protobuf) that the export needs ------------

def normalizer_spec(model_proto: bytes) -> dict:
    """NormalizerSpec: the precompiled character map and the whitespace switches (proto defaults: on)."""
    spec = {"charsmap": b"", "add_dummy_prefix": True, "remove_extra_whitespaces": True, "escape_whitespaces": True}
    names = {2: "charsmap", 3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}
    for number, value in fields(message(model_proto, NORMALIZER_SPEC)):
        if number in names:
            spec[names[number]] = value if number == 2 else bool(value)
    return spec


def model_type(model_proto: bytes) -> int:
    """TrainerSpec.model_type: 1 unigram (the proto default), 2 BPE, 3 word, 4 char."""
    return next((v for n, v in fields(message(model_proto, TRAINER_SPEC)) if n == MODEL_TYPE), UNIGRAM)


def message(data: bytes, number: int) -> bytes:
    return next((v for n, v in fields(data) if n == number), b"")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one protobuf message, in the wire format's order."""
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = varint(data, i)
        elif wire_type == 2:
            length, i = varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire_type in (1, 5):  # fixed 64 / 32 bits
            size = 8 if wire_type == 1 else 4
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"not a SentencePiece model file (protobuf wire type {wire_type})")
        yield number, value


def varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i
