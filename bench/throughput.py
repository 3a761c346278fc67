"""Training throughput, minibert vs the `transformers` BERT, side by side in one process.

Both models get the same random weights (a `BertForMaskedLM` saved with `save_pretrained`,
then loaded with `minibert.from_pretrained(dir, head="mlm")`), the same batch and the same
masked-LM labels. Each timed step is forward + backward + AdamW step; the two models
alternate step by step so that machine drift hits both alike, and the ratio of medians is
reported. Losses are checked to agree before anything is timed.

    python bench/throughput.py                       # mini and base, full and padded
    python bench/throughput.py --shapes mini --steps 10
    python bench/throughput.py --compile             # minibert's sublayers under torch.compile

MFU (model FLOP utilisation) counts only the FLOPs the math needs — every layer on the real
tokens only, the vocabulary projection at masked positions only — divided by this machine's
measured fp32 matmul peak. "Strict MFU" also credits the last layer only with the work a
loss at the masked positions needs, which minibert exploits: it is the stricter measure of
how much of the machine goes into necessary arithmetic. Both counts are `minibert.tools.flops`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from minibert import ModelConfig
from minibert.tools.flops import BatchShape, training_flops

SHAPES = {
    "mini": dict(hidden=256, layers=4, heads=4, ffn=1024, vocab=30522, length=128, batch=16),
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, vocab=30522, length=128, batch=8),
}
MASKED = 0.15  # share of the real tokens given an MLM label, BERT's rate


def make_batch(shape: dict, padded: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    B, T, V = shape["batch"], shape["length"], shape["vocab"]
    ids = torch.randint(5, V, (B, T), generator=g)
    lengths = torch.randint(T // 8, T + 1, (B,), generator=g) if padded else torch.full((B,), T)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    ids = ids.masked_fill(mask == 0, 0)
    selected = (torch.rand(B, T, generator=g) < MASKED) & mask.bool()
    selected[:, 1] = True  # at least one label per sequence
    labels = torch.where(selected, ids, -100)
    return ids, mask, labels


def shape_config(shape: dict) -> ModelConfig:
    """The minibert config a benchmark shape describes (what `build_pair` loads)."""
    return ModelConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_layers=shape["layers"],
                       num_heads=shape["heads"], intermediate_size=shape["ffn"])


def matmul_peak(threads: int, n: int = 1024, repeats: int = 20) -> float:
    """fp32 matmul FLOP/s on this machine (best of several square matmuls, after a warm-up)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def compile_sublayers(model) -> None:
    """`torch.compile` every residual sublayer of minibert's model, in place (--compile).

    Compiling fuses the small memory-bound steps around the matmuls (bias, GELU, residual add,
    LayerNorm). Only the sublayers: building an unpadded batch's layout reads the mask's values
    (data-dependent shapes), which would break a whole-model graph. The number of real tokens
    changes from batch to batch, so shapes are dynamic. Not minibert's default: the first step
    pays the compilation (about a minute on a 2-core CPU) and docs/speed.md found no
    measurable gain there."""
    from minibert.model import Sublayer

    for module in model.modules():
        if isinstance(module, Sublayer):
            module.compile(dynamic=True)


def build_pair(shape: dict, tmp: str, compile: bool = False):
    from transformers import BertConfig, BertForMaskedLM

    import minibert

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"], intermediate_size=shape["ffn"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    reference = BertForMaskedLM(config)
    reference.save_pretrained(tmp)
    reference = BertForMaskedLM.from_pretrained(tmp, attn_implementation="sdpa")
    ours = minibert.from_pretrained(tmp, head="mlm")
    if compile:
        compile_sublayers(ours)
    return reference.train(), ours.train()


def run_shape(name: str, padded: bool, steps: int, threads: int, compile: bool = False) -> dict:
    shape = SHAPES[name]
    with tempfile.TemporaryDirectory() as tmp:
        reference, ours = build_pair(shape, tmp, compile)
    ids, mask, labels = make_batch(shape, padded)
    models = {"transformers": reference, "minibert": ours}
    # The same optimizer on both sides: the fused AdamW (one pass over each parameter's memory);
    # it is a shared cost, so the ratio measures the models.
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True) for k, m in models.items()}

    def step(key: str) -> tuple[float, float]:
        start = time.perf_counter()
        loss = models[key](input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizers[key].step()
        optimizers[key].zero_grad(set_to_none=True)
        return time.perf_counter() - start, loss.item()

    times = {k: [] for k in models}
    for i in range(steps + 2):  # two warm-up steps each, then alternate
        for key in (models if i % 2 == 0 else reversed(list(models))):
            seconds, loss = step(key)
            if i == 0:
                times.setdefault("loss_" + key, loss)
            if i >= 2:
                times[key].append(seconds)
    first = times["loss_transformers"], times["loss_minibert"]
    if abs(first[0] - first[1]) > 1e-4 * max(1.0, abs(first[0])):
        raise SystemExit(f"losses disagree before timing: transformers {first[0]:.6f} vs minibert {first[1]:.6f}")
    real_tokens = int(mask.sum())
    config, batch = shape_config(shape), BatchShape.of(mask, labels)
    med = {k: statistics.median(times[k]) for k in models}
    return dict(
        shape=name, batch="padded" if padded else "full", real_tokens=real_tokens, loss=first[1],
        ref_tps=real_tokens / med["transformers"], ours_tps=real_tokens / med["minibert"],
        ratio=med["transformers"] / med["minibert"],
        flops_per_s=training_flops(config, batch) / med["minibert"],
        strict_flops_per_s=training_flops(config, batch, sparse_last_layer=True) / med["minibert"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="mini,base", help="comma-separated: mini, base")
    parser.add_argument("--batches", default="full,padded", help="comma-separated: full, padded")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="torch.compile minibert's sublayers (compile_sublayers)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, torch {torch.__version__}")
    # The machine's speed drifts: the peak is re-measured before every row and after the last,
    # and MFU is taken against the best of those, so that a slow moment cannot inflate it.
    peaks, results = [], []
    for name in args.shapes.split(","):
        for batch in args.batches.split(","):
            peaks.append(matmul_peak(args.threads))
            results.append(run_shape(name, batch == "padded", args.steps, args.threads, args.compile))
            r = results[-1]
            print(f"  {r['shape']} {r['batch']}: {r['ratio']:.2f}×", flush=True)
    peaks.append(matmul_peak(args.threads))
    peak = max(peaks)
    print(f"fp32 matmul peak {peak / 1e9:.0f} GFLOP/s (best of {len(peaks)} measurements, "
          f"lowest {min(peaks) / 1e9:.0f})")
    print("| shape | batch | real tokens | transformers tok/s | minibert tok/s | ratio | minibert MFU | strict MFU |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['shape']} | {r['batch']} | {r['real_tokens']} | {r['ref_tps']:.0f} | {r['ours_tps']:.0f} "
              f"| {r['ratio']:.2f}× | {100 * r['flops_per_s'] / peak:.0f}% | {100 * r['strict_flops_per_s'] / peak:.0f}% |")


if __name__ == "__main__":
    main()
