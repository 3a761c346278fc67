"""bench/gpu_check.py's candidates step: each autotuning candidate's compile facts beside its
measured time, so that a lent GPU's timings sit next to docs/gpu-compile.md's table.

    python bench/gpu_check_candidates.py --out DIR [--dry-run]

Two halves, joined row by row:

* the compile table (bench/kernel_compile.py, in a process of its own with triton's interpreter
  off) for the GPU's own target: registers, shared memory, spills, tensor-core instructions;
* the autotuner's own measurements: flash_attention forward and backward once per timed key at a
  BERT-sized batch, with every kernel's autotuning cache emptied first, so that triton times each
  candidate of the key (median of its do_bench) and picks one; the table marks the pick.

The dry run (CPU, interpreter) compiles one key of the forward kernel and times nothing: the
interpreter has one config and no autotuning. Writes DIR/candidates.json; exits 1 when a
candidate has a compile problem or a timed key fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

# (dtype, head dim, dropout): head dim 64 is nearly every preset's; the step's time limit holds two keys
TIMED_KEYS = [("bf16", 64, False), ("bf16", 64, True)]
HIDDEN, BATCH, MAX_LEN = 768, 32, 512  # BERT-base width; lengths uniform in [MAX_LEN / 2, MAX_LEN]
DRY_RUN_FILTER = ["--kernel=forward", "--dtype=bf16", "--head-dim=32", "--dropout=off"]
AUTOTUNED = ("forward", "backward_dkdv", "backward_dq")


def compile_arch() -> int:
    """The compile table's target: this GPU's, or sm_90 for the dry run (and the nearest tabled
    target below it for other GPUs)."""
    if not torch.cuda.is_available():
        return 90
    major, minor = torch.cuda.get_device_capability()
    return 90 if major * 10 + minor >= 90 else 80


def compile_records(arch: int, dry_run: bool) -> tuple[list[dict], str]:
    """bench/kernel_compile.py's records at `arch` for the timed keys' dtypes and head dims (both
    dropout settings), or for the dry run's one key."""
    if dry_run:
        chosen = [*DRY_RUN_FILTER, "--jobs", "2"]
    else:
        chosen = [f"--{flag}={value}" for flag, values in (("dtype", {d for d, _, _ in TIMED_KEYS}),
                                                             ("head-dim", {h for _, h, _ in TIMED_KEYS}))
                  for value in sorted(values)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.json"
        result = subprocess.run([sys.executable, "bench/kernel_compile.py", f"--arch={arch}", *chosen, f"--json={path}"],
                                cwd=REPO, env={**os.environ, "TRITON_INTERPRET": "0"}, capture_output=True, text=True)
        if not path.is_file():
            raise RuntimeError(f"bench/kernel_compile.py wrote no records: {(result.stderr or result.stdout)[-500:]}")
        report = json.loads(path.read_text())
    return report["records"], report["triton"]


def time_key(dtype_name: str, head_dim: int, dropout: bool) -> dict:
    """{(kernel, candidate): median ms} from the autotuner, and each kernel's pick, for one key."""
    import triton

    from minibert.kernels import _flash_kernels, flash_attention

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(MAX_LEN // 2, MAX_LEN + 1, (BATCH,), generator=generator)
    lengths[0] = MAX_LEN
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32).cuda()
    shape = (int(lengths.sum()), HIDDEN // head_dim, head_dim)  # [tokens, heads, head_dim]
    q, k, v = (torch.randn(shape, dtype=dtype, device="cuda", requires_grad=True) for _ in range(3))
    kernels = {name: getattr(_flash_kernels, f"{name}_kernel") for name in AUTOTUNED}
    for kernel in kernels.values():
        kernel.cache.clear()  # time every candidate of this key again
    out = flash_attention(q, k, v, cu_seqlens, MAX_LEN, dropout_p=0.1 if dropout else 0.0)
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    times, picks = {}, {}
    for name, kernel in kernels.items():
        for config, timing in kernel.configs_timings.items():
            candidate = (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"], config.num_warps, config.num_stages)
            times[name, candidate] = timing[0] if isinstance(timing, (list, tuple)) else timing
        best = kernel.best_config
        picks[name] = (best.kwargs["BLOCK_M"], best.kwargs["BLOCK_N"], best.num_warps, best.num_stages)
    return {"times": times, "picks": picks, "tokens": shape[0], "heads": shape[1], "triton": triton.__version__}


def timing_cells(record: dict, timings: dict) -> list[str]:
    """The measured columns of one compile row: milliseconds and whether the autotuner picked it."""
    key = (record["dtype"], record["head_dim"], record["dropout"])
    measured = timings.get(key)
    if record["kernel"] == "delta" or measured is None:
        return ["-", "-"]
    if "error" in measured:
        return ["FAILED", measured["error"][:80]]
    candidate = tuple(record["candidate"])
    ms = measured["times"].get((record["kernel"], candidate))
    picked = measured["picks"].get(record["kernel"]) == candidate
    return ["-" if ms is None else f"{ms:.3f}", "picked" if picked else ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    from kernel_compile import markdown

    from minibert.kernels import offline_compile

    arch = compile_arch()
    records, triton_version = compile_records(arch, args.dry_run)
    timings = {}
    for dtype_name, head_dim, dropout in ([] if args.dry_run else TIMED_KEYS):
        try:
            timings[dtype_name, head_dim, dropout] = time_key(dtype_name, head_dim, dropout)
        except Exception as error:  # noqa: BLE001 - one failing key must not hide the others
            timings[dtype_name, head_dim, dropout] = {"error": f"{type(error).__name__}: {error}"}
    extras = [timing_cells(record, timings) for record in records]
    where = "dry run: CPU, nothing timed" if args.dry_run else torch.cuda.get_device_name()
    note = (f"\n\nCompiled for sm_{arch} with triton {triton_version} (bench/kernel_compile.py); times on {where}: "
            f"the autotuner's median of triton.testing.do_bench per candidate, flash_attention forward + backward "
            f"on {BATCH} sequences of {MAX_LEN // 2}-{MAX_LEN} tokens, {HIDDEN} wide (heads = {HIDDEN} / head dim).")
    print(markdown(records, ["ms (autotuner)", "autotuner"], extras) + note, flush=True)
    problems = [r for r in records if offline_compile.problems(r)]
    failed = [key for key, measured in timings.items() if "error" in measured]
    args.out.mkdir(parents=True, exist_ok=True)
    serialisable = {" ".join(map(str, key)): {**value, "times": {f"{kernel} {list(candidate)}": ms for (kernel, candidate), ms
                                                                 in value.get("times", {}).items()}}
                    for key, value in timings.items()}
    (args.out / "candidates.json").write_text(json.dumps({"ok": not problems and not failed, "arch": arch,
                                                          "records": records, "timings": serialisable},
                                                         indent=1, default=str) + "\n")
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
