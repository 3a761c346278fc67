"""Masked language modeling (BERT §3.1): recover the tokens that the masking hid.

The data pipeline selects a share of each batch's tokens (`--mask-prob`: BERT's 15%; each
default run's in variants.py) and shows the model [MASK], a random token or the token itself
there (data/masking.py); their original ids are the `labels` (-100 elsewhere). The loss is the
cross-entropy of the model's guess at those positions only. Here is all of it:

    MaskedLMHead             H -> E, activation, LayerNorm, then the decoder: the input
                             word-embedding table reused (weight tying); `loss` is THE
                             masked-LM loss, which every caller uses
    LinearCrossEntropy       the decoder and the softmax cross-entropy fused (the speed trick)
    MaskedLanguageModeling   the pretraining objective: reads the encoder pass it shares with
                             NSP/SOP (objectives/pretrainer.py) and calls the head's loss

The head belongs to the kept model (`minibert.MaskedLM` = Encoder + this head), not to the
objective: it is the part of pretraining that `from_pretrained(head="mlm")` loads again.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..data.masking import IGNORE_INDEX
from ..model import ACTIVATIONS


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
        loss = F.cross_entropy(logits.float(), targets) if targets.numel() else logits.sum() * 0.0  # 0 reaching every weight
        return loss, logits.detach(), targets


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
    work done even if backward() never comes (only when an input needs a gradient). Measured:
    forward + backward of the decoder 7–15% faster than the plain way, for 300–800 rows
    (the positions chosen for prediction) and 8k–30k words (docs/speed.md).
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


def mlm_metrics(loss: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """`mlm_loss` and `mlm_accuracy` (share of masked tokens guessed exactly)."""
    correct = (logits.argmax(-1) == targets).float()
    accuracy = correct.mean() if targets.numel() else correct.sum()
    return {"mlm_loss": loss.detach(), "mlm_accuracy": accuracy.detach()}


class MaskedLanguageModeling(nn.Module):
    """An `Objective`: loss = weight · CE(the model's prediction, the original token) over the masked tokens."""

    reads_output = True  # uses the kept model's pass over the batch
    reads_pooler = False

    def __init__(self, weight: float):
        super().__init__()
        self.weight = weight

    def needed_positions(self, batch):
        return batch["labels"] != IGNORE_INDEX  # the masked positions

    def forward(self, model, batch, output):
        table = model.encoder.embeddings.word_embeddings.weight  # the decoder: the input embeddings (tied)
        loss, logits, targets = model.head.loss(output.needed_hidden_state, batch["labels"], table)
        return self.weight * loss, mlm_metrics(loss, logits, targets)
