"""The GPU autotuning candidates of the attention kernels, as plain data.

Kept apart from `_flash_kernels.py` (and free of any triton import) because that module's
autotuner is built for whichever mode triton is in when it is imported: under the CPU
interpreter (`TRITON_INTERPRET=1`, the test suite) it holds one small interpreter config, so the
GPU candidates can only be read here. The ahead-of-time compile check (tests/test_kernel_compile.py,
bench/kernel_compile.py) compiles exactly these for sm_80 and sm_90.

A candidate is (BLOCK_M, BLOCK_N, num_warps, num_stages). Which ones a launch may choose from
depends on its key: the kernel, the padded head dimension BLOCK_D, whether dropout is on and the
operand kind (16-bit, tf32 or exact fp32), because those decide how many registers a tile needs
and so whether it spills.
"""

from __future__ import annotations

KERNELS = ("forward", "backward_dkdv", "backward_dq")
OPERANDS = ("16-bit", "tf32", "ieee")  # bf16/fp16 inputs; fp32 with tf32 products; fp32 exact
BLOCK_DS = (32, 64, 128)  # padded head dims with their own lists; 16 uses 32's (smaller tiles)

# (kernel, operand kind) -> BLOCK_D -> candidates, the same for dropout on and off. Every one
# was compiled for sm_80 and sm_90 at every dtype of its kind, its head dim and both dropout
# settings without a spill (python bench/kernel_compile.py; docs/gpu-compile.md). The rule of thumb: the
# registers a thread needs grow with the tiles it keeps across the loop (the forward's output
# accumulator, the dK/dV or dQ accumulators, the resident Q or K and V) over the threads sharing
# them, so larger head dims get more warps or smaller tiles; fp32 tiles hold twice the bytes of
# 16-bit ones, and exact fp32 products (FMA, no tensor cores) need the smallest tiles of all. But
# ptxas does not follow the rule exactly: some tiles spill at head dim 32 and not at 64, or with
# dropout off and not on. Only a compile decides, so a new candidate goes into the table after
# bench/kernel_compile.py shows it clean at its whole key range.
_TABLE = {
    ("forward", "16-bit"): {
        32: [(128, 128, 8, 2), (128, 64, 8, 2), (128, 32, 4, 3), (64, 64, 4, 2)],
        64: [(128, 64, 8, 3), (64, 64, 4, 3), (64, 32, 4, 2)],
        128: [(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 3)],
    },
    ("forward", "tf32"): {
        32: [(128, 64, 8, 2), (64, 64, 4, 2), (128, 32, 4, 2)],
        64: [(128, 64, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2)],
        128: [(64, 64, 8, 2), (128, 32, 8, 2), (32, 64, 4, 2)],
    },
    ("forward", "ieee"): {
        32: [(64, 32, 8, 2), (32, 32, 8, 2), (16, 64, 8, 2), (16, 32, 4, 2)],
        64: [(64, 32, 8, 2), (32, 32, 8, 2), (16, 64, 8, 2), (16, 32, 4, 2)],
        128: [(32, 32, 8, 2), (16, 64, 8, 2), (32, 16, 8, 2), (16, 16, 4, 2)],
    },
    ("backward_dkdv", "16-bit"): {
        32: [(64, 128, 8, 2), (32, 128, 4, 2), (64, 64, 4, 2), (32, 64, 4, 2)],
        64: [(32, 128, 8, 2), (32, 64, 4, 2), (16, 64, 4, 2)],
        128: [(32, 64, 8, 2), (16, 64, 8, 2), (32, 32, 4, 2)],
    },
    ("backward_dkdv", "tf32"): {
        32: [(32, 64, 8, 2), (32, 64, 4, 2), (32, 32, 4, 2)],
        64: [(32, 32, 8, 2), (32, 32, 4, 2), (16, 64, 4, 2)],
        128: [(32, 32, 8, 2), (16, 32, 4, 2), (32, 32, 4, 2)],
    },
    ("backward_dkdv", "ieee"): {
        32: [(32, 32, 8, 2), (16, 32, 4, 2), (32, 16, 4, 2)],
        64: [(32, 32, 8, 2), (16, 64, 8, 2), (16, 32, 4, 2)],
        128: [(32, 32, 8, 2), (16, 64, 8, 2), (16, 32, 4, 2)],
    },
    ("backward_dq", "16-bit"): {
        32: [(128, 64, 8, 2), (128, 32, 4, 3), (64, 64, 4, 2), (64, 32, 4, 2)],
        64: [(128, 64, 8, 2), (128, 32, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2)],
        128: [(128, 32, 8, 2), (64, 64, 8, 2), (64, 32, 4, 2)],
    },
    ("backward_dq", "tf32"): {
        32: [(64, 64, 8, 2), (64, 64, 4, 2), (64, 32, 4, 2)],
        64: [(64, 32, 8, 2), (32, 64, 8, 2), (64, 32, 4, 2)],
        128: [(32, 64, 8, 2), (32, 32, 4, 2), (16, 32, 4, 2)],
    },
    ("backward_dq", "ieee"): {
        32: [(32, 32, 4, 2), (32, 16, 4, 1), (16, 32, 4, 2)],
        64: [(32, 32, 4, 2), (32, 16, 4, 1), (16, 32, 4, 2)],
        128: [(32, 32, 4, 2), (32, 16, 4, 1), (16, 32, 8, 2)],
    },
}


def operand(dtype_name: str, precision: str) -> str:
    """The operand kind of a launch: its inputs' dtype name ("bfloat16", "float32", ...) and
    tl.dot's input precision ("tf32" or "ieee", which matters for fp32 only)."""
    if dtype_name.removeprefix("torch.") in ("bfloat16", "float16", "bf16", "fp16"):
        return "16-bit"
    return "tf32" if precision == "tf32" else "ieee"


def block_d_bucket(block_d: int) -> int:
    """The BLOCK_D whose list a padded head dimension uses (16 shares 32's)."""
    return max(BLOCK_DS[0], block_d)


def candidates(kernel: str, block_d: int, dropout: bool, operand_kind: str) -> list[tuple[int, int, int, int]]:
    """The (BLOCK_M, BLOCK_N, num_warps, num_stages) a launch of `kernel` may choose from. dropout
    is part of the key because it changes the registers a tile needs; today's lists do not
    depend on it."""
    if kernel not in KERNELS or operand_kind not in OPERANDS:
        raise ValueError(f"no candidates for kernel {kernel!r}, operand {operand_kind!r}; kernels are "
                         f"{', '.join(KERNELS)} and operands {', '.join(OPERANDS)}")
    if block_d not in BLOCK_DS:
        raise ValueError(f"no candidates for BLOCK_D {block_d}; lists exist for {BLOCK_DS} (see block_d_bucket)")
    return list(_TABLE[kernel, operand_kind][block_d])


def prune(kernel: str, configs: list, named_args: dict, **launch_kwargs) -> list:
    """The autotuner's early-config-prune hook: keep the triton.Configs that are candidates of this
    launch's key. Reads the launch's Q (dtype) and its BLOCK_D, HAS_DROPOUT and PRECISION, given
    by keyword or by position."""
    args = {**named_args, **launch_kwargs}
    allowed = set(candidates(kernel, block_d_bucket(int(args["BLOCK_D"])), bool(args["HAS_DROPOUT"]),
                             operand(str(args["Q"].dtype), str(args["PRECISION"]))))
    return [c for c in configs if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) in allowed]


def all_candidates(kernel: str) -> list[tuple[int, int, int, int]]:
    """Every candidate of `kernel` under any key, each once, in a fixed order: the autotuner's list,
    which `candidates` then prunes per launch."""
    seen = {}
    for block_d in BLOCK_DS:
        for dropout in (False, True):
            for kind in OPERANDS:
                seen.update(dict.fromkeys(candidates(kernel, block_d, dropout, kind)))
    return list(seen)
