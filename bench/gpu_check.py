"""Everything worth knowing from one short session on a lent GPU, in one command.

    python bench/gpu_check.py --out gpu-check            # under 10 minutes on an H100/H200-class GPU
    python bench/gpu_check.py --out /tmp/x --dry-run     # tiny shapes on the CPU, about a minute
    python bench/gpu_check.py --out gpu-check --only kernel,attention

Steps, each in its own process with its own time limit, so that a crash or a hang in one is
reported (FAILED, with the last lines of its output) and the others still run:

    environment   GPU, torch, triton, CUDA versions, bf16 support, the card's dense bf16 peak
    kernel        the Triton kernel compiled on CUDA vs the float64 reference, forward and dq/dk/dv
    candidates    each autotuning candidate's measured time beside its compile facts (docs/gpu-compile.md's table)
    attention     bench/attention.py's table: ours vs SDPA flash (unpadded) vs SDPA with a mask
    end_to_end    training tokens/s and MFU at BERT-base shape: minibert triton / sdpa vs transformers
    train_run     python train.py --variant electra --device cuda, interrupted and --resume'd
    levers        --compile and --checkpoint-activations at BERT-base shape (512 tokens), and the
                  training loop's synchronisations under torch.cuda.set_sync_debug_mode

OUT receives summary.md (what is printed), STEP.md (each step's markdown), STEP.log (its whole
output) and STEP.json (its raw numbers). The dry run exists so that this script cannot rot
between GPU sessions: tests/test_gpu_check.py runs it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TAIL_LINES = 15


@dataclass
class Step:
    name: str
    limit_s: int  # on the GPU; the dry run gives every step DRY_RUN_LIMIT_S
    command: list[str]


STEPS = [
    Step("environment", 30, ["bench/gpu_check_steps.py", "environment"]),
    Step("kernel", 80, ["bench/gpu_check_steps.py", "kernel"]),
    Step("candidates", 100, ["bench/gpu_check_candidates.py"]),
    Step("attention", 70, ["bench/attention.py"]),
    Step("end_to_end", 80, ["bench/gpu_check_steps.py", "end_to_end"]),
    Step("train_run", 140, ["bench/gpu_check_train.py"]),
    Step("levers", 80, ["bench/gpu_check_steps.py", "levers"]),
]  # 580 s if every step ran to its limit: the whole check fits one 10-minute device call
ONE_CALL_S = 580
DRY_RUN_LIMIT_S = 120
WRITES_OWN_JSON = ("environment", "kernel", "candidates", "end_to_end", "train_run", "levers")  # they take --out


def run_step(step: Step, out: Path, dry_run: bool) -> dict:
    """Run one step in a new process group (killed whole at its time limit); keep its output."""
    command = [sys.executable, *step.command]
    if step.name in WRITES_OWN_JSON:
        command += ["--out", str(out)]
    if dry_run:
        command.append("--dry-run")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1" if dry_run else "0"}
    if dry_run:
        env["OMP_NUM_THREADS"] = "1"
    limit = DRY_RUN_LIMIT_S if dry_run else step.limit_s
    started = time.monotonic()
    with open(out / f"{step.name}.log", "w+") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
                                   start_new_session=True)
        try:
            stdout, _ = process.communicate(timeout=limit)
            status = "passed" if process.returncode == 0 else f"FAILED (exit {process.returncode})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # train.py children included
            stdout, _ = process.communicate()
            status = f"FAILED (time limit {limit} s)"
        log.write(stdout)
        log.seek(0)
        tail = log.read().splitlines()[-TAIL_LINES:]
    seconds = time.monotonic() - started
    (out / f"{step.name}.md").write_text(stdout)
    return {"name": step.name, "status": status, "seconds": seconds, "markdown": stdout.strip(), "tail": tail}


def section(result: dict) -> str:
    text = f"## {result['name']} — {result['status']} ({result['seconds']:.0f} s)\n\n{result['markdown']}\n"
    if not result["status"].startswith("passed"):
        text += "\nLast lines of its output (stderr, then stdout):\n\n```\n" + "\n".join(result["tail"]) + "\n```\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder for summary.md and each step's raw output")
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (Triton interpreter): checks the script, not the GPU")
    parser.add_argument("--only", help=f"comma-separated steps to run (default all: {', '.join(s.name for s in STEPS)})")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else [s.name for s in STEPS]
    unknown = sorted(set(chosen) - {s.name for s in STEPS})
    if unknown:
        parser.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(s.name for s in STEPS)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    title = f"# GPU check, {datetime.datetime.now():%Y-%m-%d %H:%M}{' (DRY RUN: CPU, tiny shapes)' if args.dry_run else ''}\n"
    print(title, flush=True)
    results, started = [], time.monotonic()
    for step in (s for s in STEPS if s.name in chosen):
        results.append(run_step(step, out, args.dry_run))
        print(section(results[-1]), flush=True)
    rows = "".join(f"| {r['name']} | {r['status']} | {r['seconds']:.0f} |\n" for r in results)
    overview = f"## Overview ({time.monotonic() - started:.0f} s in all)\n\n| step | status | seconds |\n|---|---|---|\n{rows}"
    print(overview, flush=True)
    summary = "\n".join([title, *map(section, results), overview])
    (out / "summary.md").write_text(summary)
    print(f"written: {out / 'summary.md'} and each step's .md/.log/.json beside it")
    return 0 if all(r["status"] == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
