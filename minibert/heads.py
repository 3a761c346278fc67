"""Heads: what sits on top of the encoder for each task, their losses, and the models they make.

    MaskedLMHead        the decoder tied to the word embeddings, and THE masked-LM loss
                        (`MaskedLMHead.loss`; `LinearCrossEntropy` fuses its decoder and softmax)
    ReplacedTokenHead   one logit per token: "was this token replaced?" (ELECTRA), and its
                        loss, `detection_loss`
    ClassificationHead  num_labels on the pooled output, or on every token (fine-tuning)
    SpanExtractor's     two logits per token, "the answer starts here" and "ends here" (question
    head                answering), and their loss, `span_loss`

A task model is an `Encoder` plus one head: `MaskedLM`, `ReplacedTokenDetector`,
`SequenceClassifier`, `TokenClassifier`, `SpanExtractor`. Pretraining keeps the first two, and its objectives
(minibert/objectives/) reach their losses through the same calls as a loop of your own:
`MaskedLM.masked_lm_loss` and `detection_loss`. NSP's and SOP's head, which no kept model
has, lives with its objective (objectives/sentence.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .data.masking import IGNORE_INDEX
from .model import ACTIVATIONS, Encoder, ModelOutput, first_position_mask, init_weights


@dataclass
class MaskedLMOutput(ModelOutput):
    """`MaskedLM`'s output. Without labels: `logits` [B, T, V] over the whole grid. With
    labels: `loss`, and `masked_logits` [masked, V] at the masked positions only, in
    row-major order (the sparse prediction of `MaskedLMHead.loss`)."""

    logits: torch.Tensor | None = None
    masked_logits: torch.Tensor | None = None
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
    `loss` with labels (exact where a label is, where the last layer ran)."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


@dataclass
class SpanOutput(ModelOutput):
    """`SpanExtractor`'s output: `start_logits` and `end_logits` [B, T], how likely each
    position is to start and to end the answer; `loss` with the gold positions."""

    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None


class MaskedLMHead(nn.Module):
    """Predict the original token at the masked positions.

    The decoder reuses the input word-embedding table (weight tying, as in BERT): the same
    vector that represents token t on the way in scores token t on the way out. When E ≠ H
    the transform maps H → E first, so the features match the table's width: down for ALBERT
    (E < H), up for ELECTRA's base and large generators (E = 768 or 1024 > H = 256) — the
    same dense → activation → LayerNorm(E) as ELECTRA's generator_predictions.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        E = config.embedding_size or config.hidden_size
        self.transform = nn.Linear(config.hidden_size, E)
        self.act = ACTIVATIONS[config.activation]
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.fused = not config.reference  # --reference: the plain F.cross_entropy instead

    def features(self, hidden: torch.Tensor) -> torch.Tensor:
        """What the decoder reads: H → E, activation, LayerNorm."""
        return self.norm(self.act(self.transform(hidden)))

    def forward(self, hidden: torch.Tensor, embedding_table: torch.Tensor) -> torch.Tensor:
        """hidden [..., H] -> logits [..., V], scored against the word-embedding table [V, E]."""
        return F.linear(self.features(hidden), embedding_table, self.bias)

    def loss(self, hidden, labels, embedding_table) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The masked-LM loss: mean cross-entropy of the prediction at each masked position.

        hidden [B, T, H] (exact at the masked positions), labels [B, T] (-100 where there is
        nothing to predict), embedding_table [V, E] -> (loss, the logits at the masked
        positions [masked, V] in row-major order, without gradient, and their labels [masked]).

        The decoder runs at the masked positions only, as BERT's own pretraining code does
        (it gathers them before the transform): with an 8k-30k vocabulary the decoder is most
        of a small model's compute, and only the masked share of the positions has a label.
        """
        masked = labels != IGNORE_INDEX  # [B, T]
        targets = labels[masked]  # [masked]
        features = self.features(hidden[masked])  # [B, T, H] -> [masked, E]
        if self.fused and targets.numel():  # speed: the gradient made in the same pass (LinearCrossEntropy)
            return (*LinearCrossEntropy.apply(features, embedding_table, self.bias, targets), targets)
        logits = F.linear(features, embedding_table, self.bias)  # [masked, V]
        return masked_lm_cross_entropy(logits, targets), logits.detach(), targets


def masked_lm_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss from the logits at the masked positions [masked, V] and the original
    ids there [masked]: their mean cross-entropy (in fp32); with nothing masked, a 0 that still
    reaches every weight."""
    return F.cross_entropy(logits.float(), targets) if targets.numel() else logits.sum() * 0.0


class LinearCrossEntropy(torch.autograd.Function):
    """`F.cross_entropy(F.linear(features, weight, bias), targets)`, fused with its gradient.

    LinearCrossEntropy.apply(features [N, E], weight [V, E], bias [V], targets [N]) ->
    (loss, logits [N, V] without gradient). The plain way writes the [N, V] logits, then
    makes several more passes over them in the backward (log-softmax, its gradient, the
    one-hot of the targets, the bias gradient). But the loss is a scalar at the end of the
    graph, so d loss / d logits = (softmax(logits) − onehot(targets)) / N is known as soon as
    the loss is: computed right away and folded into the gradients of the features, the
    decoder weight and the bias, the logits' gradient never reaches autograd, and backward()
    only scales the three; the softmax's exponentials are taken once, for the loss and the
    gradient both. The price: memory for those three between forward and backward, and their
    work done even if backward() never comes (only when an input needs a gradient). What it
    saves at the default runs' sizes: docs/speed.md.
    """

    @staticmethod
    def forward(ctx, features, weight, bias, targets):
        logits = torch.addmm(bias, features, weight.t())  # [N, V], in the autocast dtype under autocast
        exact = logits.to(torch.promote_types(logits.dtype, torch.float32))  # the softmax in fp32 at least
        top = exact.amax(1, keepdim=True)  # [N, 1]
        probs = (exact - top).exp_()  # exp(logit − max) ≤ 1: no overflow; the one exp pass over [N, V]
        total = probs.sum(1, keepdim=True)  # [N, 1]
        loss = ((total.log() + top).squeeze(1) - exact.gather(1, targets[:, None]).squeeze(1)).mean()
        if any(ctx.needs_input_grad[:3]):  # d loss / d logits = (softmax − onehot(targets)) / N, folded in now
            grad = probs.div_(total)  # softmax, [N, V]
            grad[torch.arange(len(targets)), targets] -= 1  # minus the one-hot of the targets
            grad = grad.div_(len(targets)).to(logits.dtype)
            ctx.grads = [(grad @ weight).to(features.dtype), (grad.t() @ features).to(weight.dtype), grad.sum(0).to(bias.dtype)]
        ctx.mark_non_differentiable(logits)
        ctx.set_materialize_grads(False)  # no [N, V] of zeros for the logits' (absent) gradient
        return loss, logits

    @staticmethod
    def backward(ctx, grad_loss, _grad_logits):
        grads, ctx.grads = ctx.grads, None  # drop our references: autograd may then reuse the buffers
        return *(g.mul_(grad_loss) if need else None for g, need in zip(grads, ctx.needs_input_grad)), None


class ReplacedTokenHead(nn.Module):
    """ELECTRA's discriminator head: one logit per token, positive = "replaced"."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.activation]
        self.prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.prediction(self.act(self.dense(hidden))).squeeze(-1)  # [B, T, H] -> [B, T]


def detection_loss(scores: torch.Tensor, replaced: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The discriminator's loss: binary cross-entropy of the "replaced?" scores [B, T] against
    `replaced` [B, T] (1 = the token differs from the original), averaged over `positions`
    [B, T] bool: every real token (ELECTRA), or the masked ones only ("ELECTRA 15%")."""
    return F.binary_cross_entropy_with_logits(scores[positions].float(), replaced[positions].float())


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
        the head's `MaskedLMHead.loss` against this model's own embedding table. The one way to
        the masked-LM loss: `forward` below, the pretraining objective (objectives/mlm.py) and
        ELECTRA's generator (objectives/rtd.py) all call it."""
        return self.head.loss(hidden, labels, self.embedding_table)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> MaskedLMOutput:
        """Logits at every position; with `labels`, the masked-LM loss instead (`masked_lm_loss`).

        This is the interface for a loop of your own (as transformers' BertForMaskedLM).
        `python train.py` calls `masked_lm_loss` on an encoder pass of its own instead, because
        there one pass over the batch serves every objective (MLM and NSP/SOP).
        """
        if labels is None:
            out = self.encoder(input_ids, attention_mask, token_type_ids)
            return MaskedLMOutput(**encoder_fields(out), logits=self.predict(out.last_hidden_state))
        # the loss reads the masked positions only: the last layer computes just those
        out = self.encoder(input_ids, attention_mask, token_type_ids, needed=labels != IGNORE_INDEX)
        loss, masked_logits, _ = self.masked_lm_loss(out.last_hidden_state, labels)
        return MaskedLMOutput(**encoder_fields(out), masked_logits=masked_logits, loss=loss)


class ReplacedTokenDetector(EncoderWithHead):
    """Encoder + RTD head: the ELECTRA discriminator, the model kept for fine-tuning."""

    def __init__(self, config: ModelConfig):
        super().__init__(config, ReplacedTokenHead)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ReplacedTokenOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        logits = self.head(out.last_hidden_state)  # [B, T]
        loss = None
        if labels is not None:  # ELECTRA's: at every real token
            real = attention_mask.bool() if attention_mask is not None else torch.ones_like(labels, dtype=torch.bool)
            loss = detection_loss(logits, labels, real)
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
            needed = None if labels is None else first_position_mask(input_ids)
            out = self.encoder(input_ids, attention_mask, token_type_ids, needed=needed)
            pooled = out.sentence_vector()
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
        logits = self.head(out.last_hidden_state)  # [B, T, H] -> [B, T, num_labels]
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return TokenClassifierOutput(**encoder_fields(out), logits=logits, loss=loss)


class SpanExtractor(EncoderWithHead):
    """Encoder + span head: extractive question answering, as BERT reads SQuAD (Devlin et al.,
    2019, section 4.2).

    The question is segment A and the passage segment B. BERT adds only two vectors: a start
    vector S and an end vector E, one linear map H → 2 (`head`, transformers' `qa_outputs`).
    Position i starts the answer with probability softmax_i(S · h_i) over the window, and
    ends it with softmax_j(E · h_j); the loss is the mean of the two cross-entropies at the
    gold start and end. A window that does not hold the answer (or a SQuAD 2.0 question that
    has none) points both at [CLS], position 0, so the same two softmaxes also learn "no
    answer here". Picking the best span from the two is decoding (finetune/kinds/span_decoding.py)."""

    num_labels = 2  # the head's outputs: start and end

    def __init__(self, config: ModelConfig, num_labels: int = 2):
        if num_labels != 2:
            raise ValueError(f"a span head has two outputs (start, end), not {num_labels}")
        super().__init__(config, lambda c: nn.Linear(c.hidden_size, 2))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None) -> SpanOutput:
        out = self.encoder(input_ids, attention_mask, token_type_ids)
        start_logits, end_logits = self.head(out.last_hidden_state).unbind(-1)  # [B, T, H] -> [B, T, 2] -> 2 × [B, T]
        loss = None
        if start_positions is not None:  # the softmaxes run over the window's own positions, not its padding
            padding = None if attention_mask is None else attention_mask == 0
            loss = span_loss(*(logits if padding is None else logits.masked_fill(padding, torch.finfo(logits.dtype).min)
                               for logits in (start_logits, end_logits)), start_positions, end_positions)
        return SpanOutput(**encoder_fields(out), start_logits=start_logits, end_logits=end_logits, loss=loss)


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """BERT's SQuAD loss: the mean of the start's and the end's cross-entropy over the
    window's positions, logits [B, T] against gold positions [B] (0: no answer in the window).
    `SpanExtractor` gives padding the lowest logit first, so that how far a batch is padded
    changes nothing."""
    return (F.cross_entropy(start_logits.float(), starts) + F.cross_entropy(end_logits.float(), ends)) / 2
