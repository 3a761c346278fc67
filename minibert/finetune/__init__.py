"""Fine-tuning: a pretrained encoder plus a fresh head, trained end to end on a labelled task.

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python train.py finetune --init DIR --tasks data/sst2 data/rte --out OUT   # one table
    python -m minibert.finetune ...          (the same flags)
    minibert.finetune(init=DIR, train="train.tsv", dev="dev.tsv", out=OUT)   # the same, from Python

--init is a minibert checkpoint (its tokenizer saved beside it) or a Hugging Face
BERT-family directory (its WordPiece vocab.txt). A task is classification (class names),
regression (numeric scores, one output, MSE) or tokens (a tag per word, read at the word's
first sub-token). OUT receives

    config.json, model.safetensors, labels.json, tokenizer   the model (load_classifier)
    eval.json                                                dev scores: accuracy (F1, MCC for 2 classes),
                                                             Pearson, Spearman and MSE, or word accuracy
                                                             (and entity F1 for BIO tags)
    metrics.jsonl                                            the training loop's log, as in pretraining
    predictions.tsv                                          prediction, gold label and the predicted class's
                                                             probability per dev example (per word)

    settings.py      FinetuneSettings: every flag, its default and its checks
    api.py           minibert.finetune(...): the flags as keywords, and the result
    cli.py           the command line, a thin layer over run.py
    run.py           the command's run: one task, every --tasks folder and their table, or --glue
    tasks.py         the task files: columns, labels, train/dev (tagged.py: a tag per word)
    job.py           one task: data, the model, the training loop, predictions, outputs
    inference.py     a model run over examples: their inputs, the predictions and their scores
    glue_tasks.py    GLUE's tasks by name: their files, columns, labels and metrics; training text; submission files
    glue_sweep.py    --glue: every task per seed, the lr chosen where the recipe leaves it open, the two averages
    recipes.py       --recipe: ELECTRA's by width, BERT's, or an lr grid; the pooling the checkpoint's pretraining calls for
    twin.py          --against-untrained: the untrained twin and what pretraining gains over it
    layer_decay.py   --layer-decay: each layer below the top at a lower lr (ELECTRA's fine-tuning)
    scores.py        accuracy, F1, MCC; Pearson, Spearman; entity F1
    checkpoint.py    the fine-tuned model on disk
    predictions.py   predictions on new data: `python -m minibert predict`, Classifier.predict
    teacher.py       --teacher: a fine-tuned teacher and its outputs on the training rows
    soft_targets.py  --teacher's loss: Hinton et al.'s soft targets mixed with the labels
"""

import sys
import types

from . import api
from .api import FinetuneResult
from .checkpoint import Classifier, load_classifier, save_classifier
from .cli import main
from .inference import Prediction, model_inputs, predict, word_inputs
from .job import finetune
from .predictions import predict_file
from .scores import classification_metrics, entities, pearson, ranks, regression_metrics, spearman, tagging_metrics
from .settings import FinetuneSettings

__all__ = ["Classifier", "FinetuneResult", "FinetuneSettings", "Prediction", "classification_metrics", "entities",
           "finetune", "load_classifier", "main", "model_inputs", "pearson", "predict", "predict_file", "ranks",
           "regression_metrics", "save_classifier", "spearman", "tagging_metrics", "word_inputs"]


class CallablePackage(types.ModuleType):
    """This package, callable: `minibert.finetune(...)` fine-tunes (api.py), beside
    `minibert.pretrain(...)`, while `minibert.finetune.load_classifier` and the package's
    other names stay where they are. One name for both, so that the API reads as the
    command does (`python train.py finetune`)."""

    def __call__(self, **options) -> FinetuneResult:
        return api.finetune(**options)


sys.modules[__name__].__class__ = CallablePackage
