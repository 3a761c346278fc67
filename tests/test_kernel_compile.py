"""The attention kernels compiled for real GPU targets, on a machine without a GPU.

The rest of the suite runs the kernels in Triton's CPU interpreter, which never compiles them:
a kernel edit that breaks code generation, or a candidate tile that spills registers to local
memory, would show only on a GPU. Here bench/kernel_compile.py, in a process of its own with the
interpreter off and an empty triton cache, compiles every autotuning candidate of every kernel at
the worst-case point (sm_90, bf16, head dim 128, dropout on: the most registers) and each kernel
once for sm_80, down to a cubin with the ptxas bundled in the triton wheel; its cuobjdump reads
back registers, local-memory instructions and tensor-core instructions. The full grid (both
targets, every dtype, head dims 32/64/128, dropout on and off) is `python bench/kernel_compile.py`,
tabled in docs/gpu-compile.md.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minibert.kernels import candidates as tuning

REPO = Path(__file__).resolve().parents[1]

# The verdicts below were reached with this triton. A newer one that changes a verdict (a spill,
# a failed compile, no tensor cores) is a finding to fix in minibert/kernels/candidates.py or the
# kernels, not a reason to skip: the failure message names both versions.
VERDICTS_RECORDED_WITH_TRITON = "3.9.0"
MIN_CANDIDATES_PER_KEY = 3


def every_key():
    for kernel in tuning.KERNELS:
        for block_d in tuning.BLOCK_DS:
            for dropout in (False, True):
                for kind in tuning.OPERANDS:
                    yield kernel, block_d, dropout, kind


@pytest.mark.parametrize("kernel, block_d, dropout, kind", list(every_key()))
def test_every_key_keeps_at_least_three_distinct_candidates(kernel, block_d, dropout, kind):
    found = tuning.candidates(kernel, block_d, dropout, kind)
    assert len(found) >= MIN_CANDIDATES_PER_KEY and len(set(found)) == len(found), found
    for block_m, block_n, warps, stages in found:
        assert all(size & (size - 1) == 0 for size in (block_m, block_n, warps)) and stages >= 1


class FakeConfig:
    """What the autotuner hands its prune hook: kwargs, num_warps, num_stages."""

    def __init__(self, block_m, block_n, warps, stages):
        self.kwargs, self.num_warps, self.num_stages = {"BLOCK_M": block_m, "BLOCK_N": block_n}, warps, stages


class FakeTensor:
    def __init__(self, dtype):
        self.dtype = dtype


@pytest.mark.parametrize("dtype, precision, kind", [("torch.bfloat16", "tf32", "16-bit"), ("torch.float16", "tf32", "16-bit"),
                                                    ("torch.float32", "tf32", "tf32"), ("torch.float32", "ieee", "ieee")])
@pytest.mark.parametrize("head_dim", [16, 48, 64, 128])
@pytest.mark.parametrize("dropout", [False, True])
def test_a_launch_chooses_only_among_its_keys_candidates(dtype, precision, kind, head_dim, dropout):
    block_d = 1 << (head_dim - 1).bit_length()
    for kernel in tuning.KERNELS:
        configs = [FakeConfig(*c) for c in tuning.all_candidates(kernel)]
        kept = tuning.prune(kernel, configs, {"Q": FakeTensor(dtype)}, BLOCK_D=block_d, HAS_DROPOUT=dropout,
                            PRECISION=precision)
        chosen = [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in kept]
        assert sorted(chosen) == sorted(tuning.candidates(kernel, tuning.block_d_bucket(block_d), dropout, kind))


SASS = """
        /*08d0*/                   STL.64 [R1], R36 ;                                 /* 0x0000002401007387 */
        /*0c40*/              @!P0 LDL.LU R18, [R1+0x38] ;                            /* 0x0000381201007387 */
        /*0c50*/                   LDS.128 R4, [R2+0x100] ;                           /* 0x0001000402047984 */
        /*0c60*/                   LDSM.16.M88.4 R8, [R3] ;                           /* 0x000000000308783b */
        /*0c70*/                   LDG.E.128 R12, desc[UR4][R6.64] ;                  /* 0x0000000406067981 */
        /*1740*/                   HMMA.16816.F32.BF16 R84, R84, R36.reuse, RZ ;      /* 0x000000245454723c */
        /*1750*/              @UP0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR8], R24 ; /* 0x0000000818187df0 */
"""


def test_sass_counting_tells_spills_from_shared_and_global_memory():
    from minibert.kernels.offline_compile import sass_counts

    assert sass_counts(SASS) == {"local_loads": 1, "local_stores": 1, "tensor_core": 2, "instructions": 7}
    assert sass_counts(SASS.replace("STL.64", "STS.64").replace("LDL.LU", "LDS.U"))["local_stores"] == 0


def test_occupancy_follows_the_register_and_shared_memory_rules():
    from minibert.kernels.offline_compile import warps_per_sm

    # 255 registers -> 8160 per warp, granted as 8192: 8 warps fit in 64K, two 4-warp blocks
    assert warps_per_sm(90, 255, 0, 4) == 8
    # 128 KB of shared memory per block: one block fits in the H100's 228 KB, one in the A100's 164 KB
    assert warps_per_sm(90, 64, 128 * 1024, 4) == 4 and warps_per_sm(80, 64, 100 * 1024, 4) == 4
    # small blocks stop at 64 warps per SM
    assert warps_per_sm(80, 32, 1024, 8) == 64


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """bench/kernel_compile.py --worst-case's records, compiled from an empty triton cache."""
    pytest.importorskip("triton")
    from minibert.kernels import offline_compile

    missing = offline_compile.tools_missing()
    if missing:
        pytest.skip(f"cannot compile for a GPU here: {missing}")
    folder = tmp_path_factory.mktemp("kernel_compile")
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(folder / "triton-cache")}
    result = subprocess.run([sys.executable, "bench/kernel_compile.py", "--worst-case", "--jobs", "2",
                             "--json", str(folder / "records.json")], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=600)
    assert (folder / "records.json").is_file(), result.stdout + result.stderr
    return json.loads((folder / "records.json").read_text()), result


def describe(report, record):
    return (f"{record['kernel']} sm_{record['arch']} {record['candidate']} compiled with {report['toolchain']} "
            f"(verdicts recorded with triton {VERDICTS_RECORDED_WITH_TRITON}; a changed verdict is a finding to fix)")


@pytest.mark.slow
def test_every_candidate_at_the_worst_case_point_compiles_without_spilling_on_the_tensor_cores(compiled,
                                                                                             record_property):
    from minibert.kernels import offline_compile

    report, result = compiled
    record_property("toolchain", report["toolchain"])  # in the JUnit report beside the verdict
    found = [f"{describe(report, r)}: {'; '.join(offline_compile.problems(r))}" for r in report["records"]
             if offline_compile.problems(r)]
    assert not found, "\n".join(found)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


@pytest.mark.slow
def test_the_worst_case_compiles_every_candidate_for_sm_90_and_each_kernel_once_for_sm_80(compiled):
    report, _ = compiled
    sm90 = [r for r in report["records"] if r["arch"] == 90]
    expected = {kernel: tuning.candidates(kernel, 128, True, "16-bit") for kernel in tuning.KERNELS}
    for kernel, listed in expected.items():
        got = [tuple(r["candidate"]) for r in sm90 if r["kernel"] == kernel]
        assert len(listed) >= MIN_CANDIDATES_PER_KEY and sorted(got) == sorted(listed)
    # every sm_90 candidate, the delta kernel, then each kernel and the delta kernel once on sm_80
    assert len(report["records"]) == sum(map(len, expected.values())) + 1 + len(tuning.KERNELS) + 1
    assert sorted(r["kernel"] for r in report["records"] if r["arch"] == 80) == sorted([*tuning.KERNELS, "delta"])
    assert all((r["dtype"], r["head_dim"]) == ("bf16", 128) for r in report["records"])
    assert all(r["dropout"] for r in report["records"] if r["kernel"] != "delta")
    for record in report["records"]:
        if record["kernel"] != "delta":
            assert record.get("tensor_core", 0) > 0, describe(report, record)
