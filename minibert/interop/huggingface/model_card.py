"""README.md of an exported fine-tuned model: the model card the Hugging Face Hub shows.

A card says what a model is for and how far its numbers go. Everything on it comes from what
fine-tuning recorded beside the model (finetune/job.py's eval.json: the dev metrics, the task,
the flags of the command, the recipe) and, for the base checkpoint, the pretraining run's
run.json; a seed's siblings in a --glue sweep (OUT/<task>/seed-<n>/) add their dev metrics.
Where nothing was recorded, the card says so rather than guess.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from ...finetune.settings import FLAGS
from ...training.settings import flag
from ...operations.files import read_record
from ...operations.outdir import RUN_FILE

CARD_FILE = "README.md"
EVAL_FILE = "eval.json"  # written by finetune/job.py
# eval.json's numbers that score nothing: sizes, times, the step kept, the label F1 and MCC call positive (0/1)
NOT_METRICS = ("examples", "steps", "train_loss", "seconds", "kept_step", "positive_label")
# What a card says of each head where the labels don't say it: its pipeline_tag, the task and the
# outputs it names, what to do with a text longer than the model reads, and the usage example
PIPELINE = 'from transformers import pipeline\n\nclassify = pipeline("{pipeline}", model="{folder}"{trust})'
TRUNCATE = "pass `truncation=True` to the pipeline for longer texts"


class Card(NamedTuple):
    pipeline: str
    task: str | None = None  # None: classification, or regression where there are no labels
    outputs: str | None = None  # None: the classes, or one score where there are no labels
    longer: str = TRUNCATE
    usage: str = PIPELINE


# How a question-answering model is used: transformers' question-answering pipeline is gone since
# transformers 5.3, so the card shows the model read directly, the answer kept inside the context
# and ending where it starts or later (what the pipeline did, without its length limit)
ANSWER = """import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{folder}"{trust})
model = AutoModelForQuestionAnswering.from_pretrained("{folder}"{trust})
question, context = "Where did the cat sit?", "The cat sat on the mat."
inputs = tokenizer(question, context, truncation="only_second", return_offsets_mapping=True, return_tensors="pt")
offsets = inputs.pop("offset_mapping")[0]
with torch.no_grad():
    out = model(**inputs)
outside = torch.tensor([segment != 1 for segment in inputs.sequence_ids(0)])  # the question and special tokens
start = out.start_logits[0].masked_fill(outside, -torch.inf).argmax()
end = start + out.end_logits[0, start:].masked_fill(outside[start:], -torch.inf).argmax()
answer = context[offsets[start][0]:offsets[end][1]]"""
CARDS = {"classifier": Card("text-classification"),
         "token_classifier": Card("token-classification", task="tokens"),
         "span_extractor": Card("question-answering", task="question answering",  # no classes but a span of the passage
                                outputs="the start and the end of the answer in a passage",
                                longer="cut a longer context into overlapping windows and keep the best span over them",
                                usage=ANSWER)}


def model_card(source: Path, out: Path, architecture: str, head: str, labels: list | None, custom: bool,
               max_length: int) -> str:
    """The card of the fine-tuned checkpoint `source`, exported to `out` as `architecture`."""
    report = read_record(source / EVAL_FILE)
    args = report.get("args", {})
    card = CARDS[head]
    task = report.get("task", card.task or ("regression" if labels is None else "classification"))
    outputs = card.outputs or ("one score" if labels is None else f"{len(labels)} classes: {', '.join(map(str, labels))}")
    trust = ", trust_remote_code=True" if custom else ""
    training = [
        "## Base checkpoint", "", base_checkpoint(args.get("init")), "",
        "## Task and data", "", task_and_data(report, args), "",
        "## Recipe", "", *recipe(report, args), "",
        "## Dev metrics", "", *metric_rows(source, report), "",
        "## Commands", "", "```", command(args), f"python -m minibert export {shown(source)} {out.name}", "```", "",
    ] if report else ["## Training", "", f"Not recorded: no {EVAL_FILE} beside {source} (`python train.py finetune` writes one).", ""]
    lines = [
        "---", "library_name: transformers", f"pipeline_tag: {card.pipeline}", "tags:", "- minibert", "---", "",
        f"# {out.name}", "",
        f"{architecture}, fine-tuned with minibert for {task}: {outputs}.", "",
        "```python", card.usage.format(pipeline=card.pipeline, folder=out.name, trust=trust), "```", "",
        *training,
        "## Intended use and limits", "",
        f"- For {task} of texts like its training data; scores on other kinds of text say little.",
        f"- It reads at most {max_length} tokens: {card.longer}.",
        "- The dev metrics above are its only evaluation: no test set, no check for bias or robustness.",
        "- A research model of a small library: measure it on your own data before relying on it.",
    ]
    return "\n".join(lines) + "\n"


def shown(value) -> str:
    """A recorded value as the card shows it: a path given relative as it was; an absolute one as
    its last two parts (…/folder/file), since a card is published and the rest names this machine's folders."""
    path = Path(str(value))
    return str(Path("…", *path.parts[-2:])) if path.is_absolute() else str(value)


def base_checkpoint(init) -> str:
    """The checkpoint fine-tuning started from, with its pretraining run where run.json records one."""
    init = init[0] if isinstance(init, list) else init
    settings = read_record(Path(init) / RUN_FILE).get("settings", {})
    if "variant" in settings:
        return f"`{shown(init)}`: minibert's {settings['variant']} run, {settings.get('steps')} steps (its {RUN_FILE} holds every setting)."
    return f"`{shown(init)}`."


def task_and_data(report: dict, args: dict) -> str:
    data = (f"GLUE from `{shown(args['glue'])}`" if args.get("glue")
            else f"trained on `{shown(args.get('train'))}`, scored on `{shown(args.get('dev'))}`")
    sample = f", on {args['max_train_examples']} training examples" if args.get("max_train_examples") else ""
    return f"{report.get('task')}: {data}{sample}; {report.get('examples')} dev examples."


def recipe(report: dict, args: dict) -> list[str]:
    """The recipe fine-tuning followed (finetune/recipes.py: Recipe.describe), then the values the run used."""
    recorded = report.get("recipe")
    if isinstance(recorded, dict):
        lines = [f"The {recorded.get('name')} recipe: {recorded.get('row')}, from {recorded.get('source')}."]
        if recorded.get("pooling_why"):
            lines[0] += f" Pooling {recorded.get('pooling')}: {recorded['pooling_why']}."
        lines.append("")
    else:
        lines = [f"{recorded}.", ""] if recorded else []  # a recipe recorded as its printed line, not a record
    settings = {"steps": report.get("steps"), "batch size": args.get("batch_size"), "peak lr": args.get("lr"),
                "warm-up": args.get("warmup"), "weight decay": args.get("weight_decay"),
                "layer-wise lr decay": args.get("layer_decay"), "max length": args.get("max_len"),
                "dropout": args.get("dropout"), "pooling": args.get("pooling"), "teacher": args.get("teacher")}
    return lines + [f"- {name}: {value}" for name, value in settings.items() if value is not None]


def metric_rows(source: Path, report: dict) -> list[str]:
    """A table of the dev metrics: this model's seed, and the other seeds of its sweep."""
    runs = {source: report}
    if re.fullmatch(r"seed-\d+", source.name):  # a --glue sweep: OUT/<task>/seed-<n>/
        runs.update({folder: read_record(folder / EVAL_FILE) for folder in sorted(source.parent.glob("seed-*")) if folder != source})
    runs = {folder: run for folder, run in runs.items() if run}
    names = [key for key, value in report.items() if isinstance(value, (int, float)) and key not in NOT_METRICS]
    rows = ["| seed | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for folder, run in sorted(runs.items(), key=lambda item: item[1].get("args", {}).get("seed", 0)):
        seed = f"{run.get('args', {}).get('seed')}{' (this model)' if folder == source and len(runs) > 1 else ''}"
        rows.append(f"| {seed} | " + " | ".join(f"{run.get(name, float('nan')):.4f}" for name in names) + " |")
    return rows


def command(args: dict) -> str:
    """The fine-tuning command as eval.json records its flags (those not at their default)."""
    defaults = {field.name: (f"--{flag(field.name)}", field.default) for field in FLAGS}
    flags = []
    for name, value in args.items():
        option, default = defaults.get(name, (None, None))
        if option is None or value is None or value is False or value == default or (name == "seed" and args.get("glue")):
            continue  # not a flag, or at its default; a --glue sweep's runs each take one of its --seeds
        flags.append(option if value is True else f"{option} {' '.join(map(shown, value)) if isinstance(value, list) else shown(value)}")
    return " ".join(["python train.py finetune", *flags])
