"""One example as the model sees it: the run's own text, masked as the run masks it, or a text the
learner typed, masked by the run's masking.

    the run's text   a held-out example with the mask dynamic masking draws in epoch `draw`
                     (PretrainingBatches.batch), or a static copy's first example with its stored
                     mask (draw = which copy), drawn again by draw_static_masks to show its spans
    a typed text     one segment, or "A [SEP] B" as a pair, cut to what the model reads; masked by
                     the run's Masking with a seed from the text and the draw (`draw_seed`), unless
                     it holds [MASK]s of the learner's own

ALBERT's spans are what `Masking.choose_spans` returns beside the mask (`DrawnSpans`): a copy of
the run's masking keeps them as it masks (`keeping_spans`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from ...data.dataset import PretrainingBatches
from ...data.masking import IGNORE_INDEX, Masking
from ...data.static_masks import EXAMPLES_PER_CHUNK, draw_static_masks
from ...objectives.sentence import SENTENCE_TASKS
from ..probe import MASK_PATTERN, masked_ids
from .code_ran import unwatched
from .session import Session, static_mask_states

# What the explorer reads of a typed text: the model reads at most its max_length tokens, and a
# longer text is cut to them (with a note); the characters past this many are not even tokenized.
MAX_TEXT_CHARS = 100_000
PAIR_SEPARATOR = "[SEP]"  # a typed "A [SEP] B" is a segment pair
# A learner types [mask] or [sep] as readily as [MASK] and [SEP]; the explorer reads them alike.
TYPED_MASK = re.compile(MASK_PATTERN.pattern, re.IGNORECASE)
TYPED_SEPARATOR = re.compile(re.escape(PAIR_SEPARATOR), re.IGNORECASE)


@dataclass
class Example:
    """One sequence as the model sees it, and what masking did to it."""

    batch: dict[str, torch.Tensor]  # one row: input_ids (masked), attention_mask, token_type_ids, labels, ...
    original: torch.Tensor  # [T] the ids before masking
    chosen: torch.Tensor  # [T] bool: the positions the masking chose (or the learner's [MASK]s)
    source: str  # where the text came from, in words
    seed: int  # what ELECTRA's generator samples with (`draw_seed`: the text and the draw)
    yours: bool = False  # the learner wrote the [MASK]s: there is no original to score against
    stored: bool = False  # the mask a static copy stored (BERT's), not one drawn now
    typed: bool = False  # the learner's text, masked now (even in a static run: nothing was stored for it)
    spans: list[tuple[int, int]] | None = None  # the spans the masking drew, (first, last) token (None: not drawn as spans)
    notes: list[str] = field(default_factory=list)  # what was done to the text before the model read it (a cut)
    specials: list[str] = field(default_factory=list)  # special tokens the learner typed, read as those tokens


def draw_seed(ids: torch.Tensor, draw: int) -> int:
    """The seed of one draw on one text, from the draw and every token id: the same text and
    draw give the same masks (and ELECTRA's samples), other texts others. SeedSequence hashes
    the numbers into one seed, as PretrainingBatches.batch seeds a batch from where it is served."""
    return int(np.random.SeedSequence([draw, *ids.flatten().tolist()]).generate_state(1, np.uint64)[0] >> 1)


def keeping_spans(masking: Masking) -> tuple[Masking, list]:
    """A copy of `masking` that masks exactly as it does and keeps, per call, the spans
    `Masking.choose_spans` returns beside the mask (DrawnSpans.listed: per row, (first, last)
    token). The list stays empty where the masking draws no spans."""
    kept: list[list[list[tuple[int, int]]]] = []
    keeping = copy.copy(masking)

    def choose_spans(input_ids, can_mask, generator):
        drawn = type(masking).choose_spans(keeping, input_ids, can_mask, generator)
        kept.append(drawn.listed())
        return drawn

    keeping.choose_spans = choose_spans
    return keeping, kept


def sentence_task(session: Session) -> str | None:
    """"nsp" or "sop" where the run has a sentence task, else None."""
    objectives = session.pretrainer.objectives if session.pretrainer is not None else {}
    return next((name for name in SENTENCE_TASKS if name in objectives), None)


def run_example(session: Session, draw: int) -> Example:
    """The run's own text: a static copy's first example with its stored mask (draw = which copy),
    or the first held-out example with the mask dynamic masking draws for it in epoch `draw`."""
    data = session.data
    if data is None:
        raise ValueError("the run's corpus is not available here; type a text to look at")
    spans = None
    if session.static:
        rows = session.copy_rows()
        copy_number = draw % len(rows)
        batch = data.train.batch(0, 0, rows[copy_number:copy_number + 1])
        source = f"copy {copy_number + 1} of {len(rows)}: the first training example of that pass over the corpus, with the mask stored for it"
        spans, same = stored_mask_drawn_again(session, int(rows[copy_number]), batch)
        if not same:
            source += " (drawing the stored masks again gives another mask here: the cache is older than this code)"
    else:
        masking, kept = keeping_spans(session.masking)
        held_out = PretrainingBatches(data.eval.examples, masking, batch_size=1, static_masks=None,
                                      seed=session.settings.seed, repeat=False)
        batch = held_out.batch(draw, 0, np.array([0]))
        spans = kept[-1][0] if kept else None
        source = f"the first held-out example, with the mask dynamic masking draws for it in epoch {draw}"
    labels = batch["labels"][0]
    chosen = labels != IGNORE_INDEX
    original = torch.where(chosen, labels, batch["input_ids"][0])
    return Example(batch, original, chosen, source, draw_seed(original, draw), stored=session.static, spans=spans)


def stored_mask_drawn_again(session: Session, row: int, batch: dict) -> tuple[list | None, bool]:
    """Draw the static masks again as the run's pipeline drew them before storing them
    (draw_static_masks, the run's masking and seed), for the chunk that holds `row`: the
    functions that made the stored mask run again now, for the batch panel to name, and the
    spans they drew (where the masking draws spans) can be bracketed. The generator's state where
    each copy's chunk begins is found once, at the first copy past the first chunk, unwatched
    (bookkeeping, not this answer's code: session.py's static_mask_states); a redraw then starts
    at its own chunk. Returns (the row's spans or None, whether the drawing matches the stored mask)."""
    train, states = session.data.train, session.mask_states
    chunk = row // EXAMPLES_PER_CHUNK
    if not states:
        states[0] = torch.Generator().manual_seed(train.seed).get_state()
    if chunk not in states:
        with unwatched():
            states.update(static_mask_states(session))
    generator = torch.Generator()
    generator.set_state(states[chunk])
    masking, kept = keeping_spans(train.masking)
    counts, positions, ids = next(draw_static_masks(train.examples, masking, seed=train.seed, generator=generator,
                                                    first_chunk=chunk))
    first = chunk * EXAMPLES_PER_CHUNK
    ends = np.cumsum(counts)
    entries = slice(ends[row - first] - counts[row - first], ends[row - first])
    chosen = (batch["labels"][0] != IGNORE_INDEX).nonzero()[:, 0]
    same = (positions[entries].tolist() == chosen.tolist()
            and ids[entries].tolist() == batch["input_ids"][0, chosen].tolist())
    return (kept[-1][row - first] if kept and same else None), same


def prepare(session: Session) -> None:
    """Find where each static copy's chunk begins ahead of the first Draw again: `serve` runs this in
    a thread of its own while the learner reads the first answer (answers that come before it ends
    find what they need themselves)."""
    if session.static:
        states = static_mask_states(session)
        with session.lock:
            session.mask_states.update(states)


def typed_example(session: Session, text: str, draw: int) -> Example:
    """A typed text as one segment, or "A [SEP] B" as a pair, cut to what the model reads (with a
    note); masked by the run's masking (seeded by the text and the draw), unless it holds [MASK]s
    of the learner's own: then those are the masks, and nothing is drawn. Every other special
    token typed ([CLS], [PAD], [UNK], a second [SEP]) is read as that token, as a tokenizer reads
    its special tokens' spellings, and a note says which."""
    tokenizer, notes = session.tokenizer, []
    if len(text) > MAX_TEXT_CHARS:
        notes.append(f"the text is {len(text):,} characters; the explorer reads the first {MAX_TEXT_CHARS:,}")
        text = text[:MAX_TEXT_CHARS]
    segments = [typed_ids(tokenizer, part.strip()) for part in TYPED_SEPARATOR.split(TYPED_MASK.sub("[MASK]", text), 1)]
    pieces, cut = fitted(tokenizer, [ids for ids, _ in segments], session.encoder.max_length)
    notes += [cut] if cut else []
    ids, types = tokenizer.join(*pieces)
    if session.encoder.config.type_vocab_size < 2:  # one segment type (RoBERTa) or none: B is told apart by its separator only
        types = [0] * len(types)
    batch = tokenizer.pad([(ids, types)])
    if sentence_task(session) is not None and len(pieces) == 2:
        batch["sentence_label"] = torch.zeros(1, dtype=torch.long)
    original = batch["input_ids"][0].clone()
    specials = [spelling for _, typed in segments for spelling in typed]
    seed = draw_seed(original, draw)
    if (original == tokenizer.mask_id).any():
        batch["labels"] = torch.full_like(batch["input_ids"], IGNORE_INDEX)
        return Example(batch, original, original == tokenizer.mask_id, "your text, with your [MASK]s", seed, yours=True,
                       typed=True, notes=notes, specials=specials)
    masking, kept = keeping_spans(session.masking)
    batch["input_ids"], batch["labels"] = masking(batch["input_ids"], torch.Generator().manual_seed(seed))
    return Example(batch, original, batch["labels"][0] != IGNORE_INDEX, f"your text, masked by the run's masking (draw {draw})",
                   seed, typed=True, spans=kept[-1][0] if kept else None, notes=notes, specials=specials)


def typed_ids(tokenizer, text: str) -> tuple[list[int], list[str]]:
    """One typed segment's ids, and the special tokens typed in it: [MASK] is the mask
    (probe.py's masked_ids), every other special token's spelling that token, in any case; the
    text between them is tokenized as usual."""
    spellings = {tokenizer.piece(i).lower(): i for i in sorted(tokenizer.special_ids | {tokenizer.unk_id})
                 if i != tokenizer.mask_id}
    pattern = re.compile("(" + "|".join(re.escape(s) for s in spellings) + ")", re.IGNORECASE)
    ids, specials = [], []
    for number, chunk in enumerate(pattern.split(text)):
        if number % 2:  # a special token's spelling
            ids.append(spellings[chunk.lower()])
            specials.append(tokenizer.piece(spellings[chunk.lower()]))
        elif chunk.strip():
            ids += masked_ids(tokenizer, chunk) if MASK_PATTERN.search(chunk) else tokenizer.tokenize_to_ids(chunk)
    return ids, specials


def fitted(tokenizer, pieces: list[list[int]], limit: int) -> tuple[list[list[int]], str | None]:
    """The segments cut to the model's `limit` tokens with their special tokens, and what was
    cut, in words (None: nothing). A pair loses tokens from the end of its longer segment, one
    at a time, as the pretraining data trims a pair (BERT's truncate_seq_pair)."""
    room = limit - tokenizer.num_special(pair=len(pieces) == 2)
    lengths = [len(p) for p in pieces]
    if sum(lengths) <= room:
        return pieces, None
    kept = list(lengths)
    while sum(kept) > room:
        longer = max(range(len(kept)), key=lambda i: kept[i])
        kept[longer] -= 1
    said = (f"the first {kept[0]} were kept" if len(kept) == 1
            else f"A was cut to {kept[0]} of its {lengths[0]} and B to {kept[1]} of its {lengths[1]}, the longer first")
    return ([p[:k] for p, k in zip(pieces, kept)],
            f"the text is {sum(lengths):,} tokens; the model reads {limit} with its special tokens: {said}")
