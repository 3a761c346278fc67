"""Step 4 of the pipeline: cut the stored corpus into training examples (one of three layouts).

    layout="nsp"             [CLS] A [SEP] B [SEP]; B is A's true continuation half the
                             time, else text from another document (BERT's Next Sentence
                             Prediction). sentence_label: 0 = IsNext, 1 = NotNext (random).
    layout="sop"             [CLS] A [SEP] B [SEP]; A and B are consecutive segments of one
                             document, swapped half the time (ALBERT's Sentence Order
                             Prediction). sentence_label: 0 = in order, 1 = swapped.
    layout="full_sentences"  [CLS] s1 s2 ... [SEP]: contiguous sentences packed up to the
                             maximum length, running on across documents with a [SEP]
                             between them (RoBERTa's FULL-SENTENCES). No sentence_label.

(The labels follow Hugging Face's `next_sentence_label`/`sentence_order_label`, so
imported NSP/SOP heads keep their meaning: 1 always means "B is not A's continuation".)

`build_examples` cuts an example as five integers — spans of the flat token array:
(a_start, a_end, b_start, b_end, sentence_label), with b_start = -1 when there is no
segment B and sentence_label = -1 when the layout has none; truncation comes from
`truncate_pair` (applied to token positions, which keeps the spans contiguous). `Examples`
then lays every example out once as model input, as BERT's own preprocessing wrote its
training files: token ids with the tokenizer's special tokens (`Tokenizer.join`), segment
ids, the length and the sentence label, one row each, stored and memory-mapped. Serving a
batch (dataset.py) is then a few row reads and the masks.

With probability `short_seq_prob` (BERT: 0.1) an example aims at a random shorter length,
so the model also sees the short inputs it will meet when fine-tuning. RoBERTa always
packed to the full length: give it short_seq_prob=0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tokenizers.base import Tokenizer, truncate_pair

LAYOUTS = ("nsp", "sop", "full_sentences")
NO_LABEL = -1


def build_examples(
    store: "TokenStore",
    layout: str,
    *,
    max_length: int,
    short_seq_prob: float,
    seed: int,
    specials: tuple[int, int],
    documents: range | None = None,
    others: range | None = None,
    block: int = 0,
    copy: int = 0,
    allow_empty: bool = False,
) -> np.ndarray:
    """Cut the documents in `documents` (default: all) into examples -> int64 [n, 5], one example per row.

    `specials`: how many special tokens the tokenizer's `join` adds to one segment and to a pair
    (BERT: 2 and 3; RoBERTa's <s> A </s></s> B </s>: 2 and 4), so that every example fits `max_length`.
    `others`: where NSP's random segments come from (default: `documents`); `block`: which block of
    `write_examples` this is; `copy`: which of BERT's `dupe_factor` passes over the corpus. Each
    (block, copy) has its own generator: block 0 of copy 0 draws from `seed` itself, block i of
    copy 0 from (seed, i), of copy c from (seed, i, c). So each copy draws its own target lengths,
    A/B cut points and random next segments, as create_pretraining_data.py's passes do.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r} is not one of {LAYOUTS}")
    if max_length < 8:
        raise ValueError(f"max_length={max_length} is too short for [CLS] A [SEP] B [SEP]; use at least 8")
    documents = range(store.n_documents) if documents is None else documents
    others = documents if others is None else others
    rng = np.random.default_rng(seed if block == copy == 0 else [seed, block] if copy == 0 else [seed, block, copy])
    if layout == "full_sentences":
        examples = _packed_examples(store, documents, max_length - specials[0], short_seq_prob, rng)
    else:
        if layout == "nsp" and len(others) < 2:
            raise ValueError(f"NSP draws its random segment from another document, but only {len(others)} document is available; use a larger corpus or layout='sop'")
        examples = [example for d in documents for example in _pair_examples(store, d, others, layout, max_length - specials[1], short_seq_prob, rng)]
    if not examples and not allow_empty:
        raise ValueError(f"the {len(documents)} documents yield no {layout} example; use a larger corpus")
    return np.array(examples, dtype=np.int64).reshape(-1, 5)


@dataclass
class Examples:
    """Training examples as model input, one row each ([n, seq_len] arrays, padded with [PAD])."""

    input_ids: np.ndarray  # [n, seq_len] token ids, the tokenizer's special tokens included
    token_type_ids: np.ndarray  # [n, seq_len] segment ids: 0 for [CLS] A [SEP], 1 for B [SEP]
    lengths: np.ndarray  # [n] real tokens of each example
    sentence_label: np.ndarray | None  # [n] the NSP/SOP target; None for full sentences
    # [copies] the first row of each of BERT's static copies (corpus/stored_examples.py records
    # them); None where they are not known: examples laid out in memory, or an older cache
    copy_starts: np.ndarray | None = None

    FIELDS = ("input_ids", "token_type_ids", "lengths", "sentence_label")

    def __len__(self) -> int:
        return len(self.lengths)

    @classmethod
    def from_spans(cls, store: "TokenStore", spans: np.ndarray, tokenizer: Tokenizer, seq_len: int) -> "Examples":
        """Lay `build_examples`' spans out as the token ids the model reads."""
        dtype = store.tokens.dtype
        input_ids = np.full((len(spans), seq_len), tokenizer.pad_id, dtype=dtype)
        token_type_ids = np.zeros((len(spans), seq_len), dtype=np.uint8)
        lengths = np.zeros(len(spans), dtype=np.int32)
        for row, (a_start, a_end, b_start, b_end, _) in enumerate(spans.tolist()):
            ids_a = store.tokens_between(a_start, a_end, tokenizer.sep_id).tolist()
            ids_b = None if b_start < 0 else store.tokens_between(b_start, b_end, tokenizer.sep_id).tolist()
            ids, segments = tokenizer.join(ids_a, ids_b)
            input_ids[row, :len(ids)], token_type_ids[row, :len(ids)], lengths[row] = ids, segments, len(ids)
        labels = spans[:, 4].astype(np.int8)
        return cls(input_ids, token_type_ids, lengths, None if (labels == NO_LABEL).all() else labels)


def _target_length(max_tokens: int, short_seq_prob: float, rng: np.random.Generator) -> int:
    """BERT: usually the full length; with probability short_seq_prob a random shorter one."""
    return int(rng.integers(2, max_tokens + 1)) if rng.random() < short_seq_prob else max_tokens


def _pair_examples(store, document, documents, layout, max_tokens, short_seq_prob, rng):
    """BERT's `create_instances_from_document`, on token positions: gather sentences of one
    document until they reach the target length, then split them into segments A and B."""
    offsets = store.sentence_offsets
    chunk_start = end = int(store.document_offsets[document])
    stop = int(store.document_offsets[document + 1])
    target = _target_length(max_tokens, short_seq_prob, rng)
    while end < stop:
        end += 1  # the chunk is sentences chunk_start .. end-1
        if end < stop and offsets[end] - offsets[chunk_start] < target:
            continue
        a_start, b_end = int(offsets[chunk_start]), int(offsets[end])
        if end - chunk_start >= 2:  # A ends at a random sentence boundary inside the chunk
            a_sentences_end = int(rng.integers(chunk_start + 1, end))
            a_end = int(offsets[a_sentences_end])
        elif b_end - a_start >= 2:  # one long sentence: A ends at a random token inside it
            a_sentences_end, a_end = end, int(rng.integers(a_start + 1, b_end))
        else:
            chunk_start = end
            continue
        b_start, label = a_end, 0
        if layout == "nsp" and rng.random() < 0.5:
            b_start, b_end = _random_segment(store, document, documents, target - (a_end - a_start), rng)
            label, end = 1, a_sentences_end  # BERT puts the unused sentences back
        a, b = truncate_pair(range(a_start, a_end), range(b_start, b_end), max_tokens)
        a, b = (a[0], a[-1] + 1), (b[0], b[-1] + 1)
        if layout == "sop" and rng.random() < 0.5:
            a, b, label = b, a, 1
        yield (*a, *b, label)
        chunk_start, target = end, _target_length(max_tokens, short_seq_prob, rng)


def _random_segment(store, document, documents, length, rng):
    """A span of `length` tokens (or up to its document's end) from a random *other* document."""
    other = documents[int(rng.integers(len(documents) - 1))]
    other += other >= document  # skip over A's own document
    first, stop = int(store.document_offsets[other]), int(store.document_offsets[other + 1])
    start = int(store.sentence_offsets[rng.integers(first, stop)])
    return start, min(int(store.sentence_offsets[stop]), start + max(length, 1))


def _packed_examples(store, documents, max_tokens, short_seq_prob, rng):
    """RoBERTa's FULL-SENTENCES: whole sentences, in corpus order, packed until the next one
    would not fit; a sentence longer than the budget is cut into budget-sized pieces. Every
    token of the documents lands in exactly one example."""
    offsets, boundaries = store.sentence_offsets, store.document_token_offsets
    first_sentence = int(store.document_offsets[documents[0]])
    last_sentence = int(store.document_offsets[documents[-1] + 1])

    def cost(start, end):  # tokens + the [SEP]s inserted at documents starting inside
        return end - start + int(np.searchsorted(boundaries, end, "left") - np.searchsorted(boundaries, start, "right"))

    examples, start, budget = [], int(offsets[first_sentence]), _target_length(max_tokens, short_seq_prob, rng)
    for sentence in range(first_sentence, last_sentence):
        sentence_start, sentence_end = int(offsets[sentence]), int(offsets[sentence + 1])
        while cost(start, sentence_end) > budget:
            end = sentence_start if sentence_start > start else start + budget
            examples.append((start, end, -1, -1, NO_LABEL))
            start, budget = end, _target_length(max_tokens, short_seq_prob, rng)
    if start < int(offsets[last_sentence]):
        examples.append((start, int(offsets[last_sentence]), -1, -1, NO_LABEL))
    return examples
