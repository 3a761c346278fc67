"""Step 5 of the pipeline: the masked-language-model corruption (BERT §3.1, "Task #1").

MLM hides some input tokens and asks the model to recover them. Two decisions define it:

1. *Which* positions to predict (`select_positions`): about `mask_prob` of the ordinary
   tokens (BERT's 15%; 40% in the default runs, `Settings.mask_prob`) — never
   [CLS]/[SEP]/[PAD]. The unit is a token, or a whole word with `word_starts` (all pieces
   of a word together, BERT's later "whole word masking"), which removes the easy cue of
   guessing a piece from the rest of its own word; `max_span` > 1 masks spans of up to that
   many units with P(n) ∝ 1/n. ALBERT's n-gram masking is spans of up to 3 *words*: its
   data script (create_pretraining_data.py) builds word candidates from the SentencePiece
   pieces (whole-word masking on by default) and draws n-grams of them; the `albert`
   variant does the same (`whole_word` and `max_span=3`).
2. *What the model sees* at those positions (`replace_selected`): BERT's 80/10/10 rule.

`mask_tokens` is the one entry point; every random draw comes from the `generator`
passed in, so the same generator seed always gives the same masks.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch

IGNORE_INDEX = -100  # label of positions the loss skips (torch's cross_entropy default)


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    vocab_size: int,
    mask_token_id: int,
    mask_prob: float = 0.15,  # BERT's; the default runs pass Settings.mask_prob (0.4)
    generator: torch.Generator | None = None,
    replace_probs: Sequence[float] = (0.8, 0.1, 0.1),
    word_starts: torch.Tensor | None = None,
    max_span: int = 1,
    special_ids: Iterable[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt a batch for MLM; returns `(masked_input_ids, labels)`, both LongTensors.

    input_ids:           token ids, any shape [..., seq_len].
    special_tokens_mask: same shape, True where a token must never be selected
                         ([CLS], [SEP], padding).
    replace_probs:       (to [MASK], to a random token, unchanged) for selected tokens;
                         BERT (0.8, 0.1, 0.1), ELECTRA (0.85, 0.0, 0.15).
    word_starts:         same shape, True where a token begins a word: enables whole-word
                         masking. None: every token is its own unit.
    max_span:            mask spans of 1..max_span units, P(n) ∝ 1/n (ALBERT: 3 words).
    special_ids:         ids never drawn as random replacements ([MASK] never is).

    labels hold the original id at selected positions and -100 everywhere else.
    """
    _check_tensors(input_ids, special_tokens_mask, word_starts)
    check_mask_options(mask_prob, replace_probs, max_span)
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id={mask_token_id} is outside the vocabulary of size {vocab_size}")
    shape = input_ids.shape
    ids = input_ids.reshape(-1, shape[-1]).long()
    can_mask = ~special_tokens_mask.reshape(ids.shape).bool()
    unit_starts = torch.ones_like(can_mask) if word_starts is None else word_starts.reshape(ids.shape).bool()
    selected = select_positions(can_mask, unit_starts, mask_prob, max_span, generator)
    never_sampled = {int(i) for i in special_ids} | {mask_token_id}
    if not all(0 <= i < vocab_size for i in never_sampled) or len(never_sampled) >= vocab_size:
        raise ValueError(f"special_ids={sorted(never_sampled)} must be ids inside a vocabulary of size {vocab_size} and leave some ids to sample")
    masked = replace_selected(ids, selected, replace_probs, vocab_size, mask_token_id, never_sampled, generator)
    labels = torch.where(selected, ids, IGNORE_INDEX)
    return masked.reshape(shape), labels.reshape(shape)


def select_positions(
    can_mask: torch.Tensor,
    unit_starts: torch.Tensor,
    mask_prob: float,
    max_span: int,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Choose ~`mask_prob` of the maskable tokens of each sequence [batch, seq_len], in whole units.

    A unit is a token, or a word when `unit_starts` marks word beginnings; each special
    token is a unit of its own, so no span reaches across it. A unit begins a span with
    probability mask_prob / E[n], so that spans of E[n] units cover ~mask_prob of them.
    """
    starts = unit_starts | ~can_mask
    starts[:, 0] = True
    starts[:, 1:] |= ~can_mask[:, :-1]  # a token right after a special one also starts a unit
    unit = torch.cumsum(starts, dim=1) - 1  # which unit each position belongs to
    span_probs = 1.0 / torch.arange(1, max_span + 1, dtype=torch.float)
    span_probs /= span_probs.sum()
    mean_span = float((span_probs * torch.arange(1, max_span + 1)).sum())
    begins = starts & can_mask & (torch.rand(starts.shape, generator=generator) < mask_prob / mean_span)
    lengths = 1 + torch.multinomial(span_probs, starts.numel(), replacement=True, generator=generator).view(starts.shape)
    covered = torch.zeros(starts.shape[0], starts.shape[1] + max_span, dtype=torch.bool)
    for step in range(max_span):
        sequences, cols = (begins & (lengths > step)).nonzero(as_tuple=True)
        covered[sequences, unit[sequences, cols] + step] = True
    return can_mask & covered.gather(1, unit)


def replace_selected(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    replace_probs: Sequence[float],
    vocab_size: int,
    mask_token_id: int,
    never_sampled: set[int],
    generator: torch.Generator | None,
) -> torch.Tensor:
    """BERT's 80/10/10 rule: a selected token becomes [MASK] (80%), a random token (10%), or stays (10%).

    Why not always [MASK]? [MASK] never occurs when the model is fine-tuned, so a model
    that only learned "predict at [MASK]" would have no reason to build a good
    representation of the other tokens. Because any token may be corrupted or be the one
    to predict, the model must keep a contextual representation of every input token.
    """
    p_mask, p_random, _ = replace_probs
    draw = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (draw < p_mask)
    to_random = selected & (draw >= p_mask) & (draw < p_mask + p_random)
    random_ids = torch.randint(vocab_size - len(never_sampled), input_ids.shape, generator=generator)
    for special in sorted(never_sampled):  # skip over the special ids: k-th allowed id
        random_ids += random_ids >= special
    masked = torch.where(to_mask, mask_token_id, input_ids)
    return torch.where(to_random, random_ids, masked)


def check_mask_options(mask_prob: float, replace_probs: Sequence[float], max_span: int) -> None:
    """Fail early, with the fix in the message, on a masking setting that makes no sense."""
    if not 0.0 <= mask_prob <= 1.0:
        raise ValueError(f"mask_prob={mask_prob} must be a probability in [0, 1] (BERT uses 0.15)")
    check_replace_probs(replace_probs)
    if not (isinstance(max_span, int) and max_span >= 1):
        raise ValueError(f"max_span={max_span} must be a positive integer (1 = single units, ALBERT uses 3)")


def check_replace_probs(replace_probs: Sequence[float], name: str = "replace_probs") -> None:
    """The 80/10/10 split must be three shares of one whole; `name` is how the caller spells it."""
    if len(replace_probs) != 3 or min(replace_probs) < 0 or abs(sum(replace_probs) - 1.0) > 1e-6:
        raise ValueError(f"{name} {list(replace_probs)} must be 3 non-negative numbers summing to 1: ([MASK], random, unchanged)")


def _check_tensors(input_ids, special_tokens_mask, word_starts) -> None:
    if input_ids.dim() == 0 or input_ids.dtype.is_floating_point:
        raise ValueError(f"input_ids must be an integer tensor of shape [..., seq_len], got {input_ids.dtype} {tuple(input_ids.shape)}")
    for name, tensor in (("special_tokens_mask", special_tokens_mask), ("word_starts", word_starts)):
        if tensor is not None and tensor.shape != input_ids.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {tuple(input_ids.shape)}; they must match")
