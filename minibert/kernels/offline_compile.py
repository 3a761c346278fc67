"""Compile an attention kernel for an NVIDIA GPU on a machine without one, and read the result.

Triton's CPU interpreter runs the kernels' Python but never compiles them, so a kernel edit that
breaks code generation, or a candidate tile that no longer fits in registers, would only show
on the day a GPU is lent. `triton.compile` on an `ASTSource` with an explicit `GPUTarget` runs
the real pipeline (TTIR, TTGIR, LLVM, PTX) down to a cubin with the ptxas bundled in the triton
wheel, and the cuobjdump beside it reads back what the hardware would run:

* registers and stack per thread (`--dump-resource-usage`);
* local-memory loads and stores in the SASS (LDL/STL): registers spilled to memory;
* tensor-core instructions in the SASS: HMMA (sm_80 mma.sync) and HGMMA (sm_90 warpgroup MMA).

Triton must be in compiling mode: this module refuses to run under `TRITON_INTERPRET=1`, where
the kernels are defined as interpreted functions. bench/kernel_compile.py and
tests/test_kernel_compile.py start it in processes of their own for that reason.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .flash_attention import _DELTA_BLOCK

# Per-SM resources of the two targets (A100 = sm_80, H100 = sm_90). Shared memory: what one
# block may use at most (the launch limit), what one SM has, and what the system keeps per block.
ARCHS = {80: "A100 (sm_80)", 90: "H100 (sm_90)"}
SHARED_PER_BLOCK = {80: 163 * 1024, 90: 227 * 1024}
SHARED_PER_SM = {80: 164 * 1024, 90: 228 * 1024}
SHARED_RESERVED_PER_BLOCK = 1024
REGISTERS_PER_SM = 64 * 1024
REGISTER_ALLOCATION_UNIT = 256  # registers are granted per warp in multiples of this
MAX_WARPS_PER_SM = 64
MAX_BLOCKS_PER_SM = 32

DTYPES = ("bf16", "fp16", "fp32")
TENSOR_CORE_OPCODES = ("HMMA", "HGMMA")
# delta_kernel's one config as a candidate (BLOCK_T, unused, warps, stages): flash_attention
# launches it with triton's default warps and stages.
DELTA_CANDIDATE = (_DELTA_BLOCK, 0, 4, 3)

# The kernels' runtime arguments by type, as flash_attention passes them (stride_* are int32).
_INPUT_TENSORS = {"Q", "K", "V", "O", "DO", "DQ", "DK", "DV"}  # pointers to the input dtype
_FP32_BUFFERS = {"LSE", "DELTA"}
_FLOAT_SCALARS = {"qk_scale", "sm_scale", "dropout_p"}
_INT_SCALARS = {"seed", "total_tokens", "max_seqlen", "seqlen_bucket"}  # any value: no alignment fact


@dataclass(frozen=True)
class Point:
    """One compile: a kernel's candidate at one target, dtype, head dim and dropout setting.
    precision is tl.dot's input precision, "tf32" or "ieee" for fp32 inputs ("tf32", unused,
    for the 16-bit ones); candidate is (BLOCK_M, BLOCK_N, num_warps, num_stages), or for the
    delta kernel (BLOCK_T, 0, num_warps, num_stages)."""
    kernel: str
    arch: int
    dtype: str
    precision: str
    head_dim: int
    dropout: bool
    candidate: tuple[int, int, int, int]

    @classmethod
    def of(cls, record: dict) -> "Point":
        """The point a `compile_point` record (or its JSON) was compiled at."""
        return cls(record["kernel"], record["arch"], record["dtype"], record["precision"], record["head_dim"],
                   record["dropout"], tuple(record["candidate"]))

    @property
    def tensor_cores_expected(self) -> bool:
        """tl.dot runs on tensor cores for 16-bit inputs and tf32; exact fp32 uses the FMA units,
        and the delta kernel has no matrix product."""
        return self.kernel != "delta" and (self.dtype != "fp32" or self.precision == "tf32")


def tools_missing() -> str | None:
    """Why this machine cannot compile for a GPU (no triton, or its bundled ptxas/cuobjdump
    missing), or None."""
    try:
        from triton import knobs
    except ImportError:
        return "triton is not installed (pip install triton)"
    for tool in ("ptxas", "ptxas_blackwell", "cuobjdump"):  # ptxas_blackwell compiles sm_90
        try:
            getattr(knobs.nvidia, tool).path
        except RuntimeError:
            return f"triton's bundled {tool} is missing (reinstall the triton wheel)"
    return None


def toolchain() -> str:
    """The versions that decide the verdicts: triton, and the ptxas it runs for each target
    (triton 3.9 compiles sm_90 with its newer "ptxas-blackwell")."""
    import triton
    from triton import knobs

    return (f"triton {triton.__version__}, ptxas {knobs.nvidia.ptxas.version} (sm_80) and "
            f"{knobs.nvidia.ptxas_blackwell.version} (sm_90)")


def _kernels():
    """The module of `@triton.jit` kernels, compiled (not interpreted)."""
    import triton

    if triton.knobs.runtime.interpret:
        raise RuntimeError("offline compile needs TRITON_INTERPRET unset or 0 (it is 1 in this process): run it "
                           "in a process of its own")
    from . import _flash_kernels

    return _flash_kernels


def _jit_function(point: Point):
    kernels = _kernels()
    kernel = getattr(kernels, f"{point.kernel}_kernel")
    return kernel.fn if hasattr(kernel, "configs") else kernel  # an autotuner wraps the JIT function


def _signature_and_constants(point: Point, jit_fn) -> tuple[dict, dict, dict]:
    """Argument types, compile-time constants and alignment facts as a launch by flash_attention
    gives them: tensors from torch's allocator are 16-byte aligned, and with a head dim that is a
    multiple of 16 (all of the table's) so is every stride, so triton specialises both as
    divisible by 16."""
    block_d = 1 << (point.head_dim - 1).bit_length()
    block_m, block_n, _, _ = point.candidate
    constants = {"HEAD_DIM": point.head_dim, "BLOCK_D": block_d, "HAS_DROPOUT": point.dropout,
                 "PRECISION": point.precision, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_T": block_m}
    signature, constexprs, attrs = {}, {}, {}
    for index, param in enumerate(jit_fn.params):
        name = param.name
        if param.is_constexpr:
            signature[name], constexprs[name] = "constexpr", constants[name]
            continue
        if name in _INPUT_TENSORS:
            signature[name] = f"*{point.dtype}"
        elif name in _FP32_BUFFERS:
            signature[name] = "*fp32"
        elif name == "cu_seqlens":
            signature[name] = "*i32"
        elif name in _FLOAT_SCALARS:
            signature[name] = "fp32"
        elif name in _INT_SCALARS or name.startswith("stride_"):
            signature[name] = "i32"
        else:
            raise ValueError(f"{point.kernel}_kernel has an argument {name!r} whose type offline_compile.py does "
                             f"not know: add it to one of the argument sets at the top of that file")
        if signature[name].startswith("*") or name.startswith("stride_"):
            attrs[(index,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


def _cuobjdump(*args: str) -> str:
    from triton import knobs

    return subprocess.run([knobs.nvidia.cuobjdump.path, *args], check=True, capture_output=True, text=True).stdout


def sass_counts(sass: str) -> dict:
    """Local-memory loads and stores (LDL, STL: spills), tensor-core instructions (HMMA, HGMMA) and
    all instructions in cuobjdump's SASS listing. Only opcodes count, predicates dropped
    ('@!P0 LDL.LU R2, [R1]' is an LDL); shared-memory LDS/LDSM and global LDG are not local."""
    pattern = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
    opcodes = [match.group(1) for match in pattern.finditer(sass)]
    return {"local_loads": opcodes.count("LDL"), "local_stores": opcodes.count("STL"),
            "tensor_core": sum(op in TENSOR_CORE_OPCODES for op in opcodes), "instructions": len(opcodes)}


def read_cubin(cubin: bytes) -> dict:
    """Registers and stack per thread, and `sass_counts`, of a compiled kernel."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = _cuobjdump("--dump-resource-usage", str(path))
        sass = _cuobjdump("-sass", str(path))
    registers = re.search(r"REG:(\d+)", usage)
    stack = re.search(r"STACK:(\d+)", usage)
    if registers is None or stack is None:
        raise RuntimeError(f"cuobjdump's resource usage has no REG/STACK: {usage.strip()[:200]}")
    return {"registers": int(registers.group(1)), "stack": int(stack.group(1)), **sass_counts(sass)}


def warps_per_sm(arch: int, registers: int, shared: int, num_warps: int) -> int:
    """Resident warps per SM that registers and shared memory allow (the occupancy calculator's
    rules: registers granted per warp in units of 256, 1 KB of shared memory reserved per block)."""
    per_warp = -(-registers * 32 // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    by_registers = REGISTERS_PER_SM // (per_warp * num_warps) if per_warp else MAX_BLOCKS_PER_SM
    by_shared = SHARED_PER_SM[arch] // (shared + SHARED_RESERVED_PER_BLOCK)
    blocks = min(by_registers, by_shared, MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM // num_warps)
    return blocks * num_warps


def compile_point(point: Point) -> dict:
    """Compile one point and read it back. Returns the point and, when it compiled, shared memory
    (bytes) and `read_cubin`'s counts, `fits` (shared memory within the launch limit) and
    `warps_per_sm`; when it did not, `error` with the compiler's last line."""
    import triton
    from triton.backends.compiler import GPUTarget

    record = {**asdict(point), "candidate": list(point.candidate)}
    jit_fn = _jit_function(point)
    signature, constexprs, attrs = _signature_and_constants(point, jit_fn)
    _, _, num_warps, num_stages = point.candidate
    started = time.monotonic()
    try:
        compiled = triton.compile(triton.compiler.ASTSource(jit_fn, signature, constexprs, attrs),
                                  target=GPUTarget("cuda", point.arch, 32),
                                  options=dict(num_warps=num_warps, num_stages=num_stages))
    except Exception as error:  # noqa: BLE001 - a failed compile is a result to report, not a crash
        lines = [line for line in str(error).strip().splitlines() if line.strip()] or [type(error).__name__]
        return {**record, "error": f"{type(error).__name__}: {lines[-1][:300]}",
                "seconds": time.monotonic() - started}
    shared = compiled.metadata.shared
    counts = read_cubin(compiled.asm["cubin"])
    return {**record, **counts, "shared": shared, "fits": shared <= SHARED_PER_BLOCK[point.arch],
            "warps_per_sm": warps_per_sm(point.arch, counts["registers"], shared, num_warps),
            "seconds": time.monotonic() - started}


def problems(record: dict) -> list[str]:
    """What is wrong with a compiled point, in words; empty when it compiles, fits in shared
    memory, does not spill and uses the tensor cores where it should."""
    if "error" in record:
        return [f"does not compile: {record['error']}"]
    found = []
    if record["local_loads"] or record["local_stores"]:
        found.append(f"spills: {record['local_loads']} local loads and {record['local_stores']} local stores "
                     f"(LDL/STL) at {record['registers']} registers")
    if not record["fits"]:
        found.append(f"needs {record['shared']} B of shared memory, over sm_{record['arch']}'s "
                     f"{SHARED_PER_BLOCK[record['arch']]} B")
    if Point.of(record).tensor_cores_expected and not record["tensor_core"]:
        found.append("no tensor-core instruction (HMMA/HGMMA) in its SASS")
    return found
