"""Probes: ask a pretrained model, in words, what it learned.

    minibert.fill_mask("checkpoints/albert", "The [MASK] sat on the mat.")
    minibert.detect_replaced("checkpoints/electra", "The cat ate on the mat.")

Fill-mask is the pretraining task itself turned into a question. A masked-LM model was
trained to do exactly one thing: given the words around a [MASK], put a probability on
every token of the vocabulary for what stood there. Reading that distribution for a
sentence of your own is therefore the most direct probe of what the model learned: a model
stuck on the unigram plateau proposes "the" and "," everywhere; one that has learned
context proposes nouns where nouns go, and the right noun for the topic; what it has not
learned shows up just as plainly. Loss curves say how much the model learned, fill-mask
says what. It needs nothing but the MLM head the model already has — no fine-tuning.

ELECTRA's discriminator never predicts tokens, so it cannot fill a mask; its own question
is "which of these tokens were replaced?", one sigmoid per token (`detect_replaced`).

The mask is written "[MASK]" in the text (the spelling of minibert's WordPiece and
SentencePiece vocabularies); "<mask>", RoBERTa's spelling, is accepted too. Every tokenizer
reads the mask as one token that absorbs the space before it, so a mask replaces whole pieces
exactly as in pretraining ("a new [MASK]." is ▁a ▁new [MASK] ., not ▁a ▁new ▁ [MASK] ▁ .), and
as the tokenizer.json minibert exports does in transformers' pipeline. Scores are the softmax over the whole vocabulary at each mask, as in
transformers' fill-mask pipeline, whose token ids and scores these equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from ..tokenizers import load_tokenizer
from ..tokenizers.base import Tokenizer
from ..heads import MaskedLM, ReplacedTokenDetector
from ..pretrained import HEAD_NAMES, MissingHead, from_pretrained

MASK_SPELLINGS = ("[MASK]", "<mask>")
MASK_PATTERN = re.compile("(" + "|".join(re.escape(s) for s in MASK_SPELLINGS) + ")")
MODELS = {"mlm": MaskedLM, "rtd": ReplacedTokenDetector}
# What a command needs and where to find it, added to a missing-head error.
NEEDS = {
    "mlm": "fill-mask needs a masked-LM checkpoint (python train.py --variant bert, roberta, albert or "
           "distilbert, or a Hugging Face *ForMaskedLM); for an ELECTRA discriminator use detect",
    "rtd": "detect needs an ELECTRA discriminator (python train.py --variant electra, or a Hugging Face "
           "ElectraForPreTraining); for a masked-LM checkpoint use fill-mask",
}


@dataclass(frozen=True)
class Candidate:
    """One proposal for a mask: its id, the vocabulary's piece ("▁string", "##ing"), the text
    it stands for ("string", "##ing": the fill-mask pipeline's `token_str`) and its probability."""

    token_id: int
    token: str
    text: str
    score: float


@dataclass(frozen=True)
class Judgement:
    """One token of a text as the discriminator sees it (piece and text as in `Candidate`)."""

    token_id: int
    token: str
    text: str
    probability: float  # that the token was replaced

    @property
    def replaced(self) -> bool:
        return self.probability > 0.5


def fill_mask(model_or_dir, text_or_texts: str | Sequence[str], top_k: int = 5, tokenizer: Tokenizer | None = None):
    """The `top_k` most probable tokens at every mask of a text, best first.

    `model_or_dir`: a MaskedLM, or a checkpoint directory (minibert's, with its tokenizer.model,
    or a Hugging Face one with its vocab.txt or ALBERT spiece.model). A model object needs `tokenizer`. Returns, for one
    text, a list with one list of `Candidate`s per mask (left to right); for a list of texts, a
    list of those.
    """
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k <= 0:
        raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
    model, tokenizer = load(model_or_dir, "mlm", tokenizer)
    texts, single = as_texts(text_or_texts)
    batch = tokenizer.pad([tokenizer.join(masked_ids(tokenizer, t)) for t in texts])
    masks = batch["input_ids"] == tokenizer.mask_id
    candidates = best_candidates(tokenizer, mask_probabilities(model, batch, masks), top_k)
    per_text = list(split(candidates, masks.sum(1).tolist()))
    return per_text[0] if single else per_text


def mask_probabilities(model: MaskedLM, batch: dict[str, torch.Tensor], masks: torch.Tensor) -> torch.Tensor:
    """The MLM head's distribution over the vocabulary at the `masks` positions [B, T] of a
    batch, in row-major order [masks, V]: what fill-mask reads, and what `python -m minibert
    explore` reads at the positions a run's masking chose."""
    with torch.no_grad():  # the last layer and the decoder run at the masks only
        hidden = model.encoder(**batch, needed=masks).last_hidden_state[masks]  # [masks, H]
        return model.predict(hidden).float().softmax(-1)  # [masks, V]


def best_candidates(tokenizer: Tokenizer, probabilities: torch.Tensor, top_k: int) -> list[list[Candidate]]:
    """The `top_k` most probable tokens of each row of `probabilities` [masks, V], best first."""
    scores, ids = probabilities.topk(min(top_k, probabilities.shape[-1]))
    return [[Candidate(*spellings(tokenizer, i), float(s)) for s, i in zip(row_s, row_i)] for row_s, row_i in zip(scores, ids)]


def detect_replaced(model_or_dir, text_or_texts: str | Sequence[str], tokenizer: Tokenizer | None = None):
    """ELECTRA's question: for every token of a text, the probability that it was replaced.

    `model_or_dir`: a ReplacedTokenDetector or a checkpoint directory, as for `fill_mask`.
    Returns, for one text, a list of `Judgement`s (one per token, [CLS] and [SEP] left out);
    for a list of texts, a list of those.
    """
    model, tokenizer = load(model_or_dir, "rtd", tokenizer)
    texts, single = as_texts(text_or_texts)
    batch = tokenizer.batch(texts)
    probabilities = replaced_probabilities(model, batch)
    shown = batch["attention_mask"].bool()
    shown &= (batch["input_ids"] != tokenizer.cls_id) & (batch["input_ids"] != tokenizer.sep_id)
    per_text = [[Judgement(*spellings(tokenizer, i), float(p)) for i, p in zip(ids[row_shown], probs[row_shown])]
                for ids, probs, row_shown in zip(batch["input_ids"], probabilities, shown)]
    return per_text[0] if single else per_text


def replaced_probabilities(model: ReplacedTokenDetector, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The discriminator's probability that each token of a batch was replaced [B, T]."""
    with torch.no_grad():
        return model(**batch).logits.float().sigmoid()


def load(model_or_dir, head: str, tokenizer: Tokenizer | None) -> tuple[nn.Module, Tokenizer]:
    """(model in eval mode with the wanted head, its tokenizer)."""
    if isinstance(model_or_dir, nn.Module):
        model = model_or_dir
        if not isinstance(model, MODELS[head]):
            raise TypeError(f"expected a {MODELS[head].__name__} (a model with a {HEAD_NAMES[head]}), got {type(model).__name__}")
        if tokenizer is None:
            raise ValueError("pass tokenizer= with a model object (a checkpoint directory brings its own)")
        model.eval()
    else:
        directory = Path(model_or_dir)
        try:
            model = from_pretrained(directory, head=head)
        except MissingHead as error:
            raise MissingHead(f"{error}. {NEEDS[head]}") from None
        tokenizer = tokenizer or load_tokenizer(directory)
    tokenizer.check_fits(model.config.vocab_size, str(model_or_dir) if isinstance(model_or_dir, (str, Path)) else "tokenizer=",
                         "pass the tokenizer the model was trained with")
    return model, tokenizer


def spellings(tokenizer: Tokenizer, token_id) -> tuple[int, str, str]:
    """(id, piece, text) of one token."""
    token_id = int(token_id)
    return token_id, tokenizer.piece(token_id), tokenizer.token_text(token_id)


def masked_ids(tokenizer: Tokenizer, text: str) -> list[int]:
    """The text's token ids with [MASK] (or <mask>) as the mask id. The tokenizer reads the
    mask as one token that takes the place of a whole word, the space before it included."""
    if not MASK_PATTERN.search(text):
        raise ValueError(f"no mask in {text!r}: write [MASK] where the model should fill in a word, "
                         f"e.g. \"The [MASK] sat on the mat.\"")
    return tokenizer.tokenize_to_ids(MASK_PATTERN.sub(tokenizer.piece(tokenizer.mask_id), text))


def as_texts(text_or_texts: str | Sequence[str]) -> tuple[list[str], bool]:
    """([texts], whether one text was given)."""
    if isinstance(text_or_texts, str):
        return [text_or_texts], True
    texts = list(text_or_texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("pass a text or a non-empty list of texts")
    return texts, False


def split(items: list, counts: list[int]):
    """Cut `items` into consecutive runs of the given lengths."""
    start = 0
    for count in counts:
        yield items[start:start + count]
        start += count
