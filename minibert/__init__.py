"""minibert: the BERT family as configurations of one small, readable encoder.

    from minibert import ModelConfig, Encoder
    encoder = Encoder(ModelConfig.preset("albert-base"))
"""

from .config import ModelConfig
from .heads import MaskedLM, ReplacedTokenDetector, SequenceClassifier
from .model import Encoder, ModelOutput

__all__ = ["ModelConfig", "Encoder", "ModelOutput", "MaskedLM", "ReplacedTokenDetector", "SequenceClassifier"]
