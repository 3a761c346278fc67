"""The GPU autotuning candidates of the attention kernels, as plain data.

Kept apart from `_flash_kernels.py` (and free of any triton import) because that module's
autotuner is built for whichever mode triton is in when it is imported: under the CPU
interpreter (`TRITON_INTERPRET=1`, the test suite) it holds one small interpreter config, so the
GPU candidates can only be read here.

A candidate is (BLOCK_M, BLOCK_N, num_warps, num_stages). Which ones a launch may choose from
depends on its key: the kernel, the padded head dimension BLOCK_D, whether dropout is on and the
operand kind (16-bit, tf32 or exact fp32), because those decide how many registers a tile needs.
"""

from __future__ import annotations

KERNELS = ("forward", "backward_dkdv", "backward_dq")
OPERANDS = ("16-bit", "tf32", "ieee")  # bf16/fp16 inputs; fp32 with tf32 products; fp32 exact
BLOCK_DS = (32, 64, 128)  # padded head dims with their own lists; 16 uses 32's (smaller tiles)

# Every key shares its kernel's one list for now: the lists autotuning has used so far.
_TABLE = {
    "forward": [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (64, 32, 4, 2)],
    "backward_dkdv": [(32, 128, 4, 3), (64, 128, 8, 2), (32, 64, 4, 3), (64, 64, 4, 2), (16, 64, 4, 1)],
    "backward_dq": [(128, 32, 4, 3), (128, 64, 8, 2), (64, 64, 4, 3), (64, 32, 4, 2), (32, 16, 4, 1)],
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
    """The (BLOCK_M, BLOCK_N, num_warps, num_stages) a launch of `kernel` may choose from."""
    if kernel not in KERNELS or operand_kind not in OPERANDS:
        raise ValueError(f"no candidates for kernel {kernel!r}, operand {operand_kind!r}; kernels are "
                         f"{', '.join(KERNELS)} and operands {', '.join(OPERANDS)}")
    if block_d not in BLOCK_DS:
        raise ValueError(f"no candidates for BLOCK_D {block_d}; lists exist for {BLOCK_DS} (see block_d_bucket)")
    return list(_TABLE[kernel])


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
