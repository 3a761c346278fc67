"""The report's runs, as the commands a user would type: its data files, pretraining and
fine-tuning command lines, the seeds they repeat over, and the ModelConfig the budget's flags
describe.

A *setup* is one way to pretrain (MLM with dynamic masking, static masking, NSP, ELECTRA at a
budget, a DistilBERT student, no pretraining at all) as a function of the pretraining seed.
`measure` runs every setup at every pretraining seed, fine-tunes each result on every task with
every fine-tuning seed, and returns the scores in one fixed (pretraining seed, fine-tuning seed)
order, so that two setups' i-th scores share both seeds: the pairs of a paired comparison.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from minibert import ModelConfig
from minibert.tokenizers import load_tokenizer
from minibert.finetune.kinds.sentence_files import read_task
from minibert.variants import VARIANTS

from .budget import MLM_VARIANT, REPO, RTE, SST2, THREADS, WIKITEXT, Budget
from .runner import NotRun, Runner

SUBSAMPLE_SEED = 0  # which SST-2 sentences the subsample keeps: the same for every run
EVALUATIONS = 6  # held-out evaluations per pretraining run: the points of the MLM-accuracy-over-time curve


def need(path: Path, what: str) -> None:
    if not (REPO / path).exists():
        raise NotRun(f"{what} not found at {path} (the shared/datasets folder beside the repository root)")


def recipe(variant: str, name: str):
    """train.py's default for a variant (`minibert.variants`): the report runs the user's recipe."""
    return getattr(VARIANTS[variant].default_settings(), name)


def sst2_subsample(budget: Budget, runs: Path) -> Path:
    """A seeded subsample of SST-2's training set (header kept): few labels, where what
    pretraining learned should matter most, and fine-tuning that fits the budget."""
    need(SST2 / "train.tsv", "SST-2")
    path = runs / "data" / f"sst2-train-{budget.sst2_train}-seed{SUBSAMPLE_SEED}.tsv"
    if not (REPO / path).exists():
        header, *rows = (REPO / SST2 / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        random.Random(SUBSAMPLE_SEED).shuffle(rows)
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text(header + "".join(rows[: budget.sst2_train]), encoding="utf-8")
    return path


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def sst2_validation(budget: Budget, runs: Path, size: int = 1000, min_words: int = 10, shared: int = 4) -> Path:
    """Held-out SST-2 training sentences, none of them in the subsample: where the report picks
    its fine-tuning protocol (section 3), so that dev only ever scores. SST-2's training set is
    mostly short phrases and its dev set whole sentences, so only entries of `min_words` words
    or more are kept. Its phrases are cut from the same reviews' parse trees, so an entry that
    shares `shared` consecutive words with a subsample entry partly repeats a labelled example;
    those are left out too (kept, they made this set 5–6 points easier than dev and favoured the
    pretrained encoder by 2.4 points where dev showed 0.5)."""
    path = runs / "data" / f"sst2-validation-{size}-none-of-{budget.sst2_train}.tsv"
    if not (REPO / path).exists():
        subsample = set((REPO / sst2_subsample(budget, runs)).read_text(encoding="utf-8").splitlines()[1:])
        seen = set().union(*(word_ngrams(row.split("\t")[0], shared) for row in subsample))
        header, *rows = (REPO / SST2 / "train.tsv").read_text(encoding="utf-8").splitlines()
        rows = [r for r in rows if len(r.split("\t")[0].split()) >= min_words and r not in subsample
                and not word_ngrams(r.split("\t")[0], shared) & seen]
        random.Random(SUBSAMPLE_SEED + 1).shuffle(rows)
        (REPO / path).write_text("\n".join([header, *rows[:size]]) + "\n", encoding="utf-8")
    return path


def corpus(budget: Budget, runs: Path) -> Path:
    """The pretraining corpus: WikiText-2's train split, or its first N lines (the quick run).
    The tokenizer is trained on the same text."""
    need(WIKITEXT, "WikiText-2")
    if not budget.corpus_lines:
        return WIKITEXT
    path = runs / "data" / f"wikitext-2-train-first-{budget.corpus_lines}-lines.txt"
    if not (REPO / path).exists():
        lines = (REPO / WIKITEXT).read_text(encoding="utf-8").splitlines(keepends=True)
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text("".join(lines[: budget.corpus_lines]), encoding="utf-8")
    return path


def sst2_text(budget: Budget, runs: Path) -> Path:
    """SST-2's training sentences without their labels, one document each: the corpus of
    task-adaptive pretraining (Gururangan et al., 2020, "Don't Stop Pretraining"), which
    pretrains on the unlabelled text of the task itself. Dev stays unseen. The tokenizer is
    trained on this text too. The quick run keeps the first `corpus_lines`."""
    need(SST2 / "train.tsv", "SST-2")
    path = runs / "data" / f"sst2-train-text{f'-first-{budget.corpus_lines}' if budget.corpus_lines else ''}.txt"
    if not (REPO / path).exists():
        texts = read_task(REPO / SST2 / "train.tsv").texts[:budget.corpus_lines or None]
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text("".join(f"{text}\n\n" for text in texts), encoding="utf-8")
    return path


def pretrain_args(budget: Budget, runs: Path, variant: str, steps: int, *extra: str, seed: int,
                  lr: float | None = None, data: Path | None = None) -> list[str]:
    """`python train.py` flags of one pretraining run of `steps` steps on `data` (default the
    report's corpus): it evaluates on the held-out split EVALUATIONS times (the curve) and
    saves at its end."""
    every = max(1, steps // EVALUATIONS)
    return ["--variant", variant, "--data", str(data or corpus(budget, runs)), "--cache-dir", str(runs / "cache"),
            "--steps", str(steps), "--seq-len", str(budget.seq_len), "--batch-size", str(budget.batch_size),
            "--lr", f"{recipe(variant, 'lr') if lr is None else lr:g}", "--seed", str(seed), "--threads", str(THREADS),
            "--device", "cpu", "--eval-every", str(every), "--eval-batches", "10", "--log-every", str(every),
            "--save-every", str(steps), "--keep", "1", *extra]


def mlm_run(runner: Runner, budget: Budget, steps: int, seed: int, layout: str = "full_sentences",
            masking: str = "dynamic", *extra: str, name: str | None = None, lr: float | None = None,
            data: Path | None = None) -> dict:
    """BERT's MLM on the report's model; a sentence task only if `layout` asks for one."""
    args = pretrain_args(budget, runner.runs, MLM_VARIANT, steps, *budget.model, "--layout", layout, "--masking", masking,
                         *extra, seed=seed, lr=lr, data=data)
    return runner.pretrain(f"{name or f'mlm-{steps}'}-seed{seed}", args)


def untrained_run(runner: Runner, budget: Budget, seed: int, data: Path | None = None, name: str = "untrained") -> dict:
    """No pretraining: one step at a vanishing learning rate = the same architecture, tokenizer
    (trained on `data`) and initialisation seed, untrained (the baseline every pretrained row is
    read against)."""
    return mlm_run(runner, budget, 1, seed, name=name, lr=1e-12, data=data)


@dataclass(frozen=True)
class Setup:
    key: str  # in folder names and results
    label: str  # in tables
    pretrain: Callable[[int], dict]  # pretraining seed -> Runner.pretrain's record


TASKS = {"sst2": "SST-2", "rte": "RTE"}


def finetune(runner: Runner, budget: Budget, task: str, name: str, pretrained: dict, seed: int, pooling: str,
             protocol: tuple[float, int] | None = None, flags: tuple[str, str, ...] = ()) -> dict:
    """`python -m minibert.finetune` from a pretraining run on SST-2 (the subsample) or RTE,
    scored on the task's dev set. `protocol`: SST-2's (peak lr, steps) instead of the budget's,
    named in the folder. `flags`: (a name for the folder, the extra flags), e.g. a --teacher."""
    if task == "sst2":
        lr, steps = protocol or (budget.sst2_lr, budget.sst2_steps)
        train, dev, max_len = sst2_subsample(budget, runner.runs), SST2 / "dev.tsv", budget.seq_len
    else:
        need(RTE / "train.tsv", "RTE")
        train, dev, steps, lr, max_len = RTE / "train.tsv", RTE / "dev.tsv", budget.rte_steps, budget.rte_lr, budget.rte_max_len
    suffix = ("" if pooling == "cls" else f"-{pooling}") + (f"-lr{lr:g}-steps{steps}" if protocol else "")
    suffix += f"-{flags[0]}" if flags else ""
    return runner.finetune(finetune_name(name, task, suffix, seed), pretrained["out"], train, dev, steps, lr, max_len, seed,
                           pooling, *flags[1:])


def finetune_name(name: str, task: str, suffix: str, seed: int) -> str:
    """The folder of one fine-tuning run under runs/finetune/."""
    return f"{name}-{task}{suffix}-ft{seed}"


def measure(runner: Runner, budget: Budget, setups: list[Setup], tasks: tuple[str, ...], pooling: str | None = None,
            protocol: tuple[float, int] | None = None, flags: tuple[str, ...] = ()) -> dict:
    """Every setup at every pretraining seed, each fine-tuned on every task with every
    fine-tuning seed: {key: {label, runs: [one per pretraining seed], scores: {task: [...]}}}. scores[task][i] comes from pretraining seed i // F and fine-tuning seed
    i % F (F fine-tuning seeds), the same i for every setup. `pooling`: the classifier's
    (`--pooling`; default the budget's). `protocol`: SST-2's (peak lr, steps), default the budget's.
    `flags`: (a name for the folders, extra fine-tuning flags...), as `finetune` takes them."""
    pairs = [(setup, seed) for setup in setups for seed in budget.pretrain_seeds]
    pretrained = runner.parallel([partial(setup.pretrain, seed) for setup, seed in pairs])
    jobs = [(setup, seed, run, task, f) for (setup, seed), run in zip(pairs, pretrained)
            for task in tasks for f in budget.finetune_seeds]
    tuned = runner.parallel([partial(finetune, runner, budget, task, Path(run["out"]).name, run, f, pooling or budget.pooling,
                                     protocol, flags) for _, _, run, task, f in jobs])
    result = {setup.key: {"label": setup.label, "runs": [], "scores": {task: [] for task in tasks}} for setup in setups}
    for (setup, seed), run in zip(pairs, pretrained):
        result[setup.key]["runs"].append({"seed": seed, "finetune_commands": {task: [] for task in tasks},
                                          "vocab_size": run["config"]["vocab_size"],
                                          **{k: run[k] for k in ("command", "out", "seconds", "final_eval", "evals")}})
    for (setup, seed, _, task, _), out in zip(jobs, tuned):
        result[setup.key]["scores"][task].append(out["accuracy"])
        run = result[setup.key]["runs"][budget.pretrain_seeds.index(seed)]
        run["finetune_commands"][task].append(out["command"])
    return result


def first_commands(setup: dict) -> list[str]:
    """One measured setup's commands at its first pretraining and fine-tuning seeds (the others
    differ in `--seed` and the folder names)."""
    run = setup["runs"][0]
    return [run["command"], *(commands[0] for commands in run["finetune_commands"].values())]


def commands_block(setups: list[dict]) -> list[str]:
    """The markdown lines that show the measured setups' commands at their first seeds."""
    shown = dict.fromkeys(command for setup in setups for command in first_commands(setup))  # each once, in order
    return ["Commands at the first seeds (the others change `--seed` and the folder names):", "", "```", *shown, "```"]


def report_config(budget: Budget) -> ModelConfig:
    """The ModelConfig the report's flags describe (the tokenizer fixes vocab_size exactly)."""
    flags = dict(zip(budget.model[::2], budget.model[1::2]))
    fields = {name.lstrip("-").replace("-", "_"): int(value) for name, value in flags.items()}
    return ModelConfig(**fields, pooler=False, max_positions=budget.seq_len)


def corpus_counts(budget: Budget, runs: Path, checkpoint: str) -> Counter:
    """How often each token id occurs in the pretraining corpus, under a run's tokenizer."""
    tokenizer = load_tokenizer(REPO / checkpoint)
    counts: Counter = Counter()
    for line in (REPO / corpus(budget, runs)).read_text(encoding="utf-8").splitlines():
        counts.update(tokenizer.tokenize_to_ids(line))
    return counts


def corpus_passes(budget: Budget, runs: Path, checkpoint: str) -> float:
    """How many times S steps read the corpus: S × batch × seq_len over its token count."""
    return budget.steps * budget.batch_size * budget.seq_len / sum(corpus_counts(budget, runs, checkpoint).values())
