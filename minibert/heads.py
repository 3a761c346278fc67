"""Heads: what sits on top of the encoder for each task, and the models they make.

    MaskedLMHead        (objectives/mlm.py, beside its loss) decoder tied to the word embeddings
    SentencePairHead    (objectives/sentence.py) 2 classes on the pooled output: NSP or SOP
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
from .data.masking import IGNORE_INDEX
from .model import ACTIVATIONS, Encoder, ModelOutput, first_position, init_weights
from .objectives.mlm import MaskedLMHead


@dataclass
class MaskedLMOutput(ModelOutput):
    """`MaskedLM`'s output. Without labels: `logits` [B, T, V] over the whole grid. With
    labels: `loss`, and `masked_logits` [masked, V] at the masked positions only, in
    row-major order (the sparse prediction of `MaskedLMHead.loss`)."""

    logits: torch.Tensor | None = None
    masked_logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None

    @property
    def labelled_logits(self) -> torch.Tensor | None:
        """The name `masked_logits` had before: kept for code written against it."""
        return self.masked_logits


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
    `loss` with labels (exact where a label is, where the last layer ran)."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: one logit per token, positive = "replaced"."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.activation]
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)


class ClassificationHead(nn.Module):
    """Sequence classification from the pooled vector (or the first token without a pooler);
    applied to every token's vector, token classification."""

    def __init__(self, config: ModelConfig, num_labels: int):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.classifier = nn.Linear(config.hidden_size, num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))


def encoder_fields(output: ModelOutput) -> dict:
    """The encoder's fields, carried into a task model's output (which adds logits and loss)."""
    return {f.name: getattr(output, f.name) for f in dataclasses.fields(ModelOutput)}


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
        """hidden [B, T, H], labels [B, T] -> (loss, logits at the masked positions, their labels):
        the head's `MaskedLMHead.loss` against this model's own embedding table."""
        return self.head.loss(hidden, labels, self.embedding_table)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> MaskedLMOutput:
        """Logits at every position; with `labels`, the masked-LM loss instead (`masked_lm_loss`).

        This is the interface for a loop of your own (as transformers' BertForMaskedLM).
        `python train.py` reaches the same `MaskedLMHead.loss` through objectives/mlm.py instead,
        because there one encoder pass over the batch serves every objective (MLM and NSP/SOP).
        """
        if labels is None:
            out = self.encoder(input_ids, attention_mask, token_type_ids)
            return MaskedLMOutput(**encoder_fields(out), logits=self.predict(out.last_hidden_state))
        # the loss reads the masked positions only: the last layer computes just those
        out = self.encoder(input_ids, attention_mask, token_type_ids, needed=labels != IGNORE_INDEX)
        loss, masked_logits, _ = self.masked_lm_loss(out.needed_hidden_state, labels)
        return MaskedLMOutput(**encoder_fields(out), masked_logits=masked_logits, loss=loss)


class ReplacedTokenDetector(EncoderWithHead):
    """Encoder + RTD head: the ELECTRA discriminator, the model kept for fine-tuning."""

    def __init__(self, config: ModelConfig):
        super().__init__(config, ReplacedTokenHead)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ReplacedTokenOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        logits = self.head(out.last_hidden_state)  # [B, T]
        loss = None
        if labels is not None:  # objectives/rtd.py's detection_loss at the real tokens (rtd.py imports this module)
            real = attention_mask.bool() if attention_mask is not None else slice(None)
            loss = F.binary_cross_entropy_with_logits(logits[real].float(), labels[real].float())
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
            needed = None if labels is None else first_position(input_ids)
            out = self.encoder(input_ids, attention_mask, token_type_ids, needed=needed)
            pooled = out.pooled_or_first()
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
