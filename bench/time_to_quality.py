"""Time to quality: held-out MLM accuracy against wall-clock seconds, one line per configuration.

Usage:
    python bench/time_to_quality.py                           # every configuration, seed 0, 150 s each
    python bench/time_to_quality.py --budget 4m --seeds 0 1 2 --only classic default
    python bench/time_to_quality.py --list                    # the configurations and their flags

Each configuration is a plain `python train.py --variant V --budget B` run with some flags
(so the numbers are what a user gets), on one thread per run. `--parallel 2` runs two at a
time, one per core: the runs of a pair then share the machine equally, which is fairer than
running them at different times of a noisy day. The table shows the held-out accuracy each
run had reached after 25%, 50% and 100% of the budget, the steps it took, and the
unigram and neighbour-count baselines of corpus/baselines.py on the same held-out positions.
A configuration beats another only where the gap exceeds the spread across seeds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from minibert import variants  # noqa: E402
from minibert.operations.files import read_json_lines  # noqa: E402

# The ablation (docs/training.md). First the path from the first build's recipe to today's
# default, one change at a time; then single changes on top of the default.
CLASSIC = variants.CLASSIC.split()  # the papers' recipe, as --help names it
NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]
CONFIGURATIONS: dict[str, tuple[str, list[str]]] = {  # name: (what it is, flags)
    "classic": ("post-LN, learned positions, dropout 0.1, 15% masking", CLASSIC),
    "rotary": ("classic + rotary positions", [*CLASSIC, "--position-encoding", "rotary"]),
    "no-dropout": ("classic + rotary + no dropout", [*CLASSIC, "--position-encoding", "rotary", *NO_DROPOUT]),
    "default": ("classic + rotary + no dropout + 40% masking = the default", []),
    "learned": ("default with learned positions", ["--position-encoding", "learned"]),
    "pre-ln": ("default with pre-LN", ["--norm", "pre"]),
    "mask-30": ("default with 30% masking", ["--mask-prob", "0.3"]),
    "mask-50": ("default with 50% masking", ["--mask-prob", "0.5"]),
    "lr-1e-3": ("default with peak lr 1e-3", ["--lr", "1e-3"]),
    "lr-3e-3": ("default with peak lr 3e-3", ["--lr", "3e-3"]),
    "batch-16": ("default with batches of 16", ["--batch-size", "16"]),
    "vocab-4k": ("default with a 4k vocabulary", ["--vocab-size", "4000"]),
    "layers-4": ("default with 4 layers", ["--num-layers", "4"]),
    "width-192": ("default 192 wide (3 heads, FFN 768)", ["--hidden-size", "192", "--num-heads", "3", "--intermediate-size", "768"]),
}


def run(name: str, flags: list[str], variant: str, budget: str, seed: int, root: Path) -> dict:
    out = root / f"{name}-seed{seed}"
    command = [sys.executable, str(REPO / "train.py"), "--variant", variant, "--budget", budget, "--seed", str(seed),
               "--threads", "1", "--eval-every", "100", "--out", str(out), "--overwrite", *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode:
        return {"name": name, "seed": seed, "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    records = read_json_lines(out / "metrics.jsonl")
    evaluated = [r for r in records if "eval_mlm_accuracy" in r]
    total = evaluated[-1]["elapsed_s"]

    def accuracy_at(share: float) -> float:
        reached = [r for r in evaluated if r["elapsed_s"] <= share * total + 1e-9]
        return reached[-1]["eval_mlm_accuracy"]

    return {"name": name, "seed": seed, "steps": evaluated[-1]["step"], "seconds": total,
            "at": [accuracy_at(0.25), accuracy_at(0.5), accuracy_at(1.0)],
            "unigram": records[0].get("baseline_unigram_accuracy"), "neighbours": records[0].get("baseline_neighbour_accuracy")}


def table(results: list[dict]) -> str:
    lines = ["| configuration | what | seeds | steps | accuracy at 25% / 50% / 100% of the budget (median) | spread at 100% "
             "| unigram | neighbours |", "|---|---|---:|---:|---|---:|---:|---:|"]
    for name in dict.fromkeys(r["name"] for r in results):
        rows = [r for r in results if r["name"] == name and "error" not in r]
        if not rows:
            lines.append(f"| {name} | {CONFIGURATIONS[name][0]} | failed: {next(r['error'] for r in results if r['name'] == name)} | | | | | |")
            continue
        medians = [statistics.median(r["at"][i] for r in rows) for i in range(3)]
        finals = [r["at"][2] for r in rows]
        lines.append(f"| {name} | {CONFIGURATIONS[name][0]} | {len(rows)} | {statistics.median(r['steps'] for r in rows):.0f} | "
                     f"{' / '.join(f'{m:.3f}' for m in medians)} | {max(finals) - min(finals):.3f} | "
                     f"{rows[0]['unigram']:.3f} | {rows[0]['neighbours']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="roberta")
    parser.add_argument("--budget", default="150s", help="wall-clock training budget of every run (default 150s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--only", nargs="+", choices=list(CONFIGURATIONS), help="run these configurations only")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time, one thread each (default 2)")
    parser.add_argument("--list", action="store_true", help="print the configurations and exit")
    args = parser.parse_args(argv)
    chosen = {name: flags for name, (_, flags) in CONFIGURATIONS.items() if not args.only or name in args.only}
    if args.list:
        for name, flags in chosen.items():
            print(f"{name:<11} {CONFIGURATIONS[name][0]:<58} {' '.join(flags)}")
        return 0
    with tempfile.TemporaryDirectory() as root, ThreadPoolExecutor(args.parallel) as pool:
        jobs = [(name, flags, args.variant, args.budget, seed, Path(root)) for seed in args.seeds for name, flags in chosen.items()]
        results = list(pool.map(lambda job: run(*job), jobs))
    print(f"Time to quality: python train.py --variant {args.variant} --budget {args.budget}, seeds {args.seeds}, "
          f"{args.parallel} run(s) at a time, 1 thread each\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
