"""Fine-tuning: a pretrained encoder plus a fresh head, trained end to end on a labelled task.

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python train.py finetune --init DIR --tasks data/sst2 data/rte --out OUT   # one table
    python -m minibert.finetune ...          (the same flags)

--init is a minibert checkpoint (its tokenizer saved beside it) or a Hugging Face
BERT-family directory (its WordPiece vocab.txt). A task is classification (class names) or
regression (numeric scores, one output, MSE). OUT receives

    config.json, model.safetensors, labels.json, tokenizer   the model (load_classifier)
    eval.json                                                dev scores: accuracy (F1, MCC for 2 classes)
                                                             or Pearson, Spearman and MSE
    metrics.jsonl                                            the training loop's log, as in pretraining
    predictions.tsv                                          index, prediction and gold label per dev row

    cli.py         the command line, and the table of a --tasks run
    job.py         one task: data, the model, the training loop, predictions, outputs
    scores.py      accuracy, F1, MCC; Pearson, Spearman
    checkpoint.py  the fine-tuned model on disk
"""

from .checkpoint import Classifier, load_classifier, save_classifier
from .cli import main
from .job import finetune, model_inputs, predict
from .scores import classification_metrics, pearson, ranks, regression_metrics, spearman

__all__ = ["Classifier", "classification_metrics", "finetune", "load_classifier", "main", "model_inputs", "pearson",
           "predict", "ranks", "regression_metrics", "save_classifier", "spearman"]
