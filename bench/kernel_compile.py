"""Every autotuning candidate of the attention kernels compiled for A100 and H100, on any machine.

    python bench/kernel_compile.py                        # the whole table (sm_80 and sm_90, every dtype,
                                                          # head dims 32/64/128, dropout on and off)
    python bench/kernel_compile.py --worst-case           # what tests/test_kernel_compile.py compiles
    python bench/kernel_compile.py --arch 90 --dtype bf16 --head-dim 64 --json out.json
    python bench/kernel_compile.py --page docs/gpu-compile.md   # the whole table as its docs page

No GPU is needed: minibert/kernels/offline_compile.py runs triton's real code generation for an
explicit GPU target with the ptxas and cuobjdump bundled in the triton wheel. Each row is one
candidate (tile BLOCK_M x BLOCK_N, warps, stages) of one kernel at one key: registers per
thread, shared memory against the target's launch limit, local-memory (spill) instructions,
tensor-core instructions and the warps per SM that registers and shared memory allow. The
dtype column: bf16, fp16, tf32 (fp32 inputs, tf32 products) and fp32 (exact fp32 products).
Exits 1 when any candidate fails to compile, spills, does not fit or misses the tensor cores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing
os.environ["TRITON_INTERPRET"] = "0"  # compile, never interpret (read when the kernels are defined)

from minibert.kernels import candidates as tuning  # noqa: E402
from minibert.kernels import offline_compile  # noqa: E402
from minibert.kernels.offline_compile import Point  # noqa: E402

DTYPES = {"bf16": ("bf16", "tf32"), "fp16": ("fp16", "tf32"), "tf32": ("fp32", "tf32"), "fp32": ("fp32", "ieee")}
HEAD_DIMS = (32, 64, 128)
ARCHS = tuple(offline_compile.ARCHS)
WORST_CASE = dict(arch=90, dtype="bf16", head_dim=128, dropout=True)  # the test's point: most registers
KERNELS = (*tuning.KERNELS, "delta")
DELTA = offline_compile.DELTA_CANDIDATE


def dtype_label(point: Point) -> str:
    return "tf32" if point.dtype == "fp32" and point.precision == "tf32" else point.dtype


def points(kernels=KERNELS, archs=ARCHS, dtypes=tuple(DTYPES), head_dims=HEAD_DIMS, dropouts=(False, True)) -> list[Point]:
    """Every candidate of every chosen kernel at every chosen key. The delta kernel (one config,
    no matrix product, no dropout) appears once per target, input dtype and head dim."""
    chosen = []
    for kernel in kernels:
        for arch in archs:
            for label in dtypes:
                dtype, precision = DTYPES[label]
                for head_dim in head_dims:
                    if kernel == "delta":
                        if label != "tf32":  # delta reads fp32 the same way whatever the product mode
                            chosen.append(Point("delta", arch, dtype, precision, head_dim, False, DELTA))
                        continue
                    kind = tuning.operand(dtype, precision)
                    for dropout in dropouts:
                        for candidate in tuning.candidates(kernel, tuning.block_d_bucket(head_dim), dropout, kind):
                            chosen.append(Point(kernel, arch, dtype, precision, head_dim, dropout, candidate))
    return chosen


def heaviest(candidates: list[tuple[int, int, int, int]], head_dim: int) -> tuple[int, int, int, int]:
    """The candidate whose tiles hold the most numbers per warp: the likeliest to run out of registers."""
    return max(candidates, key=lambda c: (c[0] * c[1] + (c[0] + c[1]) * head_dim) / c[2])


def worst_case_points() -> list[Point]:
    """Every candidate of every kernel at the worst-case point on sm_90, and each kernel's heaviest
    candidate at the same point on sm_80: what tests/test_kernel_compile.py compiles."""
    dtype, precision = DTYPES[WORST_CASE["dtype"]]
    head_dim, dropout = WORST_CASE["head_dim"], WORST_CASE["dropout"]
    chosen = points(archs=(WORST_CASE["arch"],), dtypes=(WORST_CASE["dtype"],), head_dims=(head_dim,), dropouts=(dropout,))
    for kernel in tuning.KERNELS:
        options = tuning.candidates(kernel, tuning.block_d_bucket(head_dim), dropout, tuning.operand(dtype, precision))
        chosen.append(Point(kernel, 80, dtype, precision, head_dim, dropout, heaviest(options, head_dim)))
    chosen.append(Point("delta", 80, dtype, precision, head_dim, False, DELTA))
    return chosen


def compile_all(chosen: list[Point], jobs: int):
    """Compile every point, `jobs` processes at a time (each compile is single-threaded); yields
    the records in `chosen`'s order as they are ready."""
    if jobs <= 1:
        yield from map(offline_compile.compile_point, chosen)
        return
    with ProcessPoolExecutor(jobs) as pool:
        yield from pool.map(offline_compile.compile_point, chosen, chunksize=1)


def row(record: dict, extra: list[str] = ()) -> list[str]:
    """One table row: the point, then what the compiler made of it (or its error)."""
    point = Point.of(record)
    m, n, warps, stages = point.candidate
    tile = f"{m}" if point.kernel == "delta" else f"{m}x{n}"
    head = [point.kernel, f"sm_{point.arch}", dtype_label(point), str(point.head_dim),
            "on" if point.dropout else "off", tile, str(warps), str(stages)]
    if "error" in record:
        return head + ["-", "-", "-", "-", "-", *extra, "does not compile"]
    limit = offline_compile.SHARED_PER_BLOCK[point.arch] // 1024
    local = f"{record['local_loads']} / {record['local_stores']}"
    tensor_cores = str(record["tensor_core"])
    if not point.tensor_cores_expected and not record["tensor_core"]:
        tensor_cores = "- (no matmul)" if point.kernel == "delta" else "- (FMA)"
    verdict = "; ".join(offline_compile.problems(record)) or "ok"
    return head + [str(record["registers"]), f"{record['shared'] / 1024:.1f} / {limit}", local, tensor_cores,
                   str(record["warps_per_sm"]), *extra, verdict]


HEADER = ["kernel", "target", "dtype", "head dim", "dropout", "tile", "warps", "stages", "registers",
          "shared KB / limit", "local ld / st", "tensor-core instr.", "warps / SM"]


def table_head(extra_header: list[str] = ()) -> str:
    columns = [*HEADER, *extra_header, "verdict"]
    return "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)


def table_row(record: dict, extra: list[str] = ()) -> str:
    return "| " + " | ".join(row(record, extra)) + " |"


def markdown(records: list[dict], extra_header: list[str] = (), extras: list[list[str]] | None = None) -> str:
    rows = [table_row(record, extras[index] if extras else ()) for index, record in enumerate(records)]
    return "\n".join([table_head(extra_header), *rows])


def summary(records: list[dict], seconds: float) -> str:
    bad = [r for r in records if offline_compile.problems(r)]
    spilling = sum(1 for r in records if "error" not in r and (r["local_loads"] or r["local_stores"]))
    failed = sum(1 for r in records if "error" in r)
    return (f"{len(records)} compiles in {seconds:.0f} s on {datetime.date.today():%Y-%m-%d} with "
            f"{offline_compile.toolchain()}: {len(records) - len(bad)} ok, {spilling} spill, "
            f"{failed} do not compile, {len(bad)} with any problem.")


def page(records: list[dict], seconds: float, argv) -> str:
    """The docs page: generated, by which command (its first line), the summary, then the table."""
    command = " ".join(["python bench/kernel_compile.py", *(sys.argv[1:] if argv is None else argv)])
    return (f"_Generated by `{command}`: do not edit by hand; [gpu.md](gpu.md) explains the columns._\n\n"
            "# Every attention-kernel candidate compiled for the A100 and the H100\n\n"
            f"{summary(records, seconds)}\n\n{markdown(records)}\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worst-case", action="store_true", help="only the test's points (sm_90 bf16 head dim 128 "
                        "dropout on, every candidate; each kernel once on sm_80)")
    parser.add_argument("--kernel", choices=KERNELS, action="append", help="only this kernel (repeatable)")
    parser.add_argument("--arch", type=int, choices=ARCHS, action="append", help="only this target (repeatable)")
    parser.add_argument("--dtype", choices=DTYPES, action="append", help="only this dtype (repeatable)")
    parser.add_argument("--head-dim", type=int, choices=HEAD_DIMS, action="append", help="only this head dim (repeatable)")
    parser.add_argument("--dropout", choices=("on", "off"), help="only dropout on or off")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compiles at a time (default: one per CPU)")
    parser.add_argument("--json", type=Path, help="also write every record (raw numbers) to this file")
    parser.add_argument("--page", type=Path, help="also write the table as a docs page (docs/gpu-compile.md): "
                        "a first line saying it is generated, by which command, then the summary, then the table")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.page and not args.page.parent.is_dir():
        parser.error(f"--page {args.page}: its folder does not exist")
    if args.json and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: its folder does not exist; create it or write the file elsewhere")
    filters = (args.kernel, args.arch, args.dtype, args.head_dim, args.dropout)
    if args.worst_case and any(filters):
        parser.error("--worst-case chooses its own points; drop --kernel/--arch/--dtype/--head-dim/--dropout")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    missing = offline_compile.tools_missing()
    if missing:
        sys.exit(f"bench/kernel_compile.py cannot compile: {missing}")
    if args.worst_case:
        chosen = worst_case_points()
    else:
        dropouts = {"on": (True,), "off": (False,), None: (False, True)}[args.dropout]
        chosen = points(args.kernel or KERNELS, args.arch or ARCHS, args.dtype or tuple(DTYPES),
                        args.head_dim or HEAD_DIMS, dropouts)
    started = time.monotonic()
    print(table_head(), flush=True)
    records = []
    for record in compile_all(chosen, args.jobs):  # printed as they come: the whole grid takes a while
        records.append(record)
        print(table_row(record), flush=True)
    seconds = time.monotonic() - started
    print("\n" + summary(records, seconds), flush=True)
    if args.page:
        args.page.write_text(page(records, seconds, argv), encoding="utf-8")
    if args.json:
        import triton

        report = {"triton": triton.__version__, "toolchain": offline_compile.toolchain(), "seconds": seconds,
                  "records": records}
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if any(offline_compile.problems(r) for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
