"""Machinery, and a second read of the chapter: fine-tuning, a pretrained encoder plus a fresh head, trained end to end.

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python train.py finetune --init DIR --tasks data/sst2 data/rte --out OUT   # one table
    python -m minibert.finetune ...          (the same flags)
    minibert.finetune(init=DIR, train="train.tsv", dev="dev.tsv", out=OUT)   # the same, from Python

--init is a minibert checkpoint (its tokenizer saved beside it) or a Hugging Face BERT-family
directory. A task is of one of four kinds (kinds/): classification, regression, a tag per word,
or question answering. OUT receives the model (config.json, model.safetensors, labels.json, the
tokenizer: checkpoint.py), eval.json (the dev scores of the task's kind, every evaluation, the
flags and the recipe), metrics.jsonl (the training loop's log, as in pretraining) and the dev
predictions: predictions.tsv (sentences and tags), or SQuAD's predictions.json,
nbest_predictions.json and, for SQuAD 2.0, null_odds.json (question answering).

    job.py           ONE fine-tune of any kind: read, the head, the training loop, the dev scores, the files
    kinds/           the four kinds of task as data, one table: their files, inputs, heads, predictions, scores
    run.py           the command's run: one task, every --tasks folder and their table, or --glue
    settings.py      FinetuneSettings: every flag, its default and its checks
    cli.py           the command line, a thin layer over run.py
    api.py           minibert.finetune(...): the flags as keywords, and the result
    recipes.py       --recipe: ELECTRA's by width, BERT's, or an lr grid, each with its SQuAD rows; the
                     pooling the checkpoint's pretraining calls for
    layer_decay.py   --layer-decay: each layer below the top at a lower lr (ELECTRA's fine-tuning)
    checkpoint.py    the fine-tuned model on disk, and in Python (Classifier)
    predictions.py   predictions on new data: `python -m minibert predict`, Classifier.predict
    teacher.py       --teacher: a fine-tuned teacher, and its outputs on the training rows, cached
    soft_targets.py  --teacher's loss: Hinton et al.'s soft targets mixed with the labels
    run_tools/       how a fine-tune runs: its steps (checkpoints, --resume, torchrun), its evaluations
    glue/            --glue: GLUE's tasks by name, the sweep over them, the untrained twin

What a paper says of fine-tuning is in job.py and kinds/ (BERT's GLUE and SQuAD setups: the
fresh head, a question's windows, span decoding), a second read after the chapter; the rest is
machinery.
"""

import sys
import types

from . import api
from .api import FinetuneResult
from .checkpoint import Classifier, load_classifier, save_classifier
from .cli import main
from .job import finetune
from .kinds.kind import Prediction
from .kinds.scores import classification_metrics, entities, pearson, ranks, regression_metrics, spearman, tagging_metrics
from .kinds.sentences import model_inputs
from .kinds.squad import split_articles
from .kinds.tags import word_inputs
from .predictions import predict, predict_file
from .settings import FinetuneSettings

__all__ = ["Classifier", "FinetuneResult", "FinetuneSettings", "Prediction", "classification_metrics", "entities",
           "finetune", "load_classifier", "main", "model_inputs", "pearson", "predict", "predict_file", "ranks",
           "regression_metrics", "save_classifier", "spearman", "split_articles", "tagging_metrics", "word_inputs"]


class CallablePackage(types.ModuleType):
    """This package, callable: `minibert.finetune(...)` fine-tunes (api.py), beside
    `minibert.pretrain(...)`, while `minibert.finetune.load_classifier` and the package's
    other names stay where they are. One name for both, so that the API reads as the
    command does (`python train.py finetune`)."""

    def __call__(self, **options) -> FinetuneResult:
        return api.finetune(**options)


sys.modules[__name__].__class__ = CallablePackage
