"""Replaced token detection (ELECTRA): learn from every token, not just the masked ones (the paper's 15%).

A small generator plays BERT's game — guess the masked tokens (MLM) — and its guesses are
written into the masked positions. The discriminator (the model we keep) sees the result
and says, for EVERY token, whether it is the original or a replacement:

    masked ids ─► generator ─► sample at masked positions ─► corrupted ids
    corrupted ids ─► discriminator ─► "replaced?" per token

* The sample is drawn with Gumbel-max at temperature 1 (argmax of logits + Gumbel noise,
  an exact draw from softmax(logits)) under no_grad: the discriminator's loss never flows
  back into the generator through the sample. The generator learns from its MLM loss only.
* A sampled token that equals the original counts as "original" — the label says whether
  the token CHANGED, not whether it was masked.
* Generator and discriminator share one `Embeddings` module: the token table, the segment
  and position tables where the model has them (rotary positions, the default runs', have no
  table) and the embedding LayerNorm; each projects them to its own width. The generator's
  MLM decoder is tied to those shared word embeddings.
* The generator is small — about 1/4 of the discriminator's width. A generator that is too
  good makes the discriminator's task impossible, and too little of its compute is left.
* loss = mlm_weight · generator MLM + rtd_weight · `detection_loss` (heads.py: binary CE
  averaged over the real tokens): 1 and 50 in the electra variant (minibert/variants.py says why 50).
* `tokens="masked"` is the paper's own diagnostic, "ELECTRA 15%" (its section 3.5): the
  same model, but the discriminator's loss reads only the masked positions, as MLM's does.
  It isolates the claim that learning from EVERY token is where the efficiency comes from.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..data.masking import IGNORE_INDEX
from ..heads import MaskedLM, ReplacedTokenDetector, detection_loss
from .mlm import mlm_metrics

GENERATOR_HEADS = ("scaled", "64-wide")  # the generator's attention heads (generator_config), --generator-heads
RTD_TOKENS = ("all", "masked")  # which tokens the detection loss reads: all (ELECTRA), or "ELECTRA 15%"'s, --rtd-tokens



def generator_config(config: ModelConfig, fraction: float, heads: str) -> ModelConfig:
    """The discriminator's config scaled to `fraction` of its width (hidden, heads, FFN);
    same depth, the same `embedding_size` E (the tables are shared), written out where the
    discriminator's is None (E = its H). E may exceed the generator's width: its projection
    then maps E down to H, as in ELECTRA-base (E = 768, H = 256).

    `heads`, how many attention heads (GENERATOR_HEADS): "scaled" is
    round(heads · fraction), at least 1; "64-wide" is ELECTRA's rule, max(1, width // 64) heads
    (google-research/electra run_pretraining.py:get_generator_config). They agree at ELECTRA's
    published sizes (heads of 64 dimensions in both models) and at the default run's, where
    neither keeps the discriminator's head width: a generator 32 wide gets 1 head of 32
    dimensions, against the discriminator's 2 of 64."""
    if heads not in GENERATOR_HEADS:
        raise ValueError(f"--generator-heads must be one of {', '.join(GENERATOR_HEADS)}; got {heads!r}")
    width = round(config.hidden_size * fraction)
    heads = max(1, round(config.num_heads * fraction)) if heads == "scaled" else max(1, width // 64)
    hidden = max(heads, width // heads * heads)
    return config.replace(
        hidden_size=hidden, num_heads=heads, intermediate_size=max(1, round(config.intermediate_size * fraction)),
        embedding_size=config.embedding_size or config.hidden_size, pooler=False,
    )


def build_generator(discriminator: ReplacedTokenDetector, fraction: float, generator: MaskedLM | None, heads: str) -> MaskedLM:
    """A small MaskedLM whose embeddings ARE the discriminator's (one module, shared);
    `generator`: a pretrained one to use instead (its own embedding tables are dropped)."""
    generator = generator or MaskedLM(generator_config(discriminator.config, fraction, heads))
    generator.encoder.embeddings = discriminator.encoder.embeddings
    return generator


def gumbel_max_sample(logits: torch.Tensor) -> torch.Tensor:
    """One draw per row from softmax(logits): argmax(logits + Gumbel noise). No gradient."""
    with torch.no_grad():
        uniform = torch.rand(logits.shape, device=logits.device).clamp_min(1e-20)
        return (logits.float() - torch.log(-torch.log(uniform))).argmax(-1)


def replace_masked(input_ids, labels, samples) -> tuple[torch.Tensor, torch.Tensor]:
    """Write the generator's `samples` (one per masked position, in row-major order) into
    the masked positions; return (corrupted ids, 1 where a token differs from the original)."""
    masked = labels != IGNORE_INDEX
    corrupted = input_ids.masked_scatter(masked, samples)
    original = torch.where(masked, labels, input_ids)
    return corrupted, (corrupted != original).long()


class ReplacedTokenDetection(nn.Module):
    """An `Objective`: loss = mlm_weight · generator MLM + rtd_weight · `detection_loss` over `tokens`."""

    shares_pass = False  # the discriminator reads the corrupted batch, not the masked one
    reads_pooler = False

    def __init__(self, discriminator: ReplacedTokenDetector, generator_fraction: float, mlm_weight: float,
                 rtd_weight: float, generator: MaskedLM | None, tokens: str, generator_heads: str):
        super().__init__()
        if tokens not in RTD_TOKENS:
            raise ValueError(f"tokens must be one of {', '.join(RTD_TOKENS)}; got {tokens!r}")
        self.generator = build_generator(discriminator, generator_fraction, generator, generator_heads)
        self.mlm_weight, self.rtd_weight, self.tokens = mlm_weight, rtd_weight, tokens

    def needed_positions(self, batch):
        return None  # never asked: this objective reads no shared pass (shares_pass is False)

    def forward(self, model, batch, output=None):
        ids, mask, types, labels = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], batch["labels"]
        hidden = self.generator.encoder(ids, mask, types, needed=labels != IGNORE_INDEX).last_hidden_state  # [B, T, H_gen]
        mlm_loss, logits, targets = self.generator.masked_lm_loss(hidden, labels)  # logits [masked, V]

        corrupted, replaced = replace_masked(ids, labels, gumbel_max_sample(logits))  # [masked] samples -> [B, T] ids
        scores = model(corrupted, mask, types).logits  # [B, T]: one "replaced?" score per token

        real, masked = mask.bool(), labels != IGNORE_INDEX
        rtd_loss = detection_loss(scores, replaced, real if self.tokens == "all" else masked)
        metrics = mlm_metrics(mlm_loss, logits, targets)
        metrics.update(rtd_loss=rtd_loss.detach(), **detection_metrics(scores[real].detach(), replaced[real]),
                       rtd_masked_auc=ranked_auc(scores[masked].detach(), replaced[masked].bool()),
                       replaced_fraction=replaced[real].float().mean())
        return self.mlm_weight * mlm_loss + self.rtd_weight * rtd_loss, metrics


def detection_metrics(scores: torch.Tensor, replaced: torch.Tensor) -> dict[str, torch.Tensor]:
    """How well the discriminator finds replacements, over the real tokens of a batch.

    Accuracy alone hides failure: only a minority of tokens is replaced (at most the masked
    share, fewer as the generator learns, since a right guess counts as original; the
    `replaced_fraction` metric reports it, docs/results.md section 4 a run's), so answering
    "original" everywhere scores 1 minus that share. So, as the original ELECTRA code
    reports, also precision and recall of the "replaced" call (score > 0), and the ROC AUC:
    the chance that a random replaced token scores higher than a random original one (0.5 =
    no skill), computed from the ranks of the scores (Mann-Whitney); 0.5 when a batch lacks
    either kind.
    """
    replaced = replaced.bool()
    called = scores > 0
    hits = (called & replaced).sum().float()
    return {
        "rtd_accuracy": (called == replaced).float().mean(),
        "rtd_precision": hits / called.sum().clamp_min(1),
        "rtd_recall": hits / replaced.sum().float().clamp_min(1),
        "rtd_auc": ranked_auc(scores, replaced),
    }


def ranked_auc(scores: torch.Tensor, replaced: torch.Tensor) -> torch.Tensor:
    """ROC AUC of `scores` for the bool `replaced`, from the ranks (Mann-Whitney); 0.5 when
    either kind is missing."""
    n_replaced, n_original = replaced.sum().float(), (~replaced).sum().float()
    if n_replaced == 0 or n_original == 0:
        return torch.tensor(0.5, device=scores.device)
    ranks = torch.empty_like(scores, dtype=torch.float)
    ranks[scores.argsort()] = torch.arange(1, len(scores) + 1, dtype=torch.float, device=scores.device)
    return (ranks[replaced].sum() - n_replaced * (n_replaced + 1) / 2) / (n_replaced * n_original)
