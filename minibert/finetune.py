"""Fine-tuning: a pretrained encoder plus a fresh classification head, trained end to end.

BERT's recipe (Devlin et al., 2019, section 4 and appendix A.3) is the same for every
GLUE task: put one K-way linear layer on the pooled [CLS] vector, train ALL parameters for
a few epochs with Adam(W), a small peak learning rate (2e-5 to 5e-5), batch 32, linear
warm-up over the first 10% of steps and linear decay to zero, then read the dev score.

    python train.py finetune --init DIR --train train.tsv --dev dev.tsv --out OUT
    python -m minibert.finetune ...          (the same flags)

--init is a minibert checkpoint (its tokenizer saved beside it) or a Hugging Face
BERT-family directory (its WordPiece vocab.txt). OUT receives

    config.json, model.safetensors, labels.json, tokenizer   the classifier (load_classifier)
    eval.json                                                dev accuracy; F1 and MCC for 2 classes
    metrics.jsonl                                            the training loop's log, as in pretraining
    predictions.tsv                                          index, predicted and gold label per dev row
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from .config import ModelConfig
from .data import load_tokenizer
from .data.tasks import LabelMap, TaskData, read_task
from .data.tokenizer import Tokenizer
from .heads import SequenceClassifier
from .model import Encoder
from .pretrained import FORMAT_KEY, FORMAT_VERSION, from_pretrained
from .pretrained.checkpoint import (
    CONFIG_FILE, SAFETENSORS_FILE, atomic_write, load_tensors, open_tensors, read_json, save_tensors, write_json,
)
from .training.cli import Parser, report_errors
from .training.distributed import Distributed
from .training.loop import LoopSettings, Progress, train
from .training.metrics import MetricsLog
from .training.optim import build_optimizer
from .training.precision import PRECISIONS, Precision
from .training.settings import DEVICES

HEAD = "classifier"  # the head named in a fine-tuned checkpoint's config.json
LABELS_FILE = "labels.json"
TOKENIZER_FILES = ("tokenizer.model", "vocab.txt", "tokenizer_config.json")  # SentencePiece or WordPiece
DEFAULT_EPOCHS = 3.0
DEFAULT_MAX_LEN = 128
CLIP = 1.0  # gradient-norm clip, as BERT's fine-tuning code does
METRICS_FILE = "metrics.jsonl"
PROG = "python -m minibert.finetune"


# --- the command line -------------------------------------------------------------------


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Fine-tune a pretrained encoder for sequence classification.")
    parser.add_argument("--init", required=True, metavar="DIR", help="minibert checkpoint or Hugging Face BERT-family directory")
    parser.add_argument("--train", required=True, metavar="FILE", help="training examples: .tsv (GLUE), .csv or .jsonl")
    parser.add_argument("--dev", required=True, metavar="FILE", help="held-out examples in the same format, labels from the training set")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory for the classifier, eval.json and predictions.tsv")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, metavar="N", help="optimizer steps")
    length.add_argument("--epochs", type=float, metavar="E", help=f"passes over the training set (default {DEFAULT_EPOCHS:g})")
    parser.add_argument("--batch-size", type=int, default=32, metavar="B", help="examples per step (default 32)")
    parser.add_argument("--lr", type=float, default=2e-5, help="peak learning rate of AdamW (default 2e-5)")
    parser.add_argument("--warmup", type=float, default=0.1, metavar="FRACTION", help="linear warm-up as a fraction of the steps (default 0.1)")
    parser.add_argument("--weight-decay", type=float, default=0.01, metavar="DECAY",
                        help="AdamW weight decay, never on biases or LayerNorm (default 0.01)")
    parser.add_argument("--max-len", type=int, metavar="T",
                        help=f"tokens per example, specials included (default {DEFAULT_MAX_LEN} or the model's limit)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the head's initialisation, data order and dropout (default 0)")
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto = cuda when available, else cpu; mps = Apple GPUs")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="auto = bf16 on a CUDA GPU that has it, else fp32; fp16 (CUDA only, loss scaling) for GPUs "
                             "without bf16 such as the T4 (default auto)")
    parser.add_argument("--skip-nonfinite", action="store_true",
                        help="skip (and count) steps whose loss or gradient is NaN/Inf instead of stopping")
    parser.add_argument("--overwrite", action="store_true", help="replace a classifier already in --out")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Run one fine-tuning job; a problem the user can fix is one line on stderr and exit code 2."""
    argv = sys.argv[1:] if argv is None else argv
    return report_errors(prog, argv, lambda: finetune(build_parser(prog).parse_args(argv)))


def check_args(args: argparse.Namespace) -> None:
    """Fail before anything is loaded on values that cannot work."""
    for name in ("steps", "epochs", "batch_size", "lr", "max_len"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if not 0.0 <= args.warmup <= 1.0:
        raise ValueError(f"--warmup is a fraction of the steps, between 0 and 1; got {args.warmup}")
    if args.weight_decay < 0:
        raise ValueError(f"--weight-decay must not be negative, got {args.weight_decay}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {out} is a file; choose a folder")
    if (out / SAFETENSORS_FILE).exists() and not args.overwrite:
        raise FileExistsError(f"{out} already holds a checkpoint; pass --overwrite to replace it, or choose another --out")


# --- the job ------------------------------------------------------------------------------


def finetune(args: argparse.Namespace) -> dict:
    """Train on --train, evaluate on --dev, write everything into --out; return eval.json's contents."""
    check_args(args)
    device = Distributed().device(args.device)
    amp = Precision.of(args.precision, device)  # a device or format that cannot work fails now
    train, dev = read_task(args.train), read_task(args.dev)
    if (train.pairs is None) != (dev.pairs is None):
        kind = {True: "single texts", False: "sentence pairs"}
        raise ValueError(
            f"{train.path} holds {kind[train.pairs is None]} but {dev.path} {kind[dev.pairs is None]}; use two files of one task"
        )
    labels = LabelMap.from_labels(train.labels)
    train_ids, dev_ids = labels.encode(train), labels.encode(dev)

    encoder, tokenizer = load_backbone(args.init)
    max_len = check_max_len(args.max_len, encoder.config)
    steps = args.steps or math.ceil((args.epochs or DEFAULT_EPOCHS) * math.ceil(len(train) / args.batch_size))
    loop = LoopSettings(steps=steps, lr=args.lr, warmup=args.warmup, weight_decay=args.weight_decay, clip=CLIP, seed=args.seed,
                        precision=amp.name, log_every=max(1, steps // 10), eval_every=steps, save_every=steps,
                        skip_nonfinite=args.skip_nonfinite)

    torch.manual_seed(args.seed)  # the head's initialisation and dropout
    model = SequenceClassifier(encoder.config, len(labels))
    model.encoder.load_state_dict(encoder.state_dict())
    model.to(device)
    started = time.perf_counter()
    train_loss = train_classifier(model, tokenizer, train, train_ids, loop, args.batch_size, max_len, device, Path(args.out))
    predicted = predict(model, tokenizer, dev, args.batch_size, max_len, device, amp)

    report = classification_metrics(predicted, dev_ids, labels)
    report.update(examples=len(dev), steps=steps, train_loss=train_loss, seconds=round(time.perf_counter() - started, 1),
                  args={k: v for k, v in vars(args).items() if k not in ("overwrite", "debug")})
    write_outputs(Path(args.out), Classifier(model, tokenizer, labels), report, predicted, dev_ids)
    print(f"dev accuracy {report['accuracy']:.4f} on {len(dev)} examples; classifier, eval.json and predictions.tsv in {args.out}")
    return report


def write_outputs(out: Path, classifier: Classifier, report: dict, predicted: list[int], gold: list[int]) -> None:
    save_classifier(*classifier, out)
    write_json(out / "eval.json", report)
    names = classifier.labels.names
    rows = "".join(f"{i}\t{names[p]}\t{names[g]}\n" for i, (p, g) in enumerate(zip(predicted, gold)))
    atomic_write(out / "predictions.tsv", lambda tmp: tmp.write_text("index\tprediction\tlabel\n" + rows, encoding="utf-8"))


def load_backbone(init: str | Path) -> tuple[Encoder, Tokenizer]:
    """The pretrained encoder and its tokenizer (a fine-tuned classifier's encoder works too)."""
    init = Path(init)
    if not init.is_dir():
        raise FileNotFoundError(f"--init {init} is not a directory; pass a minibert checkpoint or a Hugging Face BERT-family folder")
    if is_classifier(read_json(init / CONFIG_FILE)):
        encoder = load_classifier(init).model.encoder
    else:
        encoder = from_pretrained(init, head=None)
    tokenizer = load_tokenizer(init)
    if tokenizer.vocab_size > encoder.config.vocab_size:
        raise ValueError(
            f"{init}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
            f"{encoder.config.vocab_size} embeddings; they are not one checkpoint"
        )
    return encoder, tokenizer


def check_max_len(max_len: int | None, config: ModelConfig) -> int:
    if max_len is None:
        return min(DEFAULT_MAX_LEN, config.max_length)
    if max_len > config.max_length:
        raise ValueError(f"--max-len {max_len} exceeds the {config.max_length} positions of this model; use at most {config.max_length}")
    return max_len


def model_inputs(tokenizer: Tokenizer, config: ModelConfig, data: TaskData, rows: list[int], max_len: int,
                 device="cpu") -> dict:
    """Token ids, attention mask and segment ids of some examples, as the model takes them.

    A pair is [CLS] A [SEP] B [SEP] with segment ids 0 on A and 1 on B. Models with no
    second segment embedding (RoBERTa, DistilBERT) tell A from B by the separators alone,
    so their segment ids stay 0.
    """
    pairs = None if data.pairs is None else [data.pairs[i] for i in rows]
    inputs = tokenizer.batch([data.texts[i] for i in rows], pairs, max_length=max_len)
    if config.type_vocab_size < 2:
        inputs["token_type_ids"].zero_()
    return {name: tensor.to(device) for name, tensor in inputs.items()}


class TaskLoss(nn.Module):
    """A fine-tuning model as the training loop sees it: batch -> (loss, metrics), as a
    `Pretrainer` is for pretraining."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: dict) -> tuple[torch.Tensor, dict]:
        return self.model(**batch).loss, {}


def train_classifier(model, tokenizer, data: TaskData, label_ids: list[int], loop: LoopSettings, batch_size: int,
                     max_len: int, device: torch.device, out: Path) -> float:
    """`loop.steps` steps of the pretraining loop (training/loop.py: schedule, clipping, NaN
    policy, precision, progress bar, OUT/metrics.jsonl) on shuffled batches, a new order each
    epoch. Returns the mean loss of the last logged window: the last tenth of the steps."""
    order = torch.Generator().manual_seed(loop.seed)
    targets = torch.tensor(label_ids)
    batches = ({**model_inputs(tokenizer, model.config, data, rows, max_len), "labels": targets[rows]}
               for rows in shuffled_batches(len(data), batch_size, order))
    objective = TaskLoss(model)
    out.mkdir(parents=True, exist_ok=True)
    (out / METRICS_FILE).unlink(missing_ok=True)  # a new run: its own log
    record = train(objective, build_optimizer(objective, loop), [batches], None, loop, Progress(), dist=Distributed(),
                   device=device, log=MetricsLog(out / METRICS_FILE))
    return record.get("loss", math.nan)  # NaN if every step of the last window was skipped


def shuffled_batches(n: int, batch_size: int, generator: torch.Generator):
    """Endless batches of example indices: every epoch one new random order, the last batch smaller."""
    while True:
        order = torch.randperm(n, generator=generator).tolist()
        for start in range(0, n, batch_size):
            yield order[start:start + batch_size]


@torch.no_grad()
def predict(model: SequenceClassifier, tokenizer: Tokenizer, data: TaskData, batch_size: int, max_len: int,
            device, amp: Precision | None = None) -> list[int]:
    """The predicted label id of every example, in file order; in fp32 unless `amp` says otherwise."""
    amp = amp or Precision("fp32", torch.device(device))
    model.eval()
    predicted = []
    for start in range(0, len(data), batch_size):
        rows = list(range(start, min(start + batch_size, len(data))))
        with amp.autocast():
            logits = model(**model_inputs(tokenizer, model.config, data, rows, max_len, device)).logits
        predicted += logits.argmax(-1).tolist()
    return predicted


def classification_metrics(predicted: list[int], gold: list[int], labels: LabelMap) -> dict:
    """Accuracy; for two classes also F1 of the second label and Matthews' correlation (GLUE's
    metrics for MRPC/QQP and CoLA). MCC is 0 when a prediction or gold class never occurs."""
    report = {"accuracy": sum(p == g for p, g in zip(predicted, gold)) / len(gold)}
    if len(labels) == 2:
        tp = sum(p == 1 and g == 1 for p, g in zip(predicted, gold))
        tn = sum(p == 0 and g == 0 for p, g in zip(predicted, gold))
        fp = sum(p == 1 and g == 0 for p, g in zip(predicted, gold))
        fn = sum(p == 0 and g == 1 for p, g in zip(predicted, gold))
        denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        report["f1"] = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        report["mcc"] = (tp * tn - fp * fn) / denominator if denominator else 0.0
        report["positive_label"] = labels.names[1]
    return report


# --- the fine-tuned checkpoint ------------------------------------------------------------


class Classifier(NamedTuple):
    model: SequenceClassifier
    tokenizer: Tokenizer
    labels: LabelMap


def is_classifier(stored_config: dict) -> bool:
    marker = stored_config.get(FORMAT_KEY)
    return isinstance(marker, dict) and marker.get("head") == HEAD


def save_classifier(model: SequenceClassifier, tokenizer: Tokenizer, labels: LabelMap, directory: str | Path) -> Path:
    """minibert's checkpoint format with a classification head: our parameter names, the head
    and its number of labels in config.json, the label names in labels.json. config.json is
    written last, so a folder that has one holds a complete classifier. A tokenizer left by
    an earlier checkpoint is removed first: the loader would otherwise pick the wrong one."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG_FILE, *TOKENIZER_FILES):
        (directory / name).unlink(missing_ok=True)
    save_tensors(model, {name: (name,) for name in model.state_dict()}, directory / SAFETENSORS_FILE)
    tokenizer.save(directory)
    write_json(directory / LABELS_FILE, {"labels": labels.names})
    marker = {"format": FORMAT_VERSION, "head": HEAD, "num_labels": len(labels)}
    write_json(directory / CONFIG_FILE, {FORMAT_KEY: marker, **model.config.to_dict()})
    return directory


def load_classifier(directory: str | Path) -> Classifier:
    """A fine-tuned classifier, its tokenizer and label names, as `save_classifier` wrote them."""
    directory = Path(directory)
    stored = read_json(directory / CONFIG_FILE)
    if not is_classifier(stored):
        raise ValueError(
            f"{directory} holds no fine-tuned classifier (its config.json names no {HEAD!r} head); load it with from_pretrained"
        )
    fields = dict(stored)
    num_labels = fields.pop(FORMAT_KEY).get("num_labels")
    labels = LabelMap(read_json(directory / LABELS_FILE).get("labels"))
    if num_labels != len(labels):
        raise ValueError(
            f"{directory}: config.json says {num_labels} labels but {LABELS_FILE} names {len(labels)}; the folder is inconsistent"
        )
    with torch.device("meta"):  # shapes only: the checkpoint's tensors become the parameters
        model = SequenceClassifier(ModelConfig.from_dict(fields), num_labels)
    with open_tensors(directory) as tensors:
        load_tensors(model, {name: (name,) for name in model.state_dict()}, tensors, ())
    return Classifier(model.eval(), load_tokenizer(directory), labels)


if __name__ == "__main__":
    sys.exit(main())
