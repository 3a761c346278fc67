"""bench/gpu_check.py's real-run step: `python train.py --variant electra --device cuda`, interrupted
and resumed, as a user on a lent GPU would meet it.

    python bench/gpu_check_train.py --out DIR [--dry-run]

The run trains for a wall-clock --budget (90 s on the GPU). It is stopped with Ctrl-C (SIGINT)
once it has run INTERRUPT_AFTER seconds and written a checkpoint; the same command plus --resume
must then continue from that checkpoint, with finite losses, and finish the rest of the budget
(the time spent is kept in the checkpoint, so the two parts add up to one budget).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from minibert.operations.files import read_json_lines  # noqa: E402

# ELECTRA-small's discriminator (H 256, 4 heads, E 128) at 4 layers, GPU-sized batches.
GPU_RUN = dict(flags=["--hidden-size", "256", "--num-layers", "4", "--num-heads", "4", "--intermediate-size", "1024",
                      "--embedding-size", "128", "--batch-size", "128", "--seq-len", "128", "--device", "cuda",
                      "--save-every", "200", "--eval-every", "500", "--log-every", "50"],
               budget=90, interrupt_after=35.0, resume_limit=100.0)
DRY_RUN = dict(budget=12, interrupt_after=0.0, resume_limit=60.0)  # room for the Ctrl-C on a loaded machine


def dry_run_flags(out: Path) -> list[str]:
    """The training tests' tiny model and corpus (tests/tiny_run.py): seconds on a CPU."""
    from tiny_run import EMBEDDING, TINY_MODEL, write_corpus

    corpus = write_corpus(out / "corpus.txt")
    return [*TINY_MODEL, *EMBEDDING["electra"], "--data", str(corpus), "--batch-size", "8", "--threads", "1",
            "--device", "cpu", "--save-every", "2", "--eval-every", "100", "--eval-batches", "2", "--log-every", "5"]


def interrupted_run(command: list[str], env: dict, checkpoints: Path, after: float, log) -> int:
    """Run `command`; send SIGINT once `after` seconds have passed and a complete checkpoint exists."""
    from minibert.operations.checkpoint import Checkpoints

    started = time.monotonic()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    while process.poll() is None:
        time.sleep(0.2)
        if time.monotonic() - started >= after and Checkpoints(checkpoints).steps():
            process.send_signal(signal.SIGINT)
            return process.wait()
    return process.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    plan = DRY_RUN if args.dry_run else GPU_RUN
    run_dir = (args.out / "train_run").resolve()
    shutil.rmtree(run_dir / "electra", ignore_errors=True)  # an earlier check's checkpoints must not count
    run_dir.mkdir(parents=True, exist_ok=True)
    flags = dry_run_flags(run_dir) if args.dry_run else plan["flags"]
    command = [sys.executable, "train.py", "--variant", "electra", "--budget", f"{plan['budget']}s",
               "--out", str(run_dir / "electra"), "--cache-dir", str(run_dir / "cache"), *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(run_dir / "first.log", "w") as log:
        first = interrupted_run(command, env, run_dir / "electra" / "checkpoints", plan["interrupt_after"], log)
    try:
        second = subprocess.run([*command, "--resume"], cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=plan["resume_limit"])
        resumed_output, second_code = second.stdout + second.stderr, second.returncode
    except subprocess.TimeoutExpired as stopped:  # the checkpoints written so far still tell the story
        resumed_output, second_code = (stopped.stdout or b"").decode() + (stopped.stderr or b"").decode(), "time limit"
    (run_dir / "resumed.log").write_text(resumed_output)

    records = read_json_lines(run_dir / "electra" / "metrics.jsonl")
    trained = [r for r in records if "loss" in r]
    match = re.search(r"resuming electra from .* \(step (\d+)\)", resumed_output)
    resumed_from = int(match.group(1)) if match else None
    last = trained[-1]["step"] if trained else 0
    finite = all(math.isfinite(r["loss"]) for r in trained)
    result = {"command": " ".join(command), "first_exit": first, "resumed_from": resumed_from, "resume_exit": second_code,
              "last_step": last, "budget_s": plan["budget"], "elapsed_s": trained[-1]["elapsed_s"] if trained else 0.0,
              "losses_finite": finite,
              "first_loss": trained[0]["loss"] if trained else None, "last_loss": trained[-1]["loss"] if trained else None,
              "tokens_per_s": [r["tokens_per_s"] for r in trained]}
    checks = {
        "the first run was interrupted (exit 130), not finished": first == 130,
        "the resumed run continued from a checkpoint after step 0": bool(resumed_from),
        "it trained on past that checkpoint": resumed_from is not None and last > resumed_from,
        "every logged loss is finite": finite,
    }
    finished = {f"it spent its {plan['budget']} s budget within {plan['resume_limit']:.0f} s (informational)":
                second_code == 0 and result["elapsed_s"] >= plan["budget"]}
    result["checks"] = {**checks, **finished}
    (args.out / "train_run.json").write_text(json.dumps(result, indent=2) + "\n")
    rates = sorted(result["tokens_per_s"])
    print(f"`{' '.join(command[1:])}` — interrupted after ≥ {plan['interrupt_after']:.0f} s, then rerun with `--resume`.\n")
    print("| check | result |\n|---|---|")
    for check, ok in result["checks"].items():
        print(f"| {check} | {'yes' if ok else 'NO'} |")
    print(f"\nresumed from step {resumed_from}, last logged step {last} after {result['elapsed_s']:.0f} of {plan['budget']} s; loss "
          f"{result['first_loss']} → {result['last_loss']}; median training tokens/s "
          f"{rates[len(rates) // 2] if rates else 'n/a'}. Logs: train_run/first.log, train_run/resumed.log.")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
