"""Measure each variant's default run over several seeds and store its curves in the package.

    python bench/default_curves.py                       # all five variants, seeds 0 1 2, two at a time
    python bench/default_curves.py --variants albert --seeds 0 1 2 3 --jobs 1

Each run is `python train.py --variant V --seed S` on the embedded corpus (distilbert with the
seed-0 bert run as its teacher, as the README's command does), into runs/default-curves/V-seed-S
(a finished run is reused). distilbert's entry also keeps its teacher's last held-out metrics:
a bert band measured again makes another teacher, and distilbert's band must follow it. The held-out metrics of every evaluation are collected into
minibert/runs/default_curves.json: per variant, per metric and evaluation step, the seeds'
values, their mean and a tolerance of SPREAD sample standard deviations (at least FLOOR), with
the settings' fingerprint, the torch version and the threads they were measured with. A run
on the embedded corpus is then held against that band (runs/report.py, curves.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from minibert.runs.report import DEFAULT_CURVES, fingerprint  # noqa: E402
from minibert.variants import VARIANTS, with_layout  # noqa: E402

SPREAD = 3.0  # the band: mean ± this many sample standard deviations of the seeds ...
FLOOR = 0.005  # ... and never narrower than this on either side (where the seeds happen to agree)
THREADS = 1  # what the default runs use (runs/run.py default_threads: narrow models run on one thread)


def out_dir(runs: Path, variant: str, seed: int) -> Path:
    return runs / f"{variant}-seed-{seed}"


def finished(out: Path, steps: int) -> bool:
    log = out / "metrics.jsonl"
    if not log.is_file() or not (out / "model.safetensors").is_file():
        return False
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return bool(records) and records[-1].get("step") == steps


def run(runs: Path, variant: str, seed: int) -> Path:
    out = out_dir(runs, variant, seed)
    steps = VARIANTS[variant].default_settings().steps
    if finished(out, steps):
        return out
    teacher = ["--teacher", str(out_dir(runs, "bert", 0))] if variant == "distilbert" else []
    command = [sys.executable, str(REPO / "train.py"), "--variant", variant, "--seed", str(seed), "--out", str(out),
               "--overwrite", *teacher]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    print(f"  {variant} seed {seed}: done", flush=True)
    return out


def evaluations(out: Path) -> list[dict]:
    """A run's held-out evaluations in step order: the records of its metrics.jsonl with eval_ metrics."""
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in log if any(name.startswith("eval_") for name in r)]


def held_out(out: Path) -> dict:
    """A run's last held-out metrics: what identifies distilbert's teacher in the stored curves."""
    last = evaluations(out)[-1]
    return {"step": last["step"], **{name: last[name] for name in sorted(last) if name.startswith("eval_")}}


def curves(outs: list[Path]) -> dict:
    """{metric: {steps, runs, mean, tolerance}} over the runs' held-out evaluations."""
    runs = [evaluations(out) for out in outs]
    steps = [r["step"] for r in runs[0]]
    if any([r["step"] for r in e] != steps for e in runs):
        raise SystemExit("the seeds' runs evaluated at different steps; rerun them with the same flags")
    metrics = sorted(name for name in runs[0][0] if name.startswith("eval_"))
    stored = {}
    for name in metrics:
        values = [[r[name] for r in e] for e in runs]  # [seed][evaluation]
        at = list(zip(*values))  # [evaluation][seed]
        stored[name] = {
            "steps": steps, "runs": values,
            "mean": [round(statistics.fmean(v), 5) for v in at],
            "tolerance": [round(max(FLOOR, SPREAD * statistics.stdev(v)) if len(v) > 1 else FLOOR, 5) for v in at],
        }
    return stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs side by side (default 2: one per core)")
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "default-curves")
    args = parser.parse_args()
    if len(args.seeds) < 2:
        parser.error("a band needs at least two seeds")
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: run(args.runs, *job), [(v, s) for v in args.variants if v != "distilbert" for s in args.seeds]))
        if "distilbert" in args.variants:
            run(args.runs, "bert", 0)  # its teacher (already there when bert ran above)
            list(pool.map(lambda seed: run(args.runs, "distilbert", seed), args.seeds))
    stored = json.loads(DEFAULT_CURVES.read_text()) if DEFAULT_CURVES.is_file() else {"variants": {}}
    for name in args.variants:
        variant = VARIANTS[name]
        settings = with_layout(variant, variant.default_settings()).to_dict()
        stored["variants"][name] = {
            "fingerprint": fingerprint(settings, variant.model, torch.__version__, THREADS),
            "seeds": args.seeds,
            "measured": {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "threads": THREADS,
                         "command": f"python bench/default_curves.py --variants {name} --seeds {' '.join(map(str, args.seeds))}"},
            "metrics": curves([out_dir(args.runs, name, seed) for seed in args.seeds]),
        }
        if name == "distilbert":  # its band holds only for the teacher it distilled: the bert band's seed-0 run
            stored["variants"][name]["teacher"] = held_out(out_dir(args.runs, "bert", 0))
    DEFAULT_CURVES.write_text(json.dumps(stored, indent=1) + "\n")
    print(f"wrote {DEFAULT_CURVES.relative_to(REPO)}")


if __name__ == "__main__":
    main()
