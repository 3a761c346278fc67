"""The fast path against the reference path (`--reference`), side by side in one process.

Both are the variant's default-run pretrainer (the default corpus, its tokenizer and its
batches, 32 × 64 tokens), with the same initial weights; only `ModelConfig.reference`
differs. Each timed step is forward + backward + AdamW step; the two alternate step by step
on the same batches, so that machine drift hits both alike, and the ratio of the medians is
reported with the share of padding in the batches timed (its mean and its most). The first
step's losses must agree before anything is timed.

    python bench/reference.py                          # albert and bert, 30 steps each
    python bench/reference.py --variants albert --steps 10 --threads 2
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for minibert

from minibert.operations.distributed import Distributed  # noqa: E402
from minibert.training.settings import LoopSettings  # noqa: E402
from minibert.training.optimizer import build_optimizer  # noqa: E402
from minibert.runs.run import build_batches  # noqa: E402
from minibert.variants import VARIANTS, build_pretrainer, run_architecture, with_layout  # noqa: E402


def pair(name: str, tokenizer_dir: Path):
    """(fast, reference) pretrainers with their optimizers, and the variant's training batches."""
    variant = VARIANTS[name]
    settings = variant.default_settings()
    settings = with_layout(variant, settings)
    streams, _, tokenizer, _ = build_batches(settings, Distributed(), tokenizer_dir, variant.model["vocab_size"])
    config = run_architecture(variant, settings, {}, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id)
    torch.manual_seed(0)
    fast = build_pretrainer(variant, settings, config).train()
    reference = build_pretrainer(variant, settings, config.replace(reference=True)).train()
    reference.load_state_dict(fast.state_dict())
    loop = LoopSettings.of(settings)
    optimizer = lambda model: build_optimizer(model, lr=loop.lr, weight_decay=loop.weight_decay)  # noqa: E731
    return [(fast, optimizer(fast)), (reference, optimizer(reference))], iter(streams[0])


def step(model, optimizer, batch) -> tuple[float, float]:
    """(seconds, loss) of one forward + backward + optimizer step."""
    started = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss, _ = model(batch)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - started, float(loss.detach())


def measure(name: str, steps: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory() as tokenizer_dir:
        models, batches = pair(name, Path(tokenizer_dir))
        times, padding = ([], []), []
        for i, batch in enumerate(itertools.islice(batches, warmup + steps)):
            padding.append(1 - batch["attention_mask"].float().mean().item())
            losses = []
            for (model, optimizer), timed in zip(models, times):
                torch.manual_seed(i)  # ELECTRA's samples and any dropout: the same draws on both paths
                seconds, loss = step(model, optimizer, batch)
                losses.append(loss)
                if i >= warmup:
                    timed.append(seconds)
            if i == 0 and abs(losses[0] - losses[1]) > 1e-4 * abs(losses[0]):
                raise SystemExit(f"{name}: the first losses differ (fast {losses[0]}, reference {losses[1]}); not timing")
    fast, reference = (statistics.median(t) for t in times)
    return dict(variant=name, fast_ms=1000 * fast, reference_ms=1000 * reference, speedup=reference / fast,
                padding=statistics.mean(padding), most_padding=max(padding))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=["albert", "bert"], choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=30, help="timed steps per path (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as the default runs)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} timed steps after {args.warmup}")
    print("| variant | fast ms/step | reference ms/step | fast speed-up | padding of its batches: mean / most |")
    print("|---|---|---|---|---|")
    for name in args.variants:
        r = measure(name, args.steps, args.warmup)
        print(f"| {r['variant']} | {r['fast_ms']:.0f} | {r['reference_ms']:.0f} | {r['speedup']:.2f}× | "
              f"{r['padding']:.0%} / {r['most_padding']:.0%} |", flush=True)


if __name__ == "__main__":
    main()
