"""The report's runs, as the commands a user would type: its data files, pretraining and
fine-tuning command lines, and the ModelConfig the budget's flags describe."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from minibert import ModelConfig
from minibert.data import load_tokenizer

from .budget import FINETUNE_SEED, PRETRAIN_LR, PRETRAIN_SEED, REPO, RTE, SST2, THREADS, WIKITEXT, Budget
from .runner import NotRun, Runner


def need(path: Path, what: str) -> None:
    if not (REPO / path).exists():
        raise NotRun(f"{what} not found at {path} (the shared/datasets folder beside the repository root)")


def seeded(name: str, seed: int, default: int) -> str:
    """A run's folder name with its seed; the default seed keeps the plain name (and its cache)."""
    return name if seed == default else f"{name}-seed{seed}"


def sst2_subsample(budget: Budget, runs: Path) -> Path:
    """A seeded subsample of SST-2's training set (header kept), so fine-tuning fits the budget."""
    need(SST2 / "train.tsv", "SST-2")
    path = runs / "data" / f"sst2-train-{budget.sst2_train}-seed{FINETUNE_SEED}.tsv"
    if not (REPO / path).exists():
        header, *rows = (REPO / SST2 / "train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
        random.Random(FINETUNE_SEED).shuffle(rows)
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text(header + "".join(rows[: budget.sst2_train]), encoding="utf-8")
    return path


def corpus(budget: Budget, runs: Path) -> Path:
    """The pretraining corpus: the first N lines of WikiText-2's train split (the tokenizer is
    trained on them too). S steps read it several times over, which is what gives static
    masking the chance to repeat a mask; the full 2M words would not be read even once."""
    need(WIKITEXT, "WikiText-2")
    path = runs / "data" / f"wikitext-2-train-first-{budget.corpus_lines}-lines.txt"
    if not (REPO / path).exists():
        lines = (REPO / WIKITEXT).read_text(encoding="utf-8").splitlines(keepends=True)
        (REPO / path).parent.mkdir(parents=True, exist_ok=True)
        (REPO / path).write_text("".join(lines[: budget.corpus_lines]), encoding="utf-8")
    return path


def pretrain_args(budget: Budget, runs: Path, variant: str, length: int | str, *extra: str, lr: float = PRETRAIN_LR,
                  seed: int = PRETRAIN_SEED) -> list[str]:
    """`python train.py` flags of one pretraining run. `length`: a number of steps (the run
    evaluates and saves at its end and logs ten times), or a wall-clock duration such as "5m"
    (`--budget`: the schedule ends at the deadline; train.py's own evaluation, log and save
    intervals, so the held-out metrics form a curve over time)."""
    if isinstance(length, str):
        how_long, intervals = ["--budget", length], ["--eval-batches", "10"]
    else:
        how_long = ["--steps", str(length)]
        intervals = ["--eval-every", str(length), "--eval-batches", "10", "--log-every", str(max(1, length // 10)),
                     "--save-every", str(length)]
    return ["--variant", variant, "--data", str(corpus(budget, runs)), "--cache-dir", str(runs / "cache"), *how_long,
            "--seq-len", str(budget.seq_len), "--batch-size", str(budget.batch_size), "--lr", str(lr), "--seed", str(seed),
            "--threads", str(THREADS), "--device", "cpu", *intervals, "--keep", "1", *extra]


def mlm_run(runner: Runner, budget: Budget, length: int | str, layout: str = "full_sentences", masking: str = "dynamic",
            *extra: str, name: str | None = None, lr: float = PRETRAIN_LR, seed: int = PRETRAIN_SEED) -> dict:
    """BERT's MLM on the report's model; a sentence task only if `layout` asks for one."""
    args = pretrain_args(budget, runner.runs, "bert", length, *budget.model, "--layout", layout, "--masking", masking,
                         *extra, lr=lr, seed=seed)
    return runner.pretrain(seeded(name or f"mlm-{length}", seed, PRETRAIN_SEED), args)


def untrained_run(runner: Runner, budget: Budget) -> dict:
    """No pretraining: one step at a vanishing learning rate = the same architecture and
    tokenizer, untrained (the baseline every pretrained row is read against)."""
    return mlm_run(runner, budget, 1, name="untrained", lr=1e-12)


def finetune_sst2(runner: Runner, budget: Budget, name: str, pretrained: dict, seed: int = FINETUNE_SEED) -> dict:
    train = sst2_subsample(budget, runner.runs)
    return runner.finetune(seeded(f"{name}-sst2", seed, FINETUNE_SEED), pretrained["out"], SST2, train,
                           budget.sst2_steps, budget, seed)


def finetune_rte(runner: Runner, budget: Budget, name: str, pretrained: dict, seed: int = FINETUNE_SEED) -> dict:
    need(RTE / "train.tsv", "RTE")
    return runner.finetune(seeded(f"{name}-rte", seed, FINETUNE_SEED), pretrained["out"], RTE, RTE / "train.tsv",
                           budget.rte_steps, budget, seed)


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
