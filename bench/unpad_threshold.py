"""Where unpadding starts to pay: the padded grid against the real tokens only, by padding share.

`Encoder.UNPAD_FROM` decides, from a batch's share of padding, whether the encoder runs on the
padded grid or on the real tokens packed back to back (kernels/unpad.py). This measures both on the
same model and the same batch, alternating step by step (forward + backward + AdamW), at a
few padding shares, and prints the ratio of the median step times: above 1, a step on the
real tokens takes less time than one on the grid. Two shapes: the default albert run's model
and batch (32 × 64, 40% masked), and bench/throughput.py's mini shape (16 × 128, 15% masked).

    python bench/unpad_threshold.py                     # both shapes, 1 thread
    python bench/unpad_threshold.py --shapes default --steps 40 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for minibert

from minibert import MaskedLM, ModelConfig  # noqa: E402
from minibert.model import Encoder  # noqa: E402
from minibert.variants import VARIANTS  # noqa: E402

SHARES = (0.03, 0.1, 0.2, 0.3, 0.45)


def shapes() -> dict:
    """name -> (model fields, batch, seq_len, masked share)."""
    albert = dict(VARIANTS["albert"].model, max_positions=64)
    mini = dict(vocab_size=30522, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
                hidden_dropout=0.0, attention_dropout=0.0, max_positions=128)
    return {"default": (albert, 32, 64, 0.4), "mini": (mini, 16, 128, 0.15)}


def batch_with_padding(share: float, batch: int, seq_len: int, vocab: int, masked: float):
    """ids, mask, labels [batch, seq_len] with about `share` of the positions padding: rows
    shortened 4 tokens at a time (never below 8), as sentence batches are ragged."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.full((batch,), seq_len)
    while 1 - lengths.sum().item() / (batch * seq_len) < share:
        row = int(torch.randint(batch, (1,), generator=g))
        lengths[row] = max(8, int(lengths[row]) - 4)
    mask = (torch.arange(seq_len) < lengths[:, None]).long()
    ids = torch.randint(5, vocab, (batch, seq_len), generator=g) * mask
    labels = torch.where((torch.rand(batch, seq_len, generator=g) < masked) & mask.bool(), ids, -100)
    return ids, mask, labels


def measure(fields: dict, batch: int, seq_len: int, masked: float, share: float, steps: int) -> tuple[float, float, float]:
    """(padding share, unpadded ms, padded-grid ms): medians over `steps` alternating steps after 3 untimed."""
    torch.manual_seed(0)
    model = MaskedLM(ModelConfig(**fields)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids, mask, labels = batch_with_padding(share, batch, seq_len, fields["vocab_size"], masked)
    times: dict[float, list[float]] = {0.0: [], 1.0: []}  # UNPAD_FROM 0: always unpad; 1: never
    saved = Encoder.UNPAD_FROM
    try:
        for i in range(steps + 3):
            for unpad_from in (0.0, 1.0) if i % 2 else (1.0, 0.0):
                Encoder.UNPAD_FROM = unpad_from
                started = time.perf_counter()
                model(ids, mask, labels=labels).loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if i >= 3:
                    times[unpad_from].append(time.perf_counter() - started)
    finally:
        Encoder.UNPAD_FROM = saved
    return 1 - mask.float().mean().item(), 1000 * statistics.median(times[0.0]), 1000 * statistics.median(times[1.0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["default", "mini"], choices=["default", "mini"])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per path and share (default 20)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s); Encoder.UNPAD_FROM = {Encoder.UNPAD_FROM}")
    print("| shape | padding | unpadded ms | padded grid ms | unpadding's speed-up |")
    print("|---|---|---|---|---|")
    for name in args.shapes:
        fields, batch, seq_len, masked = shapes()[name]
        for share in SHARES:
            padding, unpadded, grid = measure(fields, batch, seq_len, masked, share, args.steps)
            print(f"| {name} | {padding:.0%} | {unpadded:.1f} | {grid:.1f} | {grid / unpadded:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
