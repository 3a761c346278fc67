"""Heads: what sits on top of the encoder for each task, and the models they make.

    MaskedLMHead        H → E, activation, LayerNorm, decoder tied to the word embeddings
    SentencePairHead    2 classes on the pooled output (NSP for BERT, SOP for ALBERT)
    ReplacedTokenHead   one logit per token: "was this token replaced?" (ELECTRA)
    ClassificationHead  num_labels on the pooled output, or on every token (fine-tuning)

A task model is an `Encoder` plus one head: `MaskedLM`, `ReplacedTokenDetector`,
`SequenceClassifier`, `TokenClassifier`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .fused_cross_entropy import linear_cross_entropy
from .data.masking import IGNORE_INDEX
from .model import ACTIVATIONS, Encoder, ModelOutput, init_weights


@dataclass
class MaskedLMOutput(ModelOutput):
    """`MaskedLM`'s output. Without labels: `logits` [B, T, V] over the whole grid. With
    labels: `loss`, and `labelled_logits` [labelled, V] at the labelled positions only, in
    row-major order (the sparse prediction of `MaskedLM.masked_lm_loss`)."""

    logits: torch.Tensor | None = None
    labelled_logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


@dataclass
class ReplacedTokenOutput(ModelOutput):
    """`ReplacedTokenDetector`'s output: `logits` [B, T], one "was this token replaced?"
    score per position (positive = replaced); `loss` with labels."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


@dataclass
class ClassifierOutput(ModelOutput):
    """`SequenceClassifier`'s output: `logits` [B, num_labels] (one label: [B, 1] regression
    scores); `loss` with labels."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


@dataclass
class TokenClassifierOutput(ModelOutput):
    """`TokenClassifier`'s output: `logits` [B, T, num_labels], a tag score per position;
    `loss` with labels (exact at labelled positions, where the last layer ran)."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


class MaskedLMHead(nn.Module):
    """Predict the original token at masked positions.

    The decoder reuses the input word-embedding table (weight tying, as in BERT): the same
    vector that represents token t on the way in scores token t on the way out. When E ≠ H
    the transform maps H → E first, so the features match the table's width: down for ALBERT
    (E < H), up for ELECTRA's base and large generators (E = 768 or 1024 > H = 256) — the
    same dense → activation → LayerNorm(E) as ELECTRA's generator_predictions.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.embedding_dim)
        self.act = ACTIVATIONS[config.activation]
        self.norm = nn.LayerNorm(config.embedding_dim, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def features(self, hidden: torch.Tensor) -> torch.Tensor:
        """What the decoder reads: H → E, activation, LayerNorm."""
        return self.norm(self.act(self.transform(hidden)))

    def forward(self, hidden: torch.Tensor, embedding_table: torch.Tensor) -> torch.Tensor:
        """hidden [..., H] -> logits [..., V], scored against the word-embedding table [V, E]."""
        return F.linear(self.features(hidden), embedding_table, self.bias)


class SentencePairHead(nn.Module):
    """Two classes from the pooled [CLS] vector: NSP (is B the real next segment?) or SOP
    (are the two segments in their original order?)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(pooled)


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: one logit per token, positive = "replaced"."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.activation]
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)


def replaced_token_loss(logits, labels, attention_mask=None) -> torch.Tensor:
    """Binary cross-entropy averaged over the real (non-padding) tokens."""
    if attention_mask is not None:
        real = attention_mask.bool()
        logits, labels = logits[real], labels[real]
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


class ClassificationHead(nn.Module):
    """Sequence classification from the pooled vector (or the first token without a pooler);
    applied to every token's vector, token classification."""

    def __init__(self, config: ModelConfig, num_labels: int):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))


def pooled_or_first(output: ModelOutput) -> torch.Tensor:
    """[B, H]: the pooled vector, or the first position's state (computed whenever a pooler or a
    sentence-level `needed` asks for position 0)."""
    return output.pooler_output if output.pooler_output is not None else output.needed_hidden_state[:, 0]


def encoder_fields(output: ModelOutput) -> dict:
    """The encoder's fields, carried into a task model's output (which adds logits and loss)."""
    return {f.name: getattr(output, f.name) for f in dataclasses.fields(ModelOutput)}


def cls_position(input_ids: torch.Tensor) -> torch.Tensor:
    """[B, T] bool, True at position 0: where `pooled_or_first` reads (the Encoder's `needed`)."""
    first = torch.zeros_like(input_ids, dtype=torch.bool)
    first[:, 0] = True
    return first


class EncoderWithHead(nn.Module):
    """A task model: the Encoder, then one head built by `make_head(config)` and initialised
    like the encoder (the head is built after the encoder, so a seed gives the same weights)."""

    def __init__(self, config: ModelConfig, make_head):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.head = make_head(config)
        init_weights(self.head, config)


class MaskedLM(EncoderWithHead):
    """Encoder + MLM head whose decoder is the encoder's own word-embedding table."""

    def __init__(self, config: ModelConfig):
        super().__init__(config, MaskedLMHead)

    @property
    def embedding_table(self) -> torch.Tensor:
        """[V, E]: the input word embeddings, which the decoder reuses (weight tying)."""
        return self.encoder.embeddings.word_embeddings.weight

    def predict(self, hidden: torch.Tensor) -> torch.Tensor:
        """Final hidden states [..., H] -> vocabulary logits [..., V]."""
        return self.head(hidden, self.embedding_table)

    def masked_lm_loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The masked-LM loss: mean cross-entropy of the prediction at each labelled position.

        The ONE place it is computed: `forward(labels=...)` and the pretraining objective
        (objectives/mlm.py) both call it. hidden [B, T, H] (exact at the labelled positions),
        labels [B, T] -> (loss, logits at the labelled positions [labelled, V], in row-major
        order, and their labels [labelled]).

        The reference path (`config.reference`) is the textbook: logits at every position, then
        `F.cross_entropy` with the unlabelled positions ignored. The fast path predicts sparsely:
        with a 30k vocabulary the decoder is most of a small model's compute, yet only the
        masked share of positions (`--mask-prob`) carries a label, so it selects those rows
        first — the same loss for a fraction of the FLOPs — and runs the decoder and the
        softmax cross-entropy fused, a vocabulary chunk at a time (`fused_cross_entropy`),
        instead of as separate passes over the [labelled, V] logits.
        """
        labelled = labels != IGNORE_INDEX
        targets = labels[labelled]  # [labelled]
        if not targets.numel():  # nothing to predict: a zero loss that still reaches every weight
            logits = self.predict(hidden[labelled])
            return logits.sum() * 0.0, logits, targets
        if self.config.reference:
            logits = self.predict(hidden)  # [B, T, H] -> [B, T, V]: every position
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)
            return loss, logits[labelled].detach(), targets
        features = self.head.features(hidden[labelled])  # [B, T, H] -> [labelled, E]
        loss, logits = linear_cross_entropy(features, self.embedding_table, self.head.bias, targets)
        return loss, logits, targets

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> MaskedLMOutput:
        """Logits at every position; with `labels`, the masked-LM loss instead (`masked_lm_loss`).

        This is the interface for a loop of your own (as transformers' BertForMaskedLM).
        `python train.py` reaches the same `masked_lm_loss` through objectives/mlm.py instead,
        because there one encoder pass over the batch serves every objective (MLM and NSP/SOP).
        """
        if labels is None:
            out = self.encoder(input_ids, attention_mask, token_type_ids)
            return MaskedLMOutput(**encoder_fields(out), logits=self.predict(out.last_hidden_state))
        # the loss reads the labelled positions only: the last layer computes just those
        out = self.encoder(input_ids, attention_mask, token_type_ids, needed=labels != IGNORE_INDEX)
        loss, labelled_logits, _ = self.masked_lm_loss(out.needed_hidden_state, labels)
        return MaskedLMOutput(**encoder_fields(out), labelled_logits=labelled_logits, loss=loss)


class ReplacedTokenDetector(EncoderWithHead):
    """Encoder + RTD head: the ELECTRA discriminator, the model kept for fine-tuning."""

    def __init__(self, config: ModelConfig):
        super().__init__(config, ReplacedTokenHead)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ReplacedTokenOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        logits = self.head(out.last_hidden_state)  # [B, T]
        loss = None if labels is None else replaced_token_loss(logits, labels, attention_mask)
        return ReplacedTokenOutput(**encoder_fields(out), logits=logits, loss=loss)


POOLINGS = ("cls", "mean")  # how a SequenceClassifier turns the tokens into one vector


def mean_over_tokens(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """[B, T, H] -> [B, H]: each sequence's mean over its real tokens (specials included, padding not)."""
    if attention_mask is None:
        return hidden.mean(1)
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [B, T, 1]
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)


class SequenceClassifier(EncoderWithHead):
    """Encoder + classification head, for fine-tuning. One label means regression, as in
    BERT's STS-B setup: the single logit is the predicted score and the loss is the mean
    squared error against float labels.

    `pooling` says which vector the head reads. "cls" is BERT's: the [CLS] token's last layer
    (through the pooler, if the model has one); with labels, the last layer then runs at
    position 0 only (see `Encoder.forward`'s `needed`). NSP and SOP train exactly that vector
    during pretraining, but MLM alone never does — [CLS] is never masked, so no loss reads it —
    and a model pretrained without a sentence task (RoBERTa's recipe, minutes on a CPU) reaches
    fine-tuning with a [CLS] that has learned nothing. "mean" averages the last layer over the
    real tokens instead, the vectors MLM did train (Sentence-BERT's pooling); docs/results.md
    measures the difference."""

    def __init__(self, config: ModelConfig, num_labels: int, pooling: str = "cls"):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}; got {pooling!r}")
        super().__init__(config, lambda c: ClassificationHead(c, num_labels))
        self.num_labels = num_labels
        self.pooling = pooling

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput:
        if self.pooling == "mean":
            out = self.encoder(input_ids, attention_mask, token_type_ids)
            pooled = mean_over_tokens(out.last_hidden_state, attention_mask)  # [B, T, H] -> [B, H]
        else:  # with labels (training) the loss reads position 0 only: the last layer computes just that
            needed = None if labels is None else cls_position(input_ids)
            out = self.encoder(input_ids, attention_mask, token_type_ids, needed=needed)
            pooled = pooled_or_first(out)
        logits = self.head(pooled)  # [B, num_labels]
        if labels is None:
            loss = None
        elif self.num_labels == 1:  # regression: [B, 1] -> [B] scores
            loss = F.mse_loss(logits.float().squeeze(-1), labels.float())
        else:
            loss = F.cross_entropy(logits.float(), labels)
        return ClassifierOutput(**encoder_fields(out), logits=logits, loss=loss)


class TokenClassifier(EncoderWithHead):
    """Encoder + the classification layer at every token, for tagging (named entities, parts
    of speech). `labels` is [B, T] with IGNORE_INDEX wherever no word starts (specials,
    padding, a word's later sub-tokens); the last layer runs only where a label exists."""

    def __init__(self, config: ModelConfig, num_labels: int):
        super().__init__(config, lambda c: ClassificationHead(c, num_labels))
        self.num_labels = num_labels

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> TokenClassifierOutput:
        needed = None if labels is None else labels != IGNORE_INDEX
        out = self.encoder(input_ids, attention_mask, token_type_ids, needed=needed)
        logits = self.head(out.needed_hidden_state)  # [B, T, H] -> [B, T, num_labels]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return TokenClassifierOutput(**encoder_fields(out), logits=logits, loss=loss)
