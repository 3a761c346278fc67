"""The speed levers side by side on this machine: --compile and --checkpoint-activations.

    python bench/levers.py compile --hidden 128 --layers 2 --heads 2 --length 64 --batch 32 --steps 30
    python bench/levers.py checkpoint --hidden 768 --layers 12 --heads 12 --length 512 --batch 8 --steps 3   # BERT-base, 512 tokens

compile:     training step time (median, after the first) and the time the first step took
             (compiling included), eager and with the layers compiled (runs/levers.py).
checkpoint:  peak resident memory of the process (each configuration in a fresh process),
             the activations autograd kept for the backward, and the step time, with and
             without --checkpoint-activations.
Both run forward + backward + AdamW of a MaskedLM on random full-length batches, 15% masked.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from minibert.config import ModelConfig  # noqa: E402
from minibert.heads import IGNORE_INDEX, MaskedLM  # noqa: E402
from minibert.runs.levers import use_levers  # noqa: E402


def measure(args, lever: str, device: str = "cpu") -> dict:
    """One configuration, in this process: step times, first step, saved activations, peak memory
    (on a GPU: the peak of allocated GPU memory)."""
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    config = ModelConfig(vocab_size=args.vocab, hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads,
                         intermediate_size=4 * args.hidden, max_positions=args.length)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model = MaskedLM(config).to(device).train()
    use_levers(model, compile=lever == "compile", checkpoint_activations=lever == "checkpoint")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(5, args.vocab, (args.batch, args.length), device=device)
    labels = torch.where(torch.rand(ids.shape) < 0.15, ids, IGNORE_INDEX)
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    times = []
    for step in range(args.steps):
        saved.clear()
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = model(ids, torch.ones_like(ids), labels=labels).loss
        kept = sum(saved)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"lever": lever, "first_step_s": times[0], "step_s": statistics.median(times[1:] or times),
            "saved_activations_mb": kept / 2**20, "peak_rss_mb": (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
                                                                  else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "loss": float(loss)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=("compile", "checkpoint"))
    for name, default in (("hidden", 128), ("layers", 2), ("heads", 2), ("length", 64), ("batch", 32), ("steps", 10),
                          ("vocab", 8000), ("threads", 1)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one configuration, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args, args.one)))
        return 0
    rows = []
    for lever in ("none", args.which):  # each in a fresh process: its peak memory is its own
        command = [sys.executable, __file__, *sys.argv[1:], "--one", lever]
        rows.append(json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1]))
    print(f"{args.which}: H={args.hidden}, {args.layers} layers, {args.batch} × {args.length} tokens, {args.threads} thread(s), "
          f"{args.steps} steps (median after the first)\n")
    print("| lever | step (ms) | first step (s) | activations kept (MB) | peak RSS (MB) | loss |\n|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['lever']} | {1e3 * row['step_s']:.0f} | {row['first_step_s']:.1f} | {row['saved_activations_mb']:.0f} | "
              f"{row['peak_rss_mb']:.0f} | {row['loss']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
