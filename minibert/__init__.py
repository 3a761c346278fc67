"""minibert: the BERT family as configurations of one small, readable encoder.

    from minibert import ModelConfig, Encoder, finetune, pretrain
    encoder = Encoder(ModelConfig.preset("albert-base"))
    result = pretrain("bert", steps=200)   # = python train.py --variant bert --steps 200
    result = finetune(init=result.out, train="train.tsv", dev="dev.tsv", out="runs/task")  # = python train.py finetune ...
"""

import importlib
import os as _os
import signal as _signal
import sys as _sys


def _stopped(signum, frame):
    """`python -m minibert COMMAND`: Python loads this package (and torch, seconds) before the
    command's own code can catch a Ctrl-C; one pressed meanwhile stops it in one line. It leaves
    at once (os._exit): nothing is written while loading, and an exception raised here could
    land inside torch's C++ start-up, which aborts with a trace instead."""
    print("stopped", flush=True)
    _os._exit(130)


if _sys.argv[:1] == ["-m"] and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # python -m, loading
    _signal.signal(_signal.SIGINT, _stopped)

from .config import ModelConfig
from .tokenizers import WordPieceTokenizer, load_tokenizer
from .heads import (ClassifierOutput, MaskedLM, MaskedLMOutput, ReplacedTokenDetector, ReplacedTokenOutput, SequenceClassifier,
                    TokenClassifier, TokenClassifierOutput)
from .model import Encoder, ModelOutput
from .pretrained import from_pretrained, save_pretrained
from . import interop  # registers Hugging Face's checkpoint layout and the released tokenizer layouts
from .tools.probe import detect_replaced, fill_mask
from .runs.api import PretrainResult, pretrain

if _signal.getsignal(_signal.SIGINT) is _stopped:  # loaded: Ctrl-C is the command's to handle again
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def __getattr__(name: str):
    """`minibert.finetune` (the subpackage, callable: `minibert.finetune(...)` runs a fine-tune,
    finetune/api.py) and its `FinetuneResult`, imported on first use: `import minibert` stays as
    light as the encoder, without fine-tuning's machinery."""
    if name in ("finetune", "FinetuneResult"):
        finetune = importlib.import_module(".finetune", __name__)  # sets minibert.finetune: asked once
        return finetune if name == "finetune" else finetune.FinetuneResult
    raise AttributeError(f"module 'minibert' has no attribute {name!r}")

__all__ = ["ModelConfig", "Encoder", "ModelOutput", "MaskedLM", "ReplacedTokenDetector", "SequenceClassifier",
           "TokenClassifier", "MaskedLMOutput", "ReplacedTokenOutput", "ClassifierOutput", "TokenClassifierOutput",
           "from_pretrained", "save_pretrained", "WordPieceTokenizer", "load_tokenizer", "fill_mask", "detect_replaced",
           "pretrain", "PretrainResult", "finetune", "FinetuneResult"]
