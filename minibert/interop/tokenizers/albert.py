"""The tokenizer of released ALBERT checkpoints (albert-base-v2 & co.): their `spiece.model`.

It is a SentencePiece unigram model like the ones we train (`sentencepiece_tokenizer.py`),
but made by Google with other conventions, which a checkpoint's embeddings are tied to:

* the special tokens are `<pad>`=0 `<unk>`=1 `[CLS]`=2 `[SEP]`=3 `[MASK]`=4 — SentencePiece's
  own spellings for padding and unknown, BERT's for the rest — so ours ([PAD] [UNK] ...)
  would look the wrong pieces up;
* the text is prepared before SentencePiece sees it, as ALBERT's pretraining data was:
  whitespace runs become one space (`remove_space`), the LaTeX quotes `` and '' become ",
  accents are dropped (NFKD, combining marks removed, unless `keep_accents`) and the text
  is lowercased (`do_lower_case`);
* a piece that ends in a digit and a comma ("▁1990,") is cut into the number, spelled as
  SentencePiece spells it alone, and a separate ",": numbers keep the pieces they have
  elsewhere, and the comma stays punctuation.

The three switches come from the checkpoint's tokenizer_config.json where it has one, with
ALBERT's defaults (lowercase, no accents, spaces collapsed) otherwise. The ids equal those of
Hugging Face's AlbertTokenizer on the same `spiece.model` (tests/test_albert_tokenizer.py).
Special-token spellings typed in the text ("[MASK]") become their ids, as they do there.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from ...operations.files import read_flags, write_atomic, write_json
from ...tokenizers.base import CONFIG_FILE
from ...tokenizers.offsets import Aligned, Span, special_matches
from ...tokenizers.sentencepiece_backed import WORD_START, SentencePieceBacked

FILE_NAME = "spiece.model"
SPECIAL_PIECES = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")  # pad, unk, cls, sep, mask
DEFAULTS = {"do_lower_case": True, "keep_accents": False, "remove_space": True}


class AlbertTokenizer(SentencePieceBacked):
    """A released ALBERT `spiece.model` behind minibert's `Tokenizer` interface."""

    kind = "SentencePiece"

    def __init__(self, model_proto: bytes, do_lower_case: bool = True, keep_accents: bool = False, remove_space: bool = True):
        super().__init__(model_proto)
        self.do_lower_case, self.keep_accents, self.remove_space = do_lower_case, keep_accents, remove_space
        ids = [self._sp.piece_to_id(piece) for piece in SPECIAL_PIECES]
        missing = [piece for piece, i in zip(SPECIAL_PIECES, ids) if self._sp.id_to_piece(i) != piece]
        if missing:
            raise ValueError(f"this {FILE_NAME} lacks the piece(s) {' '.join(missing)}; an ALBERT spiece.model has {' '.join(SPECIAL_PIECES)}")
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = ids
        self._special = dict(zip(SPECIAL_PIECES, ids))
        self._special_pattern = re.compile("(" + "|".join(re.escape(p) for p in SPECIAL_PIECES) + ")")

    def settings(self) -> dict:
        return {"do_lower_case": self.do_lower_case, "keep_accents": self.keep_accents, "remove_space": self.remove_space}

    # --- text -> ids ----------------------------------------------------------------
    def tokenize_to_ids(self, text: str) -> list[int]:
        ids = []
        for chunk in self._special_pattern.split(text):  # typed special tokens are matched on the raw text
            if chunk in self._special:
                ids.append(self._special[chunk])
            elif chunk:
                ids.extend(self._sp.piece_to_id(piece) for piece in self.pieces(chunk))
        return ids

    def tokenize_with_offsets(self, text: str) -> tuple[list[int], list[Span]]:
        """As `Tokenizer.tokenize_with_offsets`: ALBERT's preparation is replayed on an `Aligned`
        text (`prepare_aligned`), so each piece finds its way back through SentencePiece's
        normalization and then through ALBERT's own; a number cut from its comma walks the same
        text as the piece it came from."""
        ids: list[int] = []
        spans: list[Span] = []
        for start, end, special in special_matches(self._special_pattern, text):
            if special is not None:
                ids.append(self._special[special])
                spans.append((start, end))
                continue
            prepared = self.prepare_aligned(Aligned.original(text[start:end], start))
            pieces = self.prepared_pieces(prepared.text)
            chunk_ids = [self._sp.piece_to_id(piece) for piece in pieces]
            ids += chunk_ids
            spans += self.piece_spans(text, prepared, pieces, chunk_ids)
        return ids, spans

    def pieces(self, text: str) -> list[str]:
        """Text (no special tokens) -> its pieces, with numbers cut from a comma that follows them."""
        return self.prepared_pieces(self.prepare(text))

    def prepared_pieces(self, prepared: str) -> list[str]:
        """`pieces` of a text already `prepare`d."""
        pieces = []
        for piece in self._sp.encode(prepared, out_type=str):
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                pieces.extend(self.number_then_comma(piece))
            else:
                pieces.append(piece)
        return pieces

    def number_then_comma(self, piece: str) -> list[str]:
        """"▁1990," -> ▁1990 ,: the number as SentencePiece spells it alone, then the comma.
        Inside a word ("1990," without ▁) the number's first piece loses the ▁ that encoding
        it alone gives it, or goes if it was nothing else."""
        number = self._sp.encode(piece[:-1].replace(WORD_START, ""), out_type=str)
        if not piece.startswith(WORD_START) and number and number[0].startswith(WORD_START):
            number[0] = number[0][len(WORD_START):]
            if not number[0]:
                number.pop(0)
        return [*number, piece[-1]]

    def prepare(self, text: str) -> str:
        """ALBERT's text preparation, before SentencePiece's own normalization."""
        if self.remove_space:
            text = " ".join(text.split())
        text = text.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
        return text.lower() if self.do_lower_case else text

    def prepare_aligned(self, text: Aligned) -> Aligned:
        """`prepare`, step by step, on a text that remembers where its characters came from
        (tests/test_offsets.py checks that the text is `prepare`'s)."""
        if self.remove_space:
            text = text.collapse_whitespace()
        text = text.replace("``", '"').replace("''", '"')
        if not self.keep_accents:
            text = text.rewrite(lambda t: "".join(c for c in unicodedata.normalize("NFKD", t) if not unicodedata.combining(c)))
        return text.rewrite(str.lower) if self.do_lower_case else text

    # --- files --------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: str | Path) -> "AlbertTokenizer":
        """`spiece.model` from `directory`, with the switches of its tokenizer_config.json if any."""
        directory = Path(directory)
        flags = read_flags(directory / CONFIG_FILE, DEFAULTS, f"fix or delete it ({', '.join(DEFAULTS)} are read from it)")
        try:
            return cls((directory / FILE_NAME).read_bytes(), **flags)
        except (ValueError, RuntimeError) as error:  # RuntimeError: SentencePiece cannot parse the file
            raise ValueError(f"{directory / FILE_NAME}: {error}") from None

    def save(self, directory: str | Path) -> Path:
        """Write `spiece.model` and its switches in tokenizer_config.json (Hugging Face's names) into `directory`."""
        directory = Path(directory)
        write_atomic(directory / FILE_NAME, self._model_proto)
        write_json(directory / CONFIG_FILE, {"tokenizer_class": "AlbertTokenizer", **self.settings()})
        return directory
