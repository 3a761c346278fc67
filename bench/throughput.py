"""Throughput, minibert vs the `transformers` BERT, side by side in one process: training,
fine-tuning and inference, in fp32 and under bf16 autocast.

Both models get the same random weights (a `BertForMaskedLM` saved with `save_pretrained`,
then loaded with `minibert.from_pretrained(dir, head="mlm")`; for fine-tuning and inference a
`BertForSequenceClassification` and a minibert `SequenceClassifier` holding its encoder, pooler
and classifier), the same batch and the same labels. A training step (`train`: masked-LM
pretraining; `finetune`: two-class sequence classification) is forward + backward + fused
AdamW step; an inference step (`infer`) is the classifier's forward under no_grad in eval mode,
as predict runs it. Every variant of a row (each model in fp32, and under
`torch.autocast("cpu", dtype=torch.bfloat16)` with --precisions fp32,bf16) takes its turn step
by step, so that machine drift hits all alike; medians are compared. Losses (logits, for
inference) are checked to agree in fp32 before anything is timed.

    python bench/throughput.py                       # every mode, mini and base, full and padded, fp32 and bf16
    python bench/throughput.py --shapes mini --steps 10 --modes train
    python bench/throughput.py --compile             # minibert's sublayers under torch.compile
    python bench/throughput.py --shapes base --batches full --modes train --profile   # where a step's time goes
    python bench/throughput.py --modes finetune --shapes minilm-128,minilm-384 --batches full --dropouts 0,0.1

The models train without dropout unless --dropouts says otherwise (the default runs pretrain
without it). Fine-tuning recipes use 0.1 on the hidden states and the attention probabilities:
with --dropouts 0,0.1 each model takes its turn with both, on both sides alike, and a table sets
each side's step with dropout against its step without. The minilm shapes are all-MiniLM-L6-v2's
(6 layers, H = 384, 12 heads) at GLUE's batches (32 × 128) and SQuAD's windows (16 × 384).

Each row gives minibert against transformers in fp32 (what its users get by default) and
against transformers under the same autocast (like for like). MFU (model FLOP utilisation)
counts only the FLOPs the math needs — every layer on the real tokens only, the vocabulary
projection at masked positions only — divided by this machine's measured matmul peak in the
row's precision (a 2048² matmul, fp32 or bf16). "Strict MFU" (training) also credits the last
layer only with the work a loss at the masked positions needs, which minibert exploits: it is
the stricter measure of how much of the machine goes into necessary arithmetic. Both counts are
`minibert.runs.flops`; fine-tuning is 3 × the encoder's forward, inference 1 ×.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time

import torch

from minibert import ModelConfig
from minibert.runs.flops import BatchShape, encoder_flops, training_flops

MODES = ("train", "finetune", "infer")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

SHAPES = {
    "mini": dict(hidden=256, layers=4, heads=4, ffn=1024, vocab=30522, length=128, batch=16),
    "base": dict(hidden=768, layers=12, heads=12, ffn=3072, vocab=30522, length=128, batch=8),
    "minilm-128": dict(hidden=384, layers=6, heads=12, ffn=1536, vocab=30522, length=128, batch=32),
    "minilm-384": dict(hidden=384, layers=6, heads=12, ffn=1536, vocab=30522, length=384, batch=16),
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


def matmul_peak(threads: int, n: int = 2048, repeats: int = 10, precision: str = "fp32") -> float:
    """Matmul FLOP/s on this machine in `precision` (best of several square matmuls, after a warm-up)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=DTYPES[precision]), torch.randn(n, n, dtype=DTYPES[precision])
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


# torch.profiler's operators by what they do: an operator's self time goes to the first group
# with a word in its name (a matmul's backward is itself mm, addmm or bmm; casts are copies)
WORK = {"matmuls": ("mm", "matmul", "linear"), "loss": ("cross_entropy", "nll", "log_softmax"),
        "attention": ("attention", "flash", "softmax"), "casts and copies": ("copy",), "LayerNorm": ("layer_norm",),
        "optimizer": ("adam",), "GELU": ("gelu",), "gathers and embeddings": ("embedding", "index", "gather")}


def time_split(step) -> dict[str, float]:
    """Shares of one step's self CPU time by WORK's groups ("other": the rest), from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    split = dict.fromkeys([*WORK, "other"], 0.0)
    for event in prof.key_averages():
        name = event.key.lower()
        group = next((g for g, words in WORK.items() if any(w in name for w in words)), "other")
        split[group] += event.self_cpu_time_total
    total = sum(split.values())
    return {g: t / total for g, t in split.items()}


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


def bert_config(shape: dict, dropout: float = 0.0, **extra):
    """transformers' BertConfig of a benchmark shape, with `dropout` on the hidden states and the
    attention probabilities (what `shape_config` is to minibert)."""
    from transformers import BertConfig

    return BertConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
                      num_attention_heads=shape["heads"], intermediate_size=shape["ffn"], hidden_dropout_prob=dropout,
                      attention_probs_dropout_prob=dropout, **extra)


def build_pair(shape: dict, tmp: str, compile: bool = False, dropout: float = 0.0):
    from transformers import BertForMaskedLM

    import minibert

    torch.manual_seed(0)
    reference = BertForMaskedLM(bert_config(shape, dropout))
    reference.save_pretrained(tmp)
    reference = BertForMaskedLM.from_pretrained(tmp, attn_implementation="sdpa")
    ours = minibert.from_pretrained(tmp, head="mlm")
    if compile:
        compile_sublayers(ours)
    return reference.train(), ours.train()


def build_classifiers(shape: dict, tmp: str, dropout: float = 0.0):
    """transformers' BertForSequenceClassification (two classes) and a minibert SequenceClassifier
    ([CLS] through the pooler, as BERT's) holding the same weights, both with `dropout` (the
    classifier's too, as BERT's)."""
    from transformers import BertForSequenceClassification

    import minibert
    from minibert.heads import SequenceClassifier

    torch.manual_seed(0)
    BertForSequenceClassification(bert_config(shape, dropout, num_labels=2)).save_pretrained(tmp)
    reference = BertForSequenceClassification.from_pretrained(tmp, attn_implementation="sdpa")
    reference.bert.save_pretrained(f"{tmp}/encoder")  # the encoder and pooler alone: what from_pretrained maps
    encoder = minibert.from_pretrained(f"{tmp}/encoder")
    ours = SequenceClassifier(encoder.config, num_labels=2)
    ours.encoder.load_state_dict(encoder.state_dict())
    with torch.no_grad():
        ours.head.classifier.weight.copy_(reference.classifier.weight)
        ours.head.classifier.bias.copy_(reference.classifier.bias)
    return reference, ours


def run_shape(name: str, padded: bool, steps: int, threads: int, compile: bool = False, mode: str = "train",
              precisions: tuple[str, ...] = ("fp32",), profile: bool = False, dropouts: tuple[float, ...] = (0.0,)) -> list[dict]:
    """One shape and batch in one mode: a row per precision and dropout, every variant timed in turns."""
    shape = SHAPES[name]
    models = {}  # (side, dropout) -> model: the same weights at every dropout
    for dropout in dropouts:
        with tempfile.TemporaryDirectory() as tmp:
            reference, ours = build_pair(shape, tmp, compile, dropout) if mode == "train" else build_classifiers(shape, tmp, dropout)
        models[("transformers", dropout)], models[("minibert", dropout)] = reference, ours
    ids, mask, labels = make_batch(shape, padded)
    if mode != "train":
        labels = torch.arange(len(ids)) % 2  # a class per sequence
    training = mode != "infer"
    for model in models.values():
        model.train(training)
    # The same optimizer on both sides: the fused AdamW (one pass over each parameter's memory);
    # it is a shared cost, so the ratio measures the models.
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True) for k, m in models.items()}
    variants = [(side, precision, dropout) for precision in precisions for dropout in dropouts for side in ("transformers", "minibert")]

    def step(side: str, precision: str, dropout: float) -> tuple[float, torch.Tensor]:
        autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        model = models[(side, dropout)]
        start = time.perf_counter()
        if training:
            with autocast:
                out = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            out.backward()
            optimizers[(side, dropout)].step()
            optimizers[(side, dropout)].zero_grad(set_to_none=True)
        else:
            with torch.no_grad(), autocast:
                out = model(input_ids=ids, attention_mask=mask).logits
        return time.perf_counter() - start, out.detach().float()

    times = {variant: [] for variant in variants}
    first = {}
    for i in range(steps + 2):  # two warm-up steps each, then take turns (the order reversed every other step)
        for variant in (variants if i % 2 == 0 else variants[::-1]):
            seconds, out = step(*variant)
            first.setdefault(variant, out)
            if i >= 2:
                times[variant].append(seconds)
    checked = 0.0 if 0.0 in dropouts else None if training else dropouts[0]  # while training with dropout the sides draw other masks
    if checked is not None:
        a, b = first[("transformers", precisions[0], checked)], first[("minibert", precisions[0], checked)]
        if (a - b).abs().max() > 1e-4 * max(1.0, a.abs().max().item()):
            raise SystemExit(f"{mode}: outputs disagree before timing: transformers {a.flatten()[:4].tolist()} vs minibert {b.flatten()[:4].tolist()}")
    real_tokens = int(mask.sum())
    config = shape_config(shape)
    batch = BatchShape.of(mask, labels if mode == "train" else torch.full_like(mask, -100))
    if mode == "train":
        flops, strict = training_flops(config, batch), training_flops(config, batch, sparse_last_layer=True)
    else:
        flops = strict = (3 if training else 1) * encoder_flops(config, batch)
    med = {variant: statistics.median(times[variant]) for variant in variants}
    rows = []
    for precision in precisions:
        for dropout in dropouts:
            ours_s, same_s, fp32_s = (med[(side, p, dropout)] for side, p in (("minibert", precision), ("transformers", precision),
                                                                             ("transformers", precisions[0])))
            rows.append(dict(
                mode=mode, shape=name, batch="padded" if padded else "full", precision=precision, dropout=dropout,
                real_tokens=real_tokens, ref_fp32_tps=real_tokens / fp32_s, ref_tps=real_tokens / same_s, ours_tps=real_tokens / ours_s,
                ratio_fp32=fp32_s / ours_s, ratio=same_s / ours_s, seconds=ours_s, ref_seconds=same_s,
                without_dropout={side: med[(side, precision, 0.0)] for side in ("minibert", "transformers")} if 0.0 in dropouts else None,
                flops_per_s=flops / ours_s, strict_flops_per_s=strict / ours_s,
                split=time_split(lambda: step("minibert", precision, dropout)) if profile else None,
            ))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="mini,base", help="comma-separated: mini, base")
    parser.add_argument("--batches", default="full,padded", help="comma-separated: full, padded")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: train (masked-LM pretraining), finetune "
                        "(sequence classification), infer (the classifier's forward, no_grad)")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated, fp32 first: fp32, bf16 (autocast)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model (after 2 warm-up steps)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="torch.compile minibert's sublayers (compile_sublayers)")
    parser.add_argument("--profile", action="store_true", help="also where one minibert step's time goes (time_split)")
    parser.add_argument("--dropouts", default="0", help="comma-separated dropout on the hidden states and the attention "
                        "probabilities, both sides alike (fine-tuning recipes: 0.1; default 0)")
    args = parser.parse_args()
    dropouts = tuple(float(p) for p in args.dropouts.split(","))
    precisions = tuple(args.precisions.split(","))
    if precisions[0] != "fp32" or not set(precisions) <= set(DTYPES):
        raise SystemExit("--precisions: fp32 first, then bf16 if wanted (e.g. fp32,bf16)")
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}, torch {torch.__version__}")
    # The machine's speed drifts: the peaks are re-measured before every row and after the last,
    # and MFU is taken against the best of those, so that a slow moment cannot inflate it.
    peaks, results = {p: [] for p in precisions}, []
    label = (lambda r: f" dropout {r['dropout']:g}") if dropouts != (0.0,) else (lambda r: "")
    for mode in args.modes.split(","):
        for name in args.shapes.split(","):
            for batch in args.batches.split(","):
                for precision in precisions:
                    peaks[precision].append(matmul_peak(args.threads, precision=precision))
                rows = run_shape(name, batch == "padded", args.steps, args.threads, args.compile, mode, precisions, args.profile,
                                 dropouts)
                results += rows
                print(f"  {mode} {name} {batch}: " + ", ".join(f"{r['precision']}{label(r)} {r['ratio_fp32']:.2f}× "
                                                               f"transformers fp32" for r in rows) + f" (load {os.getloadavg()[0]:.1f})",
                      flush=True)
    for precision in precisions:
        peaks[precision].append(matmul_peak(args.threads, precision=precision))
    peak = {precision: max(found) for precision, found in peaks.items()}
    for precision, found in peaks.items():
        print(f"{precision} matmul peak {peak[precision] / 1e9:.0f} GFLOP/s (a 2048² matmul, best of {len(found)} "
              f"measurements, lowest {min(found) / 1e9:.0f})")
    column = " dropout |" if dropouts != (0.0,) else ""  # the models' dropout, where --dropouts names one

    def cells(r: dict) -> str:
        return f"| {r['mode']} | {r['shape']} | {r['batch']} | {r['precision']} |" + (f" {r['dropout']:g} |" if column else "")

    print(f"| mode | shape | batch | precision |{column} real tokens | minibert tok/s | × transformers fp32 | × transformers, same "
          "precision | minibert ms/step | minibert MFU | strict MFU |")
    print("|---|---|---|---|" + "---|" * (7 + bool(column)))
    for r in results:
        share = 100 / peak[r["precision"]]
        print(f"{cells(r)} {r['real_tokens']} | {r['ours_tps']:.0f} | {r['ratio_fp32']:.2f}× | {r['ratio']:.2f}× "
              f"| {1000 * r['seconds']:.0f} | {share * r['flops_per_s']:.0f}% | {share * r['strict_flops_per_s']:.0f}% |")
    costs = [r for r in results if r["dropout"] and r["without_dropout"] and r["mode"] != "infer"]  # inference runs no dropout
    if costs:
        print()  # each side's step with dropout against its own step without, measured in the same turns
        print("| mode | shape | batch | precision | dropout | minibert ms/step | without dropout | dropout's cost | transformers "
              "ms/step | without dropout | dropout's cost | minibert's speed-up, same dropout |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in costs:
            ours, theirs = r["without_dropout"]["minibert"], r["without_dropout"]["transformers"]
            print(f"{cells(r)} {1000 * r['seconds']:.0f} | {1000 * ours:.0f} | {r['seconds'] / ours:.2f}× "
                  f"| {1000 * r['ref_seconds']:.0f} | {1000 * theirs:.0f} | {r['ref_seconds'] / theirs:.2f}× | {r['ratio']:.2f}× |")
    if args.profile:
        print()
        print(f"| mode | shape | batch | precision |{column} " + " | ".join(f"{g} %" for g in [*WORK, "other"]) + " |")
        print("|---|---|---|---|" + "---|" * (len(WORK) + 1 + bool(column)))
        for r in results:
            print(f"{cells(r)} " + " | ".join(f"{100 * share:.0f}" for share in r["split"].values()) + " |")


if __name__ == "__main__":
    main()
