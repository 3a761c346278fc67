"""Attention on the CPU: torch's fused SDPA kernel against the formulas written out
(`attention.py:attend`'s two branches), in fp32 and bf16, forward + backward and forward alone.

    python bench/attention_cpu.py                 # BERT-base heads, 1,024 tokens a batch at 64-512 a sequence
    python bench/attention_cpu.py --dropout 0.1 --head-dim 32

Each contender takes its turn call by call (machine drift hits all alike); medians are
compared. A quarter of every other sequence's keys are padding. In bf16 the written-out branch
is what `attend` runs on a CPU up to `BF16_CPU_FORMULAS_UP_TO` keys, which this bench sets.

With --dropout (forward + backward only: dropout acts while training), torch's kernel has none
and SDPA falls back to the formulas; `attend` then runs kernels/cpu_dropout.py's blocks. The
table sets the blocks against torch's fused kernel without dropout, the step they replace.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from minibert.attention import attend  # noqa: E402

HEADS, TOKENS = 12, 1024
LENGTHS = (64, 128, 256, 384, 512)


def fused(q, k, v, key_mask, dropout_p):  # called directly: `attend` leaves it in bf16 up to BF16_CPU_FORMULAS_UP_TO keys
    return F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :], dropout_p=dropout_p)


def written_out(q, k, v, key_mask, dropout_p):
    return attend(q, k, v, key_mask, "naive", dropout_p)


def fused_without_dropout(q, k, v, key_mask, dropout_p):
    return fused(q, k, v, key_mask, 0.0)


def blocks(q, k, v, key_mask, dropout_p):  # what the default backend runs with dropout on a CPU
    return attend(q, k, v, key_mask, "sdpa", dropout_p)


def timings(length: int, training: bool, dropout_p: float, steps: int, head_dim: int) -> dict[tuple[str, str], float]:
    """Median milliseconds of each (branch, precision) at one sequence length."""
    batch = TOKENS // length
    key_mask = torch.ones(batch, length, dtype=torch.bool)
    key_mask[::2, length * 3 // 4:] = False
    inputs = {}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        qkv = [torch.randn(batch, HEADS, length, head_dim, dtype=dtype, requires_grad=training) for _ in range(3)]
        inputs[precision] = (qkv, torch.randn(batch, HEADS, length, head_dim, dtype=dtype))
    branch = {"fused": fused, "written out": written_out}
    if dropout_p:
        branch.update({"fused, no dropout": fused_without_dropout, "blocks": blocks})
    contenders = [(name, precision) for name in branch for precision in inputs]
    times = {c: [] for c in contenders}
    for i in range(steps + 2):  # two warm-up calls each
        for name, precision in (contenders if i % 2 == 0 else contenders[::-1]):
            (q, k, v), grad = inputs[precision]
            start = time.perf_counter()
            with torch.set_grad_enabled(training):
                out = branch[name](q, k, v, key_mask, dropout_p if training else 0.0)
                if training:
                    out.backward(grad)
            if i >= 2:
                times[(name, precision)].append(time.perf_counter() - start)
    return {c: 1000 * statistics.median(t) for c, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.0, help="attention dropout while training (forward + backward only)")
    parser.add_argument("--head-dim", type=int, default=64, help="64: BERT-base's heads; 32: all-MiniLM-L6-v2's")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, torch {torch.__version__}, {HEADS} heads of {args.head_dim}, {TOKENS} tokens a batch, "
          f"dropout {args.dropout}, load average {os.getloadavg()[0]:.1f}")
    if args.dropout:
        print("| pass | tokens a sequence | precision | fused, no dropout ms | fused with dropout (SDPA's fallback) ms "
              "| written out ms | blocks ms | blocks ÷ fused without dropout |")
        print("|---|---|---|---|---|---|---|---|")
        for length in LENGTHS:
            ms = timings(length, True, args.dropout, args.steps, args.head_dim)
            for precision in ("fp32", "bf16"):
                row = [ms[(name, precision)] for name in ("fused, no dropout", "fused", "written out", "blocks")]
                print(f"| forward + backward | {length} | {precision} | " + " | ".join(f"{t:.1f}" for t in row)
                      + f" | {row[3] / row[0]:.2f}× |", flush=True)
        return
    print("| pass | tokens a sequence | fused fp32 ms | written out fp32 ms | fused bf16 ms | written out bf16 ms "
          "| bf16: written out's speed-up |")
    print("|---|---|---|---|---|---|---|")
    for training in (True, False):
        for length in LENGTHS:
            ms = timings(length, training, args.dropout, args.steps, args.head_dim)
            print(f"| {'forward + backward' if training else 'forward'} | {length} | {ms[('fused', 'fp32')]:.1f} "
                  f"| {ms[('written out', 'fp32')]:.1f} | {ms[('fused', 'bf16')]:.1f} | {ms[('written out', 'bf16')]:.1f} "
                  f"| {ms[('fused', 'bf16')] / ms[('written out', 'bf16')]:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
