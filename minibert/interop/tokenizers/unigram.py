"""A unigram language model's segmentation (Kudo, 2018), as the `tokenizers` library does it.

A unigram vocabulary gives every piece a log-probability (its score). A word is cut into the
sequence of pieces whose scores sum highest: the most probable segmentation if pieces were
drawn independently. Trying every segmentation would take exponential time; Viterbi's
dynamic program takes one pass: for each position, the best path that ends there is the best
over pieces ending there of (best path to the piece's start) + (the piece's score). Walking
back from the end along the winning pieces gives the segmentation.

The details below are what makes the ids equal those of `tokenizers` (a SentencePiece model
read by transformers), not just "a" best segmentation:

* A character no single-character piece covers gets an unknown node scored 10 below the
  vocabulary's lowest score, so the search always finds a path, and prefers any real pieces.
* Ties keep the first candidate found: positions are visited left to right and, from one
  position, shorter pieces before longer, and a later candidate replaces an earlier one only
  if it scores strictly higher.
* Consecutive unknown nodes are fused into one unknown piece — and a vocabulary piece whose id
  is the unknown id ("<unk>" typed as text) counts as one of them. With byte fallback (and
  the 256 pieces <0x00>..<0xFF> in the vocabulary) an unknown piece is spelled as its UTF-8
  bytes instead; otherwise it becomes the unknown id.
* Every vocabulary entry takes part in the search, special pieces and byte pieces too (the
  literal text "<0x41>" is the byte piece): the special tokens a user types are taken out
  before, as added tokens.
"""

from __future__ import annotations

from typing import Sequence

UNKNOWN_PENALTY = 10.0


class Unigram:
    """Pieces with scores (id = position) and the id of the unknown piece."""

    def __init__(self, pieces: Sequence[tuple[str, float]], unk_id: int | None, byte_fallback: bool):
        self.pieces = [piece for piece, _ in pieces]
        self.scores = [float(score) for _, score in pieces]
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}  # a repeated piece: the last id
        self.longest = max((len(piece) for piece in self.pieces), default=0)
        self.unk_score = min(self.scores, default=0.0) - UNKNOWN_PENALTY
        self.unk_id = unk_id
        self.byte_fallback = byte_fallback

    def segment(self, text: str) -> list[str]:
        """The best segmentation of `text` into strings: pieces, and fused runs of unknown characters."""
        n = len(text)
        best: list[tuple[float, int, int | None] | None] = [None] * (n + 1)  # end -> (score, start, id)
        best[0] = (0.0, 0, None)
        for start in range(n):
            so_far = best[start][0]
            has_single = False
            for end in range(start + 1, min(n, start + self.longest) + 1):
                piece_id = self.ids.get(text[start:end])
                if piece_id is None:
                    continue
                has_single |= end == start + 1
                score = so_far + self.scores[piece_id]
                if best[end] is None or score > best[end][0]:
                    best[end] = (score, start, piece_id)
            if not has_single:
                score = so_far + self.unk_score
                if best[start + 1] is None or score > best[start + 1][0]:
                    best[start + 1] = (score, start, self.unk_id)
        pieces: list[str] = []
        unknown_run = ""
        end = n
        while end > 0:
            _, start, piece_id = best[end]
            if piece_id == self.unk_id:
                unknown_run = text[start:end] + unknown_run
            else:
                if unknown_run:
                    pieces.append(unknown_run)
                    unknown_run = ""
                pieces.append(text[start:end])
            end = start
        if unknown_run:
            pieces.append(unknown_run)
        return pieces[::-1]

    def __call__(self, text: str) -> list[int]:
        """Text -> ids, unknown runs spelled as bytes where the vocabulary allows."""
        ids = []
        for piece in self.segment(text):
            if piece in self.ids:
                ids.append(self.ids[piece])
                continue
            byte_ids = [self.ids.get(f"<0x{byte:02X}>") for byte in piece.encode("utf-8")] if self.byte_fallback else [None]
            if None not in byte_ids:
                ids.extend(byte_ids)
            elif self.unk_id is None:
                raise ValueError(f"{piece!r} is not in the unigram vocabulary, which has no unknown piece")
            else:
                ids.append(self.unk_id)
        return ids
