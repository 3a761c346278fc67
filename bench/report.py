"""The results report: the chapter's decision guide, measured at a size this machine can run.

    "best raw performance: RoBERTa or ELECTRA; tight memory: ALBERT;
     tight latency: DistilBERT; best sample efficiency: ELECTRA"

    python bench/report.py                     # every section, then docs/results.md
    python bench/report.py --only latency      # one section; the others are kept from before
    python bench/report.py --quick             # tiny budgets, written under runs/report/quick/

Sections: params (parameter counts, ALBERT's ablation), latency (bert-base vs
distilbert-base), efficiency (MLM vs ELECTRA's RTD at equal pretraining FLOPs), sentence
(static vs dynamic masking; NSP vs SOP vs no sentence task), distill (a DistilBERT student
against its teacher).

Training and fine-tuning run as the user would run them — `python train.py ...` and
`python -m minibert.finetune ...` in a subprocess — so each table row carries the exact
command that reproduces it. Every finished run is cached in runs/report/ (git-ignored):
rerunning resumes where it stopped, and a section that cannot run (no dataset, a failing
command) is reported as "not run yet" with the reason instead of stopping the others.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from minibert import Encoder, ModelConfig, from_pretrained  # noqa: E402
from minibert.config import PRESETS  # noqa: E402
from minibert.data import load_tokenizer  # noqa: E402

DATASETS = Path("..") / "shared" / "datasets"  # beside the repository root; commands run in REPO
WIKITEXT = DATASETS / "wikitext-2" / "train.txt"
SST2 = DATASETS / "sst2"
RTE = DATASETS / "rte"
SECTIONS = ("params", "latency", "efficiency", "sentence", "distill")
# One thread per training process: on a shared machine, two OpenMP threads that wait for each other
# at every op ran fine-tuning 50× slower than one thread (measured while writing this report).
THREADS = 1
LATENCY_THREADS = (1, 2)
RTE_MAJORITY = 146 / 277  # dev accuracy of always answering "entailment"


@dataclass(frozen=True)
class Budget:
    """How big every experiment is. The full budget took about 45 minutes on this 2-core machine,
    shared with other jobs; --quick about 4."""

    model: tuple[str, ...]  # ModelConfig flags of every pretrained model (ELECTRA: the discriminator)
    seq_len: int
    batch_size: int
    steps: int  # "S": the MLM runs of sections 4 and 5, and section 3's largest budget
    budgets: tuple[float, ...]  # section 3's compute budgets, as fractions of S MLM steps
    corpus_lines: int  # the first N lines of WikiText-2 train: S steps read them several times over
    sst2_train: int  # SST-2 training examples (a seeded subsample); dev is always the full 872
    sst2_steps: int
    rte_steps: int  # on the full RTE training set; dev is the full 277
    finetune_lr: float
    latency_repeats: tuple[int, int]  # timed calls per model at batch 1 and batch 8


FULL = Budget(
    model=("--hidden-size", "128", "--num-layers", "4", "--num-heads", "4", "--intermediate-size", "512",
           "--vocab-size", "8000", "--embedding-size", "64"),
    seq_len=128, batch_size=32, steps=300, budgets=(0.25, 0.5, 1.0), corpus_lines=6000,
    sst2_train=8000, sst2_steps=500, rte_steps=300, finetune_lr=5e-4, latency_repeats=(15, 7),
)
QUICK = Budget(
    model=("--hidden-size", "64", "--num-layers", "2", "--num-heads", "2", "--intermediate-size", "128",
           "--vocab-size", "1000", "--embedding-size", "32"),
    seq_len=64, batch_size=8, steps=8, budgets=(0.5, 1.0), corpus_lines=300,
    sst2_train=200, sst2_steps=10, rte_steps=6, finetune_lr=5e-4, latency_repeats=(2, 1),
)
PRETRAIN_SEED = FINETUNE_SEED = 0
PRETRAIN_LR = 1e-3
STUDENT_LR = 5e-4  # DistilBERT's peak learning rate
GENERATOR_FRACTION = 0.5  # ELECTRA: 1/4 to 1/2 of the discriminator's width works best (paper, fig. 3)
ELECTRA_SMALL_FLOPS = 1.4e18  # ELECTRA paper, table 1: ELECTRA-Small's (and BERT-Small's) pretraining compute


class NotRun(Exception):
    """A section that cannot run yet; the message says why and goes into the report."""


# --- parameters ------------------------------------------------------------------------------


def count_parameters(config: ModelConfig) -> int:
    """Parameters of the backbone, counted on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return sum(p.numel() for p in Encoder(config).parameters())


def section_params(budget: Budget, runs: Path) -> dict:
    presets = [{"name": name, "parameters": count_parameters(ModelConfig.preset(name))} for name in PRESETS]
    base = ModelConfig.preset("bert-base", vocab_size=30000)  # ALBERT's vocabulary, BERT-base's shape
    ablation = [
        ("BERT-base shape, V=30000: no factorization, no sharing", {}),
        ("factorization alone (E=128)", dict(embedding_size=128)),
        ("sharing alone (all layers)", dict(share_layers="all")),
        ("both (= albert-base)", dict(embedding_size=128, share_layers="all")),
        ("factorization + attention-only sharing", dict(embedding_size=128, share_layers="attention")),
        ("factorization + FFN-only sharing", dict(embedding_size=128, share_layers="ffn")),
    ]
    rows = [{"name": name, "parameters": count_parameters(base.replace(**changes))} for name, changes in ablation]
    return {"presets": presets, "ablation": rows}


def render_params(result: dict, plots: Path) -> str:
    import matplotlib.pyplot as plt

    presets, ablation = result["presets"], result["ablation"]
    full = ablation[0]["parameters"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for axis, rows, title in ((left, presets, "presets (backbone, pooler included)"), (right, ablation, "ALBERT ablation at base size")):
        names = [r["name"].split(":")[0] for r in rows][::-1]
        values = [r["parameters"] / 1e6 for r in rows][::-1]
        bars = axis.barh(names, values, color="#4477aa" if rows is presets else "#cc6677")
        axis.bar_label(bars, labels=[f"{v:.1f}M" for v in values], padding=3, fontsize=8)
        axis.set_xlim(0, max(values) * 1.18)
        axis.set_xlabel("parameters (millions)")
        axis.set_title(title)
        axis.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(plots / "parameters.png", dpi=110)
    plt.close(fig)
    lines = [
        "| preset | parameters |", "|---|---:|",
        *(f"| {r['name']} | {r['parameters']:,} |" for r in presets),
        "", "ALBERT's two ideas, one at a time, on BERT-base's shape (H=768, 12 layers, FFN 3072) with ALBERT's 30,000-token vocabulary:", "",
        "| configuration | parameters | vs. neither |", "|---|---:|---:|",
        *(f"| {r['name']} | {r['parameters']:,} | {r['parameters'] / full:.1%} |" for r in ablation),
        "", f"![parameter counts]({plots.name}/parameters.png)", "",
        "Factorization removes V·(H−E) − E·H ≈ 19M parameters (the 30,000 × 768 table becomes 30,000 × 128 "
        "plus a 128 × 768 projection); sharing removes 11 of the 12 layers' 7.1M each (≈ 78M). Together "
        "they leave 11.7M, one ninth of BERT-base — the *memory* argument for ALBERT. Compute is another "
        "matter: a shared layer is still applied 12 times, so ALBERT-base costs about as many FLOPs per "
        "token as BERT-base.",
    ]
    return "\n".join(lines)


# --- latency ---------------------------------------------------------------------------------


def interleaved_latency(models: dict[str, torch.nn.Module], inputs: dict, repeats: int) -> dict[str, float]:
    """Median seconds per forward of each model, timed in alternating order so that the
    other load on the machine hits every model alike. Two untimed calls warm each up."""
    times: dict[str, list[float]] = {name: [] for name in models}
    order = list(models)
    with torch.inference_mode():
        for name in order:
            for _ in range(2):
                models[name](**inputs)
        for i in range(repeats):
            for name in (order if i % 2 == 0 else order[::-1]):
                start = time.perf_counter()
                models[name](**inputs)
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def random_inputs(batch: int, length: int, vocab: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def section_latency(budget: Budget, runs: Path) -> dict:
    torch.manual_seed(0)
    names = ("bert-base", "distilbert-base")
    models = {name: Encoder(ModelConfig.preset(name, hidden_dropout=0.0, attention_dropout=0.0)).eval() for name in names}
    rows = []
    for threads in LATENCY_THREADS:
        torch.set_num_threads(threads)
        for batch, repeats in zip((1, 8), budget.latency_repeats):
            median = interleaved_latency(models, random_inputs(batch, 128, 30522), repeats)
            rows.append({"threads": threads, "batch": batch, "repeats": repeats, **{name: median[name] for name in names}})
    return {
        "parameters": {name: count_parameters(models[name].config) for name in names},
        "rows": rows, "length": 128, "attention": models["bert-base"].config.attention_backend,
        "torch": torch.__version__, "load_average": os.getloadavg()[0],
    }


def render_latency(result: dict, plots: Path) -> str:
    p = result["parameters"]
    size = p["distilbert-base"] / p["bert-base"]
    speedups = [r["bert-base"] / r["distilbert-base"] for r in result["rows"]]
    lines = [
        f"Random weights, eval mode, `torch.inference_mode()`, length {result['length']}, no padding, "
        f"attention backend `{result['attention']}`, torch {result['torch']}. The two "
        "models are timed in alternating order (warm-up 2 calls each); the table gives the median.",
        f"Load average when measured: {result['load_average']:.1f} on 2 cores. Other jobs share this machine, so the absolute "
        "times are noisy; the alternating order protects the ratio.", "",
        "| threads | batch | timed calls each | bert-base (ms) | distilbert-base (ms) | speed-up | DistilBERT is faster by |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        speedup = r["bert-base"] / r["distilbert-base"]
        lines.append(f"| {r['threads']} | {r['batch']} | {r['repeats']} | {r['bert-base'] * 1e3:.0f} | {r['distilbert-base'] * 1e3:.0f} "
                     f"| {speedup:.2f}× | {speedup - 1:.0%} |")
    lines += [
        "", f"| | bert-base | distilbert-base | ratio | claim |", "|---|---:|---:|---:|---|",
        f"| parameters | {p['bert-base']:,} | {p['distilbert-base']:,} | {size:.1%} ({1 - size:.0%} smaller) | 40% smaller |",
        "", "**Reading.** Size: half the layers go but the embeddings (23.8M of BERT-base's 109.5M) stay, so 6 of 12 "
        "layers is 39% smaller, not 50% — the claim holds by construction. Speed: the embeddings cost almost no "
        "compute, so half the layers should run close to 2× as fast, i.e. \"100% faster\"; the encoder alone measured "
        f"{min(speedups):.2f}× to {max(speedups):.2f}× here. The paper's \"60% faster\" (668 s against 410 s) timed a full pass over STS-B on CPU at "
        "batch size 1, a whole-pipeline number that includes work the layer count does not shrink.",
    ]
    return "\n".join(lines)


# --- subprocess runs, cached -----------------------------------------------------------------


def shell(args: list[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in args)


class Runner:
    """Runs `train.py` / `minibert.finetune` in a subprocess; the output folder is the cache.

    Each run's folder gets `report-run.json` = {command, done, seconds}. The same command
    found done is not run again; found unfinished, a pretraining run continues with
    --resume; a different command (a changed budget) starts the folder over with
    --overwrite. Paths are relative to the repository, as in the commands shown.
    """

    MARKER = "report-run.json"

    def __init__(self, runs: Path):
        self.runs = runs
        self.seconds = 0.0  # wall time of every run this section used, cached or not: its cost to reproduce
        (REPO / runs / "logs").mkdir(parents=True, exist_ok=True)

    def _call(self, name: str, args: list[str]) -> float:
        log = REPO / self.runs / "logs" / f"{name}.log"
        print(f"  running {name}: python {shell(args)}", flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": str(THREADS), "PYTHONPATH": str(REPO)}
        start = time.perf_counter()
        with open(log, "w", encoding="utf-8") as output:
            code = subprocess.call([sys.executable, *args], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
        if code:
            tail = [line for line in log.read_text(encoding="utf-8").replace("\r", "\n").splitlines() if line.strip()]
            raise NotRun(f"`{name}` failed (exit {code}): {tail[-1] if tail else 'no output'} (log: {log.relative_to(REPO)})")
        return time.perf_counter() - start

    def _run(self, name: str, out: Path, args: list[str], resumable: bool) -> dict:
        """Run `python ARGS` unless the same command already finished in `out`; its marker."""
        command = shell(["python", *args])
        marker = REPO / out / self.MARKER
        previous = json.loads(marker.read_text()) if marker.exists() else {}
        if previous.get("command") == command and previous.get("done"):
            self.seconds += previous["seconds"]
            return previous
        if previous.get("command") == command and resumable:
            again = ["--resume"]
        else:
            again = ["--overwrite"] if (REPO / out).exists() else []
        (REPO / out).mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"command": command, "done": False}) + "\n")
        seconds = self._call(name, args + again)
        record = {"command": command, "done": True, "seconds": seconds}
        marker.write_text(json.dumps(record) + "\n")
        self.seconds += seconds
        return record

    def pretrain(self, name: str, args: list[str]) -> dict:
        out = self.runs / "pretrain" / name
        record = self._run(name, out, ["train.py", *args, "--out", str(out)], resumable=True)
        metrics = [json.loads(line) for line in (REPO / out / "metrics.jsonl").read_text().splitlines() if line.strip()]
        evals = [m for m in metrics if any(k.startswith("eval_") for k in m)]
        run = json.loads((REPO / out / "run.json").read_text())
        return {**record, "out": str(out), "config": run["config"], "final_eval": evals[-1] if evals else {}}

    def finetune(self, name: str, init: str, task: Path, train_file: Path, steps: int, budget: Budget) -> dict:
        out = self.runs / "finetune" / name
        args = ["-m", "minibert.finetune", "--init", init, "--train", str(train_file), "--dev", str(task / "dev.tsv"),
                "--out", str(out), "--steps", str(steps), "--batch-size", "32", "--lr", str(budget.finetune_lr),
                "--max-len", str(budget.seq_len), "--seed", str(FINETUNE_SEED), "--device", "cpu"]
        record = self._run(name, out, args, resumable=False)
        result = json.loads((REPO / out / "eval.json").read_text())
        return {**record, "accuracy": result["accuracy"]}


def need(path: Path, what: str) -> None:
    if not (REPO / path).exists():
        raise NotRun(f"{what} not found at {path} (the shared/datasets folder beside the repository root)")


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


def pretrain_args(budget: Budget, runs: Path, variant: str, steps: int, *extra: str, lr: float = PRETRAIN_LR) -> list[str]:
    return ["--variant", variant, "--data", str(corpus(budget, runs)), "--cache-dir", str(runs / "cache"),
            "--steps", str(steps), "--seq-len", str(budget.seq_len), "--batch-size", str(budget.batch_size),
            "--lr", str(lr), "--seed", str(PRETRAIN_SEED), "--threads", str(THREADS), "--device", "cpu",
            "--eval-every", str(steps), "--eval-batches", "10", "--log-every", str(max(1, steps // 10)),
            "--save-every", str(steps), "--keep", "1", *extra]


def mlm_run(runner: Runner, budget: Budget, steps: int, layout: str = "full_sentences", masking: str = "dynamic",
            *extra: str, name: str | None = None, lr: float = PRETRAIN_LR) -> dict:
    """BERT's MLM on the report's model; a sentence task only if `layout` asks for one."""
    args = pretrain_args(budget, runner.runs, "bert", steps, *budget.model, "--layout", layout, "--masking", masking, *extra, lr=lr)
    return runner.pretrain(name or f"mlm-{steps}", args)


def finetune_sst2(runner: Runner, budget: Budget, name: str, pretrained: dict) -> dict:
    train = sst2_subsample(budget, runner.runs)
    return runner.finetune(f"{name}-sst2", pretrained["out"], SST2, train, budget.sst2_steps, budget)


def finetune_rte(runner: Runner, budget: Budget, name: str, pretrained: dict) -> dict:
    need(RTE / "train.tsv", "RTE")
    return runner.finetune(f"{name}-rte", pretrained["out"], RTE, RTE / "train.tsv", budget.rte_steps, budget)


# --- FLOPs -------------------------------------------------------------------------------------


def encoder_flops(c: ModelConfig, tokens: float, seq_len: int) -> float:
    """Forward FLOPs of the encoder on `tokens` tokens in sequences of `seq_len`: the E→H
    projection, Q/K/V/output and the two FFN matmuls, and attention's QKᵀ and PV."""
    per_token = 2 * c.num_layers * (4 * c.hidden_size**2 + 2 * c.hidden_size * c.intermediate_size)
    per_token += 2 * c.num_layers * 2 * seq_len * c.hidden_size
    if c.embedding_dim != c.hidden_size:
        per_token += 2 * c.embedding_dim * c.hidden_size
    return tokens * per_token


def mlm_head_flops(c: ModelConfig, predicted: float) -> float:
    """The MLM head at the predicted positions only (sparse prediction): H→E, then E→V."""
    return predicted * 2 * (c.hidden_size * c.embedding_dim + c.embedding_dim * c.vocab_size)


def training_flops(kind: str, c: ModelConfig, batch: int, seq_len: int, mask_prob: float = 0.15) -> float:
    """FLOPs of one optimizer step: 3 × forward (the backward costs about twice the forward).

    mlm: the encoder + MLM head at the masked 15%. rtd (ELECTRA): the generator (encoder +
    MLM head at the masked positions) AND the discriminator (encoder + a per-token H→H→1 head).
    The generator's sampling is a forward with no backward, but its MLM loss trains it, so it
    counts in full — as the ELECTRA paper counts it.
    """
    from minibert.objectives.rtd import generator_config

    tokens, predicted = batch * seq_len, batch * seq_len * mask_prob
    if kind == "mlm":
        return 3 * (encoder_flops(c, tokens, seq_len) + mlm_head_flops(c, predicted))
    g = generator_config(c, GENERATOR_FRACTION)
    generator = encoder_flops(g, tokens, seq_len) + mlm_head_flops(g, predicted)
    discriminator = encoder_flops(c, tokens, seq_len) + tokens * 2 * (c.hidden_size**2 + c.hidden_size)
    return 3 * (generator + discriminator)


def report_config(budget: Budget) -> ModelConfig:
    """The ModelConfig the report's flags describe (the tokenizer fixes vocab_size exactly)."""
    flags = dict(zip(budget.model[::2], budget.model[1::2]))
    fields = {name.lstrip("-").replace("-", "_"): int(value) for name, value in flags.items()}
    return ModelConfig(**fields, pooler=False, max_positions=budget.seq_len)


# --- sample efficiency: MLM vs RTD at equal FLOPs ---------------------------------------------


def section_efficiency(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    config = report_config(budget)
    per_step = {kind: training_flops(kind, config, budget.batch_size, budget.seq_len) for kind in ("mlm", "rtd")}
    # No pretraining: one step at a vanishing learning rate = the same architecture and tokenizer, untrained.
    untrained = mlm_run(runner, budget, 1, name="untrained", lr=1e-12)
    baseline = finetune_sst2(runner, budget, "untrained", untrained)
    points = []
    for fraction in budget.budgets:
        mlm_steps = max(1, round(fraction * budget.steps))
        rtd_steps = max(1, round(mlm_steps * per_step["mlm"] / per_step["rtd"]))
        runs_of = {
            "mlm": (mlm_steps, mlm_run(runner, budget, mlm_steps)),
            "rtd": (rtd_steps, runner.pretrain(f"rtd-{rtd_steps}", pretrain_args(
                budget, runs, "electra", rtd_steps, *budget.model, "--generator-fraction", str(GENERATOR_FRACTION)))),
        }
        for kind, (steps, run) in runs_of.items():
            if run["config"]["vocab_size"] != config.vocab_size:
                raise NotRun(f"{run['out']} has a {run['config']['vocab_size']}-token vocabulary, not the {config.vocab_size} the FLOPs assume")
            tuned = finetune_sst2(runner, budget, f"{kind}-{steps}", run)
            points.append({"objective": kind, "steps": steps, "flops": steps * per_step[kind], "sst2": tuned["accuracy"],
                           "budget": mlm_steps * per_step["mlm"],
                           "pretrain_command": run["command"], "pretrain_seconds": run["seconds"],
                           "finetune_command": tuned["command"], "final_eval": run["final_eval"]})
    return {"run_seconds": runner.seconds, "per_step_flops": per_step, "points": points, "unigram_entropy": unigram_entropy(corpus_counts(budget, runs, untrained["out"])),
            "untrained": {"sst2": baseline["accuracy"], "commands": [untrained["command"], baseline["command"]]}}


def held_out(final_eval: dict, names: tuple[str, ...]) -> str:
    """Some held-out metrics of a run's last evaluation, as 'name value, ...'."""
    shown = [f"{name.replace('_', ' ')} {final_eval['eval_' + name]:.3f}" for name in names if "eval_" + name in final_eval]
    return ", ".join(shown) or "–"


def standard_error(accuracy: float, examples: int) -> float:
    """The sampling error of an accuracy measured on `examples` items (binomial)."""
    return math.sqrt(accuracy * (1 - accuracy) / examples)


def efficiency_notes(result: dict) -> list[str]:
    """What the points say, and what they cannot say at this scale."""
    by_budget: dict[float, dict[str, float]] = {}
    for p in result["points"]:
        by_budget.setdefault(p["budget"], {})[p["objective"]] = p["sst2"]
    gaps = [pair["rtd"] - pair["mlm"] for pair in by_budget.values()]
    noise = 2 * math.sqrt(2) * standard_error(0.5, 872)  # two s.e. of a difference of two accuracies near 50%
    ahead = sum(g > 0 for g in gaps)
    clear = sum(abs(g) > noise for g in gaps)
    best = max(p["sst2"] for p in result["points"])
    return [
        f"**Reading.** RTD scored higher than MLM at {ahead} of {len(gaps)} budgets (gaps "
        f"{', '.join(f'{100 * g:+.1f}' for g in gaps)} points); {clear} of the gaps exceed ±{100 * noise:.1f} points, twice "
        "the standard error of a difference of two accuracies on 872 sentences. The best fine-tuned model reached "
        f"{best:.3f} against {result['untrained']['sst2']:.3f} without pretraining"
        + (" (the share of the majority class in dev is 0.509: a model that always answers \"positive\")." if best < 0.52 else "."),
        "",
        *plateau_note(result),
        "",
        "**Scale, honestly.** ELECTRA's claim (GLUE dev 79.9 for ELECTRA-Small against 75.1 for BERT-Small at the same "
        f"{ELECTRA_SMALL_FLOPS:.2g} pretraining FLOPs) is about models that have learned a lot of language. The largest budget "
        f"here is {math.log10(ELECTRA_SMALL_FLOPS / max(by_budget)):.0f} orders of magnitude smaller, with one pretraining seed and one fine-tuning seed per point: at this scale the "
        "encoders have learned little beyond token frequencies, so whether they fine-tune better than an untrained "
        "encoder at all is the first question, and an ELECTRA-vs-BERT ordering within the noise is no evidence either "
        "way. The mechanism the paper credits is visible in the pretraining metrics: the discriminator gets a loss on "
        "every token instead of the masked 15%.",
    ]


def plateau_note(result: dict) -> list[str]:
    """Did pretraining get past the context-free baselines? (Both objectives first learn the
    token frequencies; using the context comes later, after a plateau.)"""
    largest = max(p["budget"] for p in result["points"])
    final = {p["objective"]: p["final_eval"] for p in result["points"] if p["budget"] == largest}
    mlm, rtd = final["mlm"], final["rtd"]
    if "eval_mlm_loss" not in mlm or "eval_rtd_loss" not in rtd:
        return []
    rate = rtd.get("eval_replaced_fraction", 0.15)
    return [
        f"**Where pretraining got to.** At the largest budget the MLM model's held-out loss is {mlm['eval_mlm_loss']:.2f} nats, "
        f"against {result['unigram_entropy']:.2f} for predicting token frequencies with no context at all; the ELECTRA "
        f"discriminator's RTD loss is {rtd['eval_rtd_loss']:.3f} against {binary_entropy(rate):.3f} for always answering "
        f"\"original\" at the replaced rate {rate:.3f}. "
        + ("Both are still on the plateau where a model knows the statistics of single tokens but does not yet use the "
           "context, so their encoders hold nothing SST-2 can use that an untrained one lacks."
           if mlm["eval_mlm_loss"] > result["unigram_entropy"] - 0.3 and rtd["eval_rtd_loss"] > binary_entropy(rate) - 0.03
           else "At least one objective has moved clearly past that baseline, i.e. learned to use the context."),
    ]


def render_efficiency(result: dict, plots: Path) -> str:
    import matplotlib.pyplot as plt

    labels = {"mlm": "MLM (BERT-style, no NSP)", "rtd": "RTD (ELECTRA discriminator)"}
    fig, axis = plt.subplots(figsize=(6.4, 4.2))
    for kind, marker in (("mlm", "o"), ("rtd", "s")):
        pts = sorted((p for p in result["points"] if p["objective"] == kind), key=lambda p: p["flops"])
        errors = [standard_error(p["sst2"], 872) for p in pts]
        axis.errorbar([p["flops"] for p in pts], [p["sst2"] for p in pts], yerr=errors, marker=marker, capsize=3, label=labels[kind])
    axis.axhline(result["untrained"]["sst2"], color="grey", linestyle="--", label="no pretraining")
    axis.set_xscale("log")
    axis.set_xlabel("pretraining FLOPs")
    axis.set_ylabel("SST-2 dev accuracy (± 1 s.e.)")
    axis.set_title("Equal-compute pretraining, then SST-2 fine-tuning")
    axis.legend()
    fig.tight_layout()
    fig.savefig(plots / "sample_efficiency.png", dpi=110)
    plt.close(fig)

    per_step = result["per_step_flops"]
    lines = [
        f"FLOPs per pretraining step: MLM {per_step['mlm']:.3g}, ELECTRA {per_step['rtd']:.3g} (generator at "
        f"{GENERATOR_FRACTION:g} of the width + discriminator; counted as 3 × the forward matmuls, the MLM decoder at the "
        "masked 15% only), so at each budget ELECTRA gets proportionally fewer steps. Both use peak lr "
        f"{PRETRAIN_LR:g}, as the ELECTRA paper gives BERT-Small and ELECTRA-Small the same.", "",
        "| budget (FLOPs) | objective | pretraining steps | FLOPs used | time | held-out metrics at the end | SST-2 dev acc. |",
        "|---:|---|---:|---:|---:|---|---:|",
        f"| 0 | none (untrained encoder, same tokenizer) | 0 | 0 | – | – | {result['untrained']['sst2']:.3f} |",
    ]
    for p in sorted(result["points"], key=lambda p: (p["budget"], p["objective"])):
        shown = held_out(p["final_eval"], ("mlm_accuracy", "rtd_accuracy"))
        lines.append(f"| {p['budget']:.3g} | {labels[p['objective']]} | {p['steps']} | {p['flops']:.3g} | {p['pretrain_seconds']:.0f} s "
                     f"| {shown} | {p['sst2']:.3f} |")
    lines += ["", f"![SST-2 accuracy against pretraining FLOPs]({plots.name}/sample_efficiency.png)", "",
              "(For ELECTRA, \"mlm accuracy\" is the generator's; \"rtd accuracy\" is the discriminator's over all "
              "real tokens, most of which are originals.)", "", *efficiency_notes(result), "", "Commands:", "", "```",
              *result["untrained"]["commands"]]
    for p in result["points"]:
        lines += [p["pretrain_command"], p["finetune_command"]]
    lines.append("```")
    return "\n".join(lines)


# --- masking and sentence tasks ----------------------------------------------------------------


def section_sentence(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    S = budget.steps
    setups = [  # (label, pretraining); the first is section 3's largest MLM run
        ("dynamic masking, no sentence task", lambda: mlm_run(runner, budget, S)),
        ("static masking (one mask per sequence), no sentence task",
         lambda: mlm_run(runner, budget, S, "full_sentences", "static", "--dupe-factor", "1", name=f"static-{S}")),
        ("dynamic masking, NSP", lambda: mlm_run(runner, budget, S, "nsp", name=f"nsp-{S}")),
        ("dynamic masking, SOP", lambda: mlm_run(runner, budget, S, "sop", name=f"sop-{S}")),
    ]
    rows = []
    for label, pretrain in setups:
        run = pretrain()
        name = Path(run["out"]).name
        sst2, rte = finetune_sst2(runner, budget, name, run), finetune_rte(runner, budget, name, run)
        rows.append({"setup": label, "final_eval": run["final_eval"], "pretrain_command": run["command"],
                     "pretrain_seconds": run["seconds"], "sst2": sst2["accuracy"], "rte": rte["accuracy"],
                     "commands": [run["command"], sst2["command"], rte["command"]]})
    return {"rows": rows, "passes": corpus_passes(budget, runs, run["out"]), "run_seconds": runner.seconds}


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


def unigram_entropy(counts: Counter) -> float:
    """The MLM loss (nats) of a model that ignores the context and predicts token frequencies."""
    total = sum(counts.values())
    return -sum(n / total * math.log(n / total) for n in counts.values())


def binary_entropy(p: float) -> float:
    """The RTD loss (nats) of a discriminator that ignores the context: always the base rate p."""
    return -p * math.log(p) - (1 - p) * math.log(1 - p)


def sentence_notes(result: dict) -> list[str]:
    sst2 = [r["sst2"] for r in result["rows"]]
    rte = [r["rte"] for r in result["rows"]]
    sentence = {task: r["final_eval"][f"eval_{task}_accuracy"] for r in result["rows"] for task in ("nsp", "sop")
                if f"eval_{task}_accuracy" in r["final_eval"]}
    rte_noise = 2 * standard_error(0.5, 277)
    near_chance = all(abs(a - RTE_MAJORITY) < rte_noise for a in rte)
    return [
        f"**Reading.** SST-2 dev accuracies span {min(sst2):.3f}–{max(sst2):.3f} and RTE {min(rte):.3f}–{max(rte):.3f}; "
        f"one standard error is {100 * standard_error(0.5, 872):.1f} points on SST-2 and {100 * standard_error(0.5, 277):.1f} on "
        f"RTE (277 pairs; always answering \"entailment\" scores {RTE_MAJORITY:.3f}), so only gaps of several points mean anything.",
        "",
        "**Static vs dynamic masking.** RoBERTa found dynamic masking only marginally better (or equal) even at full "
        "scale, where each static mask is seen 4 times over 40 epochs. Here the static run uses one mask per sequence and "
        f"S steps read the corpus about {result['passes']:.1f} times, "
        + ("so each mask is seen about that often; an effect this small cannot be resolved with one seed."
           if result["passes"] >= 1.5 else "so hardly any mask is seen twice and the two runs cannot differ by design."),
        "",
        "**NSP vs SOP vs none.** ALBERT's argument: NSP's negatives come from another document, so a change of topic "
        "gives them away, while SOP's negatives are the same two segments swapped, which only discourse coherence "
        f"reveals. Held out, the NSP head reached {sentence['nsp']:.3f} and the SOP head {sentence['sop']:.3f} "
        f"({'NSP is the easier task here too' if sentence['nsp'] > sentence['sop'] else 'at this scale SOP was not the harder task'}"
        f"{'; the SOP head is still at chance' if sentence['sop'] < 0.55 else ''}). "
        "RoBERTa found that dropping NSP does not hurt downstream tasks; ALBERT that SOP helps multi-sentence tasks. RTE "
        "is the sentence-pair task that should show it; "
        + (f"here all four stay within two standard errors of its majority-class score {RTE_MAJORITY:.3f}, so it cannot."
           if near_chance else "but with 277 pairs only gaps of more than about 8 points would mean anything."),
    ]


def render_sentence(result: dict, plots: Path) -> str:
    lines = [
        "| pretraining | time | held-out MLM acc. | held-out NSP / SOP acc. | SST-2 dev acc. | RTE dev acc. |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        ev = r["final_eval"]
        lines.append(f"| {r['setup']} | {r['pretrain_seconds']:.0f} s | {held_out(ev, ('mlm_accuracy',))[13:]} | "
                     f"{held_out(ev, ('nsp_accuracy', 'sop_accuracy'))[13:] or '–'} | {r['sst2']:.3f} | {r['rte']:.3f} |")
    lines += ["", *sentence_notes(result), "", "Commands:", "", "```", *(c for r in result["rows"] for c in r["commands"]), "```"]
    return "\n".join(lines)


# --- distillation -------------------------------------------------------------------------------


def section_distill(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    S = budget.steps
    teacher = mlm_run(runner, budget, S)  # section 3's largest MLM run
    student = runner.pretrain(f"distil-{S}", pretrain_args(budget, runs, "distilbert", S, "--teacher", teacher["out"], lr=STUDENT_LR))
    tuned = {"teacher": finetune_sst2(runner, budget, f"mlm-{S}", teacher),
             "student": finetune_sst2(runner, budget, f"distil-{S}", student)}
    untrained = finetune_sst2(runner, budget, "untrained", mlm_run(runner, budget, 1, name="untrained", lr=1e-12))  # as in section 3
    torch.set_num_threads(1)
    models = {role: from_pretrained(REPO / run["out"]) for role, run in (("teacher", teacher), ("student", student))}
    inputs = random_inputs(8, budget.seq_len, models["teacher"].config.vocab_size)
    repeats = max(3, 3 * budget.latency_repeats[1])
    return {
        "parameters": {role: count_parameters(m.config) for role, m in models.items()},
        "layers": {role: m.config.num_layers for role, m in models.items()},
        "latency": interleaved_latency(models, inputs, repeats), "repeats": repeats, "batch": 8, "length": budget.seq_len,
        "sst2": {role: t["accuracy"] for role, t in tuned.items()}, "untrained_sst2": untrained["accuracy"],
        "run_seconds": runner.seconds, "final_eval": {"teacher": teacher["final_eval"], "student": student["final_eval"]},
        "seconds": {"teacher": teacher["seconds"], "student": student["seconds"]},
        "commands": [teacher["command"], student["command"], tuned["teacher"]["command"], tuned["student"]["command"]],
    }


def distill_notes(result: dict) -> list[str]:
    p, t = result["parameters"], result["latency"]
    mlm = {role: result["final_eval"][role].get("eval_mlm_accuracy", 0.0) for role in ("teacher", "student")}
    return [
        f"**Reading.** Size and speed follow from the architecture and hold at any scale: half the layers leave "
        f"{p['student'] / p['teacher']:.0%} of the parameters (the embeddings stay whole; they are a larger share of a "
        f"small model than of BERT-base, hence more than DistilBERT's 60%) and run {t['teacher'] / t['student']:.2f}× "
        "faster. The student starts from every other teacher layer and learns from the teacher's soft targets "
        "(T = 2), MLM and the hidden-state cosine loss"
        + (" for S more steps from the teacher's weights, which is likely why its held-out MLM accuracy ends above "
           "the teacher's." if mlm["student"] > mlm["teacher"] else "."),
        "",
        "**Scale, honestly.** \"97% of BERT\" is a GLUE macro score of a student distilled for days from a "
        "well-trained BERT-base. Here the teacher itself has had minutes of pretraining and is still on the "
        "context-free plateau (section 3), and the same fine-tuning from an untrained encoder scores "
        f"{result['untrained_sst2']:.3f}: whatever the ratio of the two accuracies, it says nothing about distillation.",
    ]


def render_distill(result: dict, plots: Path) -> str:
    p, t, acc, ev = result["parameters"], result["latency"], result["sst2"], result["final_eval"]
    lines = [
        "| | teacher (bert) | student (distilbert) | student / teacher | DistilBERT paper |", "|---|---:|---:|---:|---|",
        f"| layers | {result['layers']['teacher']} | {result['layers']['student']} | | 6 of 12 |",
        f"| parameters | {p['teacher']:,} | {p['student']:,} | {p['student'] / p['teacher']:.1%} | 60% |",
        f"| inference, batch {result['batch']} × {result['length']}, 1 thread (ms, median of {result['repeats']}) | {t['teacher'] * 1e3:.1f} "
        f"| {t['student'] * 1e3:.1f} | {t['teacher'] / t['student']:.2f}× faster | 1.6× faster |",
        f"| pretraining time | {result['seconds']['teacher']:.0f} s | {result['seconds']['student']:.0f} s | | |",
        f"| held-out MLM accuracy | {held_out(ev['teacher'], ('mlm_accuracy',))[13:]} | {held_out(ev['student'], ('mlm_accuracy',))[13:]} | | |",
        f"| SST-2 dev accuracy | {acc['teacher']:.3f} | {acc['student']:.3f} | {acc['student'] / acc['teacher']:.1%} | 97% (of GLUE) |",
        "", *distill_notes(result), "", "Commands:", "", "```", *result["commands"], "```",
    ]
    return "\n".join(lines)


# --- the document ---------------------------------------------------------------------------------

TITLES = {
    "params": "1. Parameters: what ALBERT saves (tight memory)",
    "latency": "2. Latency: DistilBERT against BERT-base (tight latency)",
    "efficiency": "3. Sample efficiency at equal compute: MLM vs ELECTRA's RTD",
    "sentence": "4. Masking and sentence tasks: static vs dynamic; NSP vs SOP vs none",
    "distill": "5. Distillation: student against teacher",
}
COMPUTE = {"params": section_params, "latency": section_latency, "efficiency": section_efficiency,
           "sentence": section_sentence, "distill": section_distill}
RENDER = {"params": render_params, "latency": render_latency, "efficiency": render_efficiency,
          "sentence": render_sentence, "distill": render_distill}


def budget_line(name: str, budget: Budget) -> str:
    """What a section ran with, in one paragraph (from the budget stored with its results)."""
    command = f"Command: `python bench/report.py --only {name}` (`--quick` for a smoke run)."
    if name == "params":
        return f"Budget: none (counted on the meta device, no weights allocated). {command}"
    if name == "latency":
        return (f"Budget: {budget.latency_repeats[0]} / {budget.latency_repeats[1]} timed forward passes per model at "
                f"batch 1 / 8, with {' and '.join(map(str, LATENCY_THREADS))} threads; weights and inputs from seed 0. {command}")
    pretraining = (f"Pretraining: the model `{' '.join(budget.model)}` (ELECTRA: its discriminator), "
                   f"{budget.batch_size} sequences × {budget.seq_len} tokens per step, AdamW with linear warm-up and decay, "
                   f"seed {PRETRAIN_SEED}, on the first {budget.corpus_lines:,} lines of WikiText-2's train split "
                   f"(SentencePiece tokenizer trained on the same lines); S = {budget.steps} steps.")
    finetuning = (f"Fine-tuning (`python -m minibert.finetune`): SST-2 on a seeded subsample of {budget.sst2_train:,} training "
                  f"sentences, {budget.sst2_steps} steps of 32, scored on the full dev set (872)"
                  + (f"; RTE on its full training set, {budget.rte_steps} steps of 32, scored on the full dev set (277)" if name == "sentence" else "")
                  + f"; peak lr {budget.finetune_lr:g}, 10% warm-up, max length {budget.seq_len}, seed {FINETUNE_SEED}.")
    runs = {
        "efficiency": f"Compute budgets: {', '.join(f'{f:g}' for f in budget.budgets)} × the FLOPs of S MLM steps.",
        "sentence": "Each row pretrains for S steps.",
        "distill": f"Teacher: S MLM steps (section 3's largest MLM run); student: S distillation steps at lr {STUDENT_LR:g}.",
    }[name]
    return f"Budget. {pretraining} {runs} {finetuning} {command}"


def write_document(path: Path, plots: Path, results: dict, quick: bool) -> None:
    plots.mkdir(parents=True, exist_ok=True)
    parts = [
        "# Results: the decision guide, measured",
        "",
        "> best raw performance: RoBERTa or ELECTRA; tight memory: ALBERT; tight latency: DistilBERT; "
        "best sample efficiency: ELECTRA",
        "",
        "Every number below comes from `python bench/report.py` on a 2-core CPU machine shared with other jobs; "
        "each section states its budget, the exact commands and the seeds. Pretraining here is minutes on "
        "WikiText-2 with models of ~1M parameters, against days on billions of tokens in the papers: the "
        "size and speed claims (sections 1, 2) are measured at full size, the quality claims (3–5) only at "
        "a toy scale, and the notes say where that scale cannot reproduce the paper. The commands of sections 3–5 "
        "read data files the script writes under runs/report/ first (a prefix of WikiText-2, a seeded SST-2 "
        "subsample); the datasets themselves are in the shared/datasets folder beside the repository."
        + (" **This is a `--quick` smoke run: the budgets are far too small to mean anything.**" if quick else ""),
    ]
    for name in SECTIONS:
        parts += ["", f"## {TITLES[name]}", ""]
        result = results.get(name)
        if result is None:
            parts.append("Not run yet: this section has not been run (`python bench/report.py --only " + name + "`).")
        elif "not_run" in result:
            parts.append(f"Not run yet: {result['not_run']}")
        else:
            parts += [budget_line(name, Budget(**result["budget"])), "", RENDER[name](result, plots)]
            cost = f"; the runs behind it took {result['run_seconds'] / 60:.0f} minutes" if "run_seconds" in result else ""
            parts += ["", f"_Measured {result['when']}{cost}._"]
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny budgets for a smoke run, written under runs/report/quick/")
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only this section (repeatable); others keep their last results")
    args = parser.parse_args(argv)
    budget = QUICK if args.quick else FULL
    runs = Path("runs") / "report" / ("quick" if args.quick else "full")
    document = REPO / runs / "results.md" if args.quick else REPO / "docs" / "results.md"
    plots = document.parent / "results"
    stored = REPO / runs / "sections"
    stored.mkdir(parents=True, exist_ok=True)

    for name in args.only or SECTIONS:
        print(f"[{name}] {TITLES[name]}", flush=True)
        start = time.perf_counter()
        try:
            result = COMPUTE[name](budget, runs)
            result["budget"] = asdict(budget)
            result["when"] = f"{datetime.date.today().isoformat()} on {platform.machine()} ({os.cpu_count()} cores), this step {time.perf_counter() - start:.0f} s"
        except NotRun as reason:
            result = {"not_run": str(reason)}
        print(f"[{name}] {'not run: ' + result['not_run'] if 'not_run' in result else 'done'}", flush=True)
        (stored / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")

    results = {path.stem: json.loads(path.read_text()) for path in stored.glob("*.json")}
    write_document(document, plots, results, args.quick)
    print(f"wrote {document.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
