"""Benchmark: building the pretraining data of a large corpus in bounded memory.

    python bench/corpus_build.py --sizes-mb 100 1000     # 1 GB and ten times smaller
    python bench/corpus_build.py --sizes-mb 5 50         # a quick look

Each corpus is WikiText-2's train split repeated to the size asked for (written to a temporary
folder; repeated text tokenizes like the original). For each size, in fresh processes one after
another: the tokenizer, the token store and the sop examples, then the examples of the other
layouts (nsp, full_sentences) with dynamic masking, then BERT's static copies (nsp, --dupe-factor 10:
the corpus cut 10 times by the workers, then each copy masked). Each
step prints the peak anonymous memory (RssAnon, summed over the process and all its worker
processes, sampled every 50 ms — memory-mapped pages are not counted), its wall time, the text
rate per worker (per process for the static copies, whose masks one process draws in order), and
beside them the cost line's estimate (minibert/corpus/cost.py) for the build.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

WIKITEXT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "wikitext-2" / "train.txt"
STEPS = [("tokenizer, tokens, sop examples", "sop", "dynamic"), ("examples nsp", "nsp", "dynamic"),
         ("examples full_sentences", "full_sentences", "dynamic"), ("static copies nsp x10", "nsp", "static")]


def tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    return found


def anon_mb(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def build(corpus: str, cache: str, layout: str, masking: str, workers: int) -> None:
    from minibert.corpus.pipeline import build_pretraining_data

    build_pretraining_data([corpus], vocab_size=8000, seq_len=128, layout=layout, masking=masking,
                           dupe_factor=10 if masking == "static" else 1, mask_prob=0.15, replace_probs=(0.8, 0.1, 0.1),
                           whole_word=False, max_span=1, short_seq_prob=0.1, batch_size=32, seed=0, data_dir=cache,
                           mask_count="bernoulli", max_predictions=None, mask_smoothing=0.0,
                           workers=workers)


def measured(corpus: Path, cache: Path, layout: str, masking: str, workers: int) -> tuple[float, float]:
    """(peak anonymous MB over the process tree, seconds) of one build step in a fresh process."""
    process = multiprocessing.get_context("spawn").Process(target=build, args=(str(corpus), str(cache), layout, masking, workers))
    peak, start = [0.0], time.perf_counter()
    process.start()

    def sample():
        while process.is_alive():
            peak[0] = max(peak[0], anon_mb(tree(process.pid)))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    process.join()
    sampler.join()
    if process.exitcode != 0:
        raise SystemExit(f"the build failed (exit {process.exitcode})")
    return peak[0], time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[100, 1000])
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--keep", action="store_true", help="keep the corpora and caches (in the temporary folder)")
    args = parser.parse_args()
    from minibert.corpus.pipeline import plan_corpus

    root = Path(tempfile.mkdtemp(prefix="corpus-build-"))
    text = WIKITEXT.read_bytes()
    print(f"WikiText-2 train repeated; {args.workers} worker(s); peak = RssAnon summed over the process tree")
    print(f"{'corpus':>8}  {'step':<31} {'peak anon':>10} {'time':>8} {'MB/s/worker':>12}   cost line: time, disk")
    for size_mb in args.sizes_mb:
        corpus, cache = root / f"corpus-{size_mb:g}MB.txt", root / f"cache-{size_mb:g}MB"
        with open(corpus, "wb") as f:
            for _ in range(max(1, round(size_mb * 1e6 / len(text)))):
                f.write(text)
        megabytes = corpus.stat().st_size / 1e6
        for name, layout, masking in STEPS:
            plan = plan_corpus([corpus], vocab_size=8000, masking=masking, dupe_factor=10 if masking == "static" else 1,
                               mask_prob=0.15, data_dir=cache)
            estimate = f"{plan.seconds:.0f} s, {plan.disk_bytes / 1e6:.0f} MB" if not plan.cached else "(cached parts)"
            peak, seconds = measured(corpus, cache, layout, masking, args.workers)
            processes = 1 if masking == "static" else args.workers  # static masks: one seeded generator, in order
            print(f"{megabytes:>6.0f}MB  {name:<31} {peak:>8.0f}MB {seconds:>7.1f}s {megabytes / seconds / processes:>12.2f}   {estimate}",
                  flush=True)
        if not args.keep:
            shutil.rmtree(cache), corpus.unlink()
    if not args.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
