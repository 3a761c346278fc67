"""The masked-language-model corruption (BERT §3.1, "Task #1").

MLM hides some input tokens and asks the model to recover them. Two decisions define it:

1. *Which* positions to predict, the masked positions (`Masking.choose`): `mask_prob` of the
   ordinary tokens — never [CLS], [SEP] or [PAD]. BERT's rate is 15%; each variant's default
   run sets its own (variants.py: MASK_PROB, or the variant's entry). BERT, RoBERTa,
   DistilBERT and ELECTRA choose single tokens.
   ALBERT's n-gram masking chooses spans of up to 3 whole words (`Masking.choose_spans`): its
   data script builds word candidates from the SentencePiece pieces and draws n-grams of them,
   of length n with P(n) ∝ 1/n; the `albert` variant does the same, but that its spans stop at
   their segment's end, where the script's n-grams run on across [SEP]. Any run may mask spans
   (`max_span` > 1) of tokens or of whole words (all pieces of a word together, BERT's later
   "whole word masking", which removes the easy cue of guessing a piece from the rest of its
   own word). A span never reaches past a special token: it stays inside its segment.
   *How many* (`count`): each maskable token on its own with chance `mask_prob` ("bernoulli",
   minibert's), or a fixed count per sequence as each release computes it (`MASK_COUNTS`:
   BERT's and ELECTRA's rounding with a cap, RoBERTa's probabilistic rounding, DistilBERT's
   count per batch), drawn without replacement (`Masking.choose_count`). DistilBERT also
   weights the draw toward rare tokens, a chance ∝ count^−α of the corpus's counts
   (`smoothing` α, `token_weights`). Spans and whole words are drawn unit by unit: a fixed
   count is refused with them (`check_count_options`).
2. *What the model sees* at those positions (`Masking.replace`): BERT's 80/10/10 rule.

Every random draw comes from the `generator` passed in, so the same seed gives the same masks.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100  # label of positions the loss skips (torch's cross_entropy default)
# How many positions are masked (`Masking.choose_count`); n = a sequence's real tokens, [CLS] and
# [SEP] counted, as all three releases count them:
#   bernoulli   each maskable token on its own, with chance mask_prob (minibert's default)
#   round       min(max_predictions, max(1, round(n · mask_prob))) per sequence: google-research/bert
#               and google-research/albert create_pretraining_data.py:create_masked_lm_predictions,
#               google-research/electra pretrain/pretrain_helpers.py:mask
#   stochastic  floor(n · mask_prob + U), U uniform in [0, 1), per sequence: fairseq
#               fairseq/data/mask_tokens_dataset.py:MaskTokensDataset.__getitem__ (RoBERTa)
#   batch       ceil(mask_prob · the batch's real tokens), drawn over the whole batch: transformers
#               examples/research_projects/distillation/distiller.py:Distiller.prepare_batch_mlm
MASK_COUNTS = ("bernoulli", "round", "stochastic", "batch")


class Masking:
    """A masking recipe bound to a vocabulary's ids: `masking(input_ids, generator)` -> (masked ids, labels).

    never_masked    ids never chosen for prediction ([CLS], [SEP], [PAD], [MASK])
    never_drawn     ids never drawn as a random replacement (those, and [UNK])
    word_starts     bool [V], True where a token begins a word: whole-word units; None = token units
    count           how many positions: one of MASK_COUNTS; max_predictions caps "round" (None: no cap)
    smoothing       α of DistilBERT's frequency-smoothed choice (0 = off), over `token_counts` [V]
    pad_id          the [PAD] id, so that a fixed count counts the real tokens (None: no padding)
    """

    def __init__(self, *, vocab_size: int, mask_id: int, never_masked: Sequence[int], never_drawn: Sequence[int],
                 mask_prob: float, replace_probs: Sequence[float], max_span: int, word_starts: torch.Tensor | None,
                 count: str, smoothing: float, max_predictions: int | None = None,
                 token_counts: torch.Tensor | None = None, pad_id: int | None = None):
        check_mask_options(mask_prob, replace_probs, max_span)
        check_count_options(count, max_predictions, smoothing, max_span, word_starts is not None)
        if smoothing and (token_counts is None or len(token_counts) != vocab_size):
            raise ValueError(f"smoothing={smoothing} weights tokens by their corpus counts: pass token_counts, one per id of the {vocab_size}")
        if not 0 <= mask_id < vocab_size:
            raise ValueError(f"mask_id={mask_id} is outside the vocabulary of size {vocab_size}")
        self.mask_id, self.mask_prob, self.max_span = mask_id, mask_prob, max_span
        self.count, self.max_predictions, self.pad_id = count, max_predictions, pad_id
        self.replace_probs = tuple(replace_probs)
        self.special = torch.zeros(vocab_size, dtype=torch.bool)  # [V]
        self.special[list(never_masked)] = True
        self.weights = token_weights(token_counts, smoothing, self.special) if smoothing else None  # [V] or None
        drawn = torch.ones(vocab_size, dtype=torch.bool)
        drawn[[*never_drawn, mask_id]] = False
        self.ordinary_ids = drawn.nonzero().squeeze(1)  # the ids a random replacement is drawn from
        if not len(self.ordinary_ids):
            raise ValueError(f"every id of the vocabulary of size {vocab_size} is special: nothing to draw a random token from")
        self.word_starts = word_starts
        self.span_probs = 1.0 / torch.arange(1, max_span + 1, dtype=torch.float)  # P(n) ∝ 1/n ...
        self.span_probs /= self.span_probs.sum()  # ... normalised
        # The chance that a unit begins a span. Not mask_prob / E[n]: spans begun a unit or two
        # apart overlap, and a token covered twice counts once, so that rate would fall short of
        # mask_prob, the more so the longer the spans; `begin_probability` solves for the rate
        # that covers mask_prob. Without spans (max_span = 1) it is mask_prob itself.
        self.begin_prob = begin_probability(mask_prob, self.span_probs)

    @classmethod
    def for_tokenizer(cls, tokenizer, *, mask_prob: float, replace_probs: Sequence[float], max_span: int,
                      whole_word: bool, **counting) -> "Masking":
        """`counting`: count, max_predictions, smoothing and token_counts, as the constructor takes them."""
        if whole_word and not hasattr(tokenizer, "word_starts"):
            raise ValueError(f"whole-word masking needs to know where words start, which {type(tokenizer).__name__} "
                             f"does not provide; drop --whole-word")
        return cls(vocab_size=tokenizer.vocab_size, mask_id=tokenizer.mask_id, never_masked=sorted(tokenizer.special_ids),
                   never_drawn=sorted(tokenizer.special_ids | {tokenizer.unk_id}), mask_prob=mask_prob,
                   replace_probs=replace_probs, max_span=max_span, word_starts=tokenizer.word_starts if whole_word else None,
                   pad_id=tokenizer.pad_id, **counting)

    def __call__(self, input_ids: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """input ids [B, T] -> (what the model sees [B, T], labels [B, T]: the original id at
        the masked positions, IGNORE_INDEX elsewhere)."""
        can_mask = ~self.special[input_ids]  # [B, T]
        masked = self.choose(input_ids, can_mask, generator)
        return self.replace(input_ids, masked, generator), torch.where(masked, input_ids, IGNORE_INDEX)

    def choose(self, input_ids: torch.Tensor, can_mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The masked positions, the ones to predict [B, T] bool: `mask_prob` of the maskable tokens on average.

        BERT "masks 15% of all WordPiece tokens in each sequence at random" (§3.1): by default
        each maskable token is chosen on its own, with chance `mask_prob`. The releases' data
        code picks a fixed count per sequence instead (`choose_count`): the same rate on
        average, varying less between sequences. Spans and whole words are ALBERT's n-gram
        masking: `choose_spans`.
        """
        if self.max_span > 1 or self.word_starts is not None:
            return self.choose_spans(input_ids, can_mask, generator).chosen
        if self.count != "bernoulli":
            return self.choose_count(input_ids, can_mask, generator)
        return can_mask & (torch.rand(can_mask.shape, generator=generator) < self.mask_prob)

    def choose_count(self, input_ids: torch.Tensor, can_mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The masked positions [B, T] bool as the releases choose them: a fixed count of them
        (`MASK_COUNTS`), never more than there are maskable tokens, drawn without replacement.

        Each maskable position gets a key log(U) / w, U uniform and w its token's weight (1, or
        DistilBERT's count^−α); the positions with the largest keys are a draw without
        replacement with chances ∝ w (Efraimidis and Spirakis), the draw DistilBERT's
        torch.multinomial(replacement=False) makes. Rounding is half to even, as Python 3's
        round and tf.round do.
        """
        real = torch.ones_like(can_mask) if self.pad_id is None else input_ids != self.pad_id  # [B, T]
        n = real.sum(1, dtype=torch.float64)  # [B] real tokens, [CLS] and [SEP] included
        if self.count == "round":
            counts = torch.round(n * self.mask_prob).clamp(1, self.max_predictions)
        elif self.count == "stochastic":
            counts = torch.floor(n * self.mask_prob + torch.rand(n.shape, generator=generator, dtype=torch.float64))
        else:  # "batch": one count for the whole batch, its positions drawn from all of its rows
            counts = torch.tensor([math.ceil(self.mask_prob * float(n.sum()))], dtype=torch.float64)
        weights = can_mask.float() if self.weights is None else self.weights[input_ids] * can_mask  # [B, T]
        keys = torch.rand(can_mask.shape, generator=generator).log() / weights  # [B, T]; -inf where w = 0
        keys = keys.masked_fill(~can_mask, -math.inf).view(len(counts), -1)  # [rows, positions]: B rows, or one
        rank = keys.argsort(dim=1, descending=True, stable=True).argsort(dim=1)  # each position's place in the draw
        return can_mask & (rank < counts[:, None]).view_as(can_mask)

    def choose_spans(self, input_ids: torch.Tensor, can_mask: torch.Tensor, generator: torch.Generator) -> DrawnSpans:
        """The masked positions as spans of 1..max_span units covering `mask_prob` of the maskable
        tokens on average, `.chosen` [B, T] bool, with the spans that chose them (`DrawnSpans`):
        ALBERT's n-gram masking (ALBERT §4.1 and its data script create_pretraining_data.py,
        spans of up to 3 words), and whole-word masking (max_span = 1).

        A unit is a token, or a word when `word_starts` is set; each special token is a unit
        of its own. Every unit begins a span with probability `begin_prob`, its length drawn
        with P(n) ∝ 1/n; spans may overlap, which `begin_prob` accounts for, and a span
        stops where its segment ends ([SEP]). The plain loop it computes, for each sequence:

            for u, unit in enumerate(units):                    # a word, or a token
                if unit is maskable and random() < begin_prob:  # a span begins here
                    n = draw 1..max_span with P(n) ∝ 1/n
                    for later in units[u : u + n]:              # n units, or fewer:
                        if later is in unit's segment:          # never past a [SEP]
                            mask every token of later

        The code does it for the whole batch at once: each unit's span length (0: none begins)
        scattered onto a [B, units] grid, then a unit is covered when a span begins k units
        before it, in its segment, and is longer than k, for k < max_span. `begin_prob` comes
        from `begin_probability`, a bisection done once. The mask alone cannot say where one span
        ends and the next begins (two may abut or overlap), so the spans come back beside it:
        `choose` keeps the mask, and the explorer, which brackets each span, the rest.
        """
        starts = can_mask.new_ones(input_ids.shape) if self.word_starts is None else self.word_starts[input_ids] | ~can_mask
        starts |= F.pad(~can_mask[:, :-1], (1, 0), value=True)  # the first token, and the one after a special one, begin units too
        unit = starts.cumsum(1) - 1  # [B, T]: which unit each token belongs to
        segment = (~can_mask).cumsum(1)  # [B, T]: special tokens up to here; a span stays within one segment
        begins = starts & can_mask & (torch.rand(starts.shape, generator=generator) < self.begin_prob)
        lengths = 1 + torch.multinomial(self.span_probs, begins.numel(), replacement=True, generator=generator).view_as(begins)
        units = input_ids.shape[1] + self.max_span  # room for a span to run past the last unit
        unit_segment = segment.new_full((len(unit), units), -1).scatter_(1, unit, segment)  # [B, units]
        span = torch.zeros_like(unit_segment).scatter_reduce_(1, unit, lengths * begins, "amax")  # [B, units]: 0 = none begins
        covered = torch.zeros_like(span, dtype=torch.bool)  # [B, units]
        for k in range(self.max_span):  # covered: a span begins k units before, is longer than k, in the same segment
            covered[:, k:] |= (span[:, :units - k] > k) & (unit_segment[:, :units - k] == unit_segment[:, k:])
        return DrawnSpans(can_mask & covered.gather(1, unit), span, unit, unit_segment, can_mask)  # [B, units] -> [B, T]

    def replace(self, input_ids: torch.Tensor, masked: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """BERT's 80/10/10 rule: a masked position shows [MASK] (80%), a random token (10%), or its own (10%).

        Why not always [MASK]? [MASK] never occurs when the model is fine-tuned, so a model
        that only learned "predict at [MASK]" would have no reason to build a good
        representation of the other tokens. Because any token may be corrupted or be the one
        to predict, the model must keep a contextual representation of every input token.

        The random token is drawn from `ordinary_ids`: never a special token, [UNK] or [MASK].
        BERT draws from the whole vocabulary (create_pretraining_data.py: `rng.randint(0,
        len(vocab_words) - 1)`), so its random replacement is at times [CLS], [SEP],
        [PAD] or [MASK] itself; here a "random token" is always a word piece the text could
        hold (docs/departures.md).
        """
        p_mask, p_random, _ = self.replace_probs
        draw = torch.rand(input_ids.shape, generator=generator)
        random_ids = self.ordinary_ids[torch.randint(len(self.ordinary_ids), input_ids.shape, generator=generator)]
        shown = torch.where(masked & (draw < p_mask), self.mask_id, input_ids)
        return torch.where(masked & (draw >= p_mask) & (draw < p_mask + p_random), random_ids, shown)


class DrawnSpans(NamedTuple):
    """What `Masking.choose_spans` returns: the masked positions and the spans that chose them."""

    chosen: torch.Tensor  # [B, T] bool, the masked positions (all `choose` keeps)
    span: torch.Tensor  # [B, units] each unit's span length in units, 0 where none begins
    unit: torch.Tensor  # [B, T] which unit each token belongs to
    unit_segment: torch.Tensor  # [B, units] each unit's segment (-1 past the last unit)
    can_mask: torch.Tensor  # [B, T] bool, the maskable tokens

    def listed(self) -> list[list[tuple[int, int]]]:
        """The spans one by one, per row: the (first, last) maskable token of each, its units cut
        where its segment ends, as `covered` cuts them."""
        rows = []
        for b in range(len(self.span)):
            spans = []
            for u in self.span[b].nonzero()[:, 0].tolist():
                n = int(self.span[b, u])
                last = u + int((self.unit_segment[b, u:u + n] == self.unit_segment[b, u]).sum()) - 1
                tokens = (self.can_mask[b] & (self.unit[b] >= u) & (self.unit[b] <= last)).nonzero()[:, 0]
                spans.append((int(tokens[0]), int(tokens[-1])))
            rows.append(spans)
        return rows


def begin_probability(mask_prob: float, span_probs: torch.Tensor) -> float:
    """The chance q that a unit begins a span, so that spans cover `mask_prob` of the units.

    A unit is covered when a span begins k units before it and is longer than k, for some k
    in 0..max_span-1: independent events of chance q · P(n > k). So the covered share is
    1 - Π_k (1 - q · P(n > k)). The naive q = mask_prob / E[n] counts a unit that two spans
    cover twice, so it covers less than mask_prob (tests/test_data_masking.py computes how much
    less for the albert variant's spans). The covered share is a polynomial in q of degree
    max_span that grows with q, so bisection finds q for any max_span; 50 halvings pin it to
    1e-15. With max_span = 1 the product is 1 - q: q = mask_prob.
    """
    longer = span_probs.flip(0).cumsum(0).flip(0).tolist()  # P(n > k) for k = 0 .. max_span - 1
    low, high = 0.0, 1.0
    for _ in range(50):  # bisection: the covered share grows with q
        q = (low + high) / 2
        uncovered = 1.0
        for p in longer:
            uncovered *= 1 - q * p
        low, high = (q, high) if 1 - uncovered < mask_prob else (low, q)
    return (low + high) / 2


def token_weights(token_counts: torch.Tensor, smoothing: float, special: torch.Tensor) -> torch.Tensor:
    """DistilBERT's frequency-smoothed choice [V]: weight max(count, 1)^−α, 0 for special ids.

    The released distillation script (transformers examples/research_projects/distillation/
    train.py, `--mlm_smoothing 0.7`, "to emphasize more rare tokens", after XLM and word2vec)
    draws the masked tokens with these weights: a frequent token such as "the" would else
    take a large share of the predictions while teaching little. α = 0 is the uniform choice."""
    weights = (torch.as_tensor(token_counts, dtype=torch.float64).clamp(min=1.0) ** -smoothing).float()
    return weights.masked_fill(special, 0.0)


def check_count_options(count: str, max_predictions: int | None, smoothing: float, max_span: int, whole_word: bool) -> None:
    """Fail early on a count rule that cannot apply, spelled as the flags that set it."""
    if count not in MASK_COUNTS:
        raise ValueError(f"--mask-count must be one of {', '.join(MASK_COUNTS)}; got {count!r}")
    if count != "bernoulli" and (max_span > 1 or whole_word):
        raise ValueError(f"--mask-count {count} counts single tokens, but spans and whole words are drawn unit by unit; "
                         f"drop --max-span and --whole-word (--no-whole-word --max-span 1) or use --mask-count bernoulli")
    if max_predictions is not None and (count != "round" or max_predictions < 1):
        raise ValueError(f"--max-predictions {max_predictions} caps the count of --mask-count round: give a positive "
                         f"number with --mask-count round, or drop it")
    if not (math.isfinite(smoothing) and smoothing >= 0) or (smoothing and count == "bernoulli"):
        raise ValueError(f"--mask-smoothing {smoothing} weights which tokens a fixed count draws, by count^-A: give a finite "
                         f"A >= 0 with --mask-count round, stochastic or batch (DistilBERT's: 0.7 with batch) or drop it")


def default_max_predictions(seq_len: int, mask_prob: float) -> int:
    """The cap of --mask-count round when none is given: google-research/bert's README pairs
    max_seq_length 128 with max_predictions_per_seq 20 at 15% ("around max_seq_length *
    masked_lm_prob": a little above the 19.2 the rate asks for), NVIDIA's BERT recipe 512 with 80;
    the same headroom at any --seq-len and --mask-prob."""
    return math.ceil(seq_len * mask_prob * 20 / (128 * 0.15) - 1e-9)


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
