"""Helpers for the training tests: a tiny corpus and tiny `train.py` runs that take seconds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TINY_MODEL = ["--hidden-size", "32", "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "2",
              "--vocab-size", "400", "--seq-len", "32"]
EMBEDDING = {"albert": ["--embedding-size", "16"], "electra": ["--embedding-size", "8"]}


def write_corpus(path: Path, documents: int = 40, seed: int = 0) -> Path:
    """Documents of simple, patterned sentences: small enough to tokenize instantly, regular
    enough that a tiny model's loss falls within a few dozen steps."""
    rng = random.Random(seed)
    animals = "cat dog bird fish horse cow sheep goat mouse lion".split()
    verbs = "eats sees likes chases finds hears follows watches".split()
    adjectives = "small big red green quick slow happy sad".split()
    places = "garden house field river forest barn hill road".split()
    texts = []
    for _ in range(documents):
        animal, place = rng.choice(animals), rng.choice(places)
        texts.append(" ".join(
            f"The {rng.choice(adjectives)} {animal} {rng.choice(verbs)} the {rng.choice(adjectives)} "
            f"{rng.choice(animals)} near the {place}." for _ in range(8)
        ))
    path.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    return path


def tiny_args(variant: str, corpus: Path, cache: Path, out: Path, steps: int = 20, *extra: str) -> list[str]:
    return ["--variant", variant, "--data", str(corpus), "--cache-dir", str(cache), "--out", str(out),
            "--steps", str(steps), "--batch-size", "8", "--threads", "1", "--eval-every", "10", "--eval-batches", "2",
            "--log-every", "5", "--save-every", "10", *model_flags(variant), *extra]


def model_flags(variant: str) -> list[str]:
    """A student takes its teacher's architecture: only the sequence length is chosen."""
    if variant == "distilbert":
        return ["--seq-len", "32"]
    return [*TINY_MODEL, *EMBEDDING.get(variant, [])]


def wide_config(vocab_size: int, variant: str = "bert", **changes):
    """A variant's architecture at a tiny size with wide initial weights (a model's outputs then
    move visibly when any tensor is exchanged for another); DistilBERT's is a student's: its
    teacher's shape, half the layers, no segments."""
    from minibert import ModelConfig
    from minibert.objectives.kd import student_config
    from minibert.variants import VARIANTS

    tiny = dict(vocab_size=vocab_size, hidden_size=32, num_heads=2, intermediate_size=64, max_positions=40, initializer_range=0.5)
    if variant == "distilbert":
        return student_config(ModelConfig(**{**VARIANTS["bert"].model, **tiny, **changes}))
    return ModelConfig(**{**VARIANTS[variant].model, **tiny, **changes})


def run_cli(args: list[str], **popen) -> subprocess.CompletedProcess:
    """`python train.py ARGS` in a fresh process, as a user would run it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, **popen)


def strip_model_flags(args: list[str]) -> list[str]:
    """Arguments without the architecture flags (--seq-len stays: it is a data setting)."""
    kept, skip = [], False
    for arg in args:
        if skip or arg in ("--hidden-size", "--num-heads", "--intermediate-size", "--num-layers", "--vocab-size", "--embedding-size"):
            skip = not skip
            continue
        kept.append(arg)
    return kept


def kill_at_random_moments(command: list[str], started: Path, latest: float, attempts: int = 3) -> None:
    """Run `command` `attempts` times (with --resume after the first), each killed with SIGKILL at a
    random moment up to `latest` seconds after `started` appears (training has begun)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    rng = random.Random(0)
    for attempt in range(attempts):
        process = subprocess.Popen(command + (["--resume"] if attempt else []), cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while not started.exists() and process.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, latest))
        process.send_signal(signal.SIGKILL)
        process.wait()


def tiny_keywords(variant: str, corpus: Path, cache: Path, out: Path, steps: int = 20) -> dict:
    """tiny_args as keywords of minibert.pretrain (tests/test_pretrain_api.py checks that they agree)."""
    model = dict(seq_len=32) if variant == "distilbert" else dict(
        hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2, vocab_size=400, seq_len=32,
        **{"albert": dict(embedding_size=16), "electra": dict(embedding_size=8)}.get(variant, {}))
    return dict(variant=variant, data=str(corpus), cache_dir=cache, out=out, steps=steps, batch_size=8, threads=1,
                eval_every=10, eval_batches=2, log_every=5, save_every=10, **model)
