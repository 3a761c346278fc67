"""Pretraining objectives, one idea per file. Each is a small module called as

    loss, metrics = objective(model, batch, output)

with the kept model, a batch from `minibert.data` and the kept model's encoder pass over
that batch (None for objectives that set `reads_output = False`). `Pretrainer` sums them.
An objective that reads that pass also says where, `needed_positions(batch)` ([B, T] bool,
or None for every position), so the encoder's last layer computes only those positions.
"""

from .kd import KnowledgeDistillation
from .mlm import MaskedLanguageModeling
from .pretrainer import Pretrainer
from .rtd import ReplacedTokenDetection
from .sentence import SentencePairTask

__all__ = ["KnowledgeDistillation", "MaskedLanguageModeling", "Pretrainer", "ReplacedTokenDetection", "SentencePairTask"]
