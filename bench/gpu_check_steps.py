"""The measuring steps of bench/gpu_check.py; each runs in its own process, started by it.

    python bench/gpu_check_steps.py STEP --out DIR [--dry-run]

prints the step's markdown to stdout, writes DIR/STEP.json and exits 1 when a check fails.
STEP is environment, kernel or end_to_end (train_run lives in gpu_check_train.py; the
attention table is bench/attention.py itself). A process per step means a crash, a hang or a
CUDA error in one step cannot take the others down, and each step starts with a clean GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # run from a checkout without installing

# Dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets, TFLOP/s; the first
# name contained in the device's name wins. The T4 has no bf16: its fp16 peak is given.
PEAK_TFLOPS = (("H100 PCIe", 756), ("H100", 989), ("H200", 989), ("GH200", 989), ("A100", 312), ("L40S", 362),
               ("L4", 121), ("T4", 65))


def peak_tflops(device_name: str) -> float | None:
    return next((peak for name, peak in PEAK_TFLOPS if name in device_name), None)


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


# --- environment ------------------------------------------------------------------------------


def environment(dry_run: bool) -> tuple[dict, str, bool]:
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda (torch built with)": torch.version.cuda}
    for package in ("triton", "transformers"):
        try:
            info[package] = __import__(package).__version__
        except ImportError:
            info[package] = "not installed"
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        name = torch.cuda.get_device_name(0)
        peak = peak_tflops(name)
        info.update({"gpu": name, "gpus visible": torch.cuda.device_count(),
                     "compute capability": f"{properties.major}.{properties.minor}",
                     "memory (GiB)": round(properties.total_memory / 2**30, 1),
                     "bf16 supported": torch.cuda.is_bf16_supported(),
                     "dense bf16 peak (TFLOP/s)": peak if peak else "unknown card: add it to PEAK_TFLOPS"})
    else:
        info["gpu"] = "none (CPU only)" + (": dry run" if dry_run else "")
    ok = dry_run or torch.cuda.is_available()
    return info, table(["what", "value"], [[k, v] for k, v in info.items()]), ok


# --- the kernel against the float64 reference ----------------------------------------------------

LENGTHS = [1, 37, 0, 200, 129]  # one token, an empty sequence, lengths off every block size
KERNEL_CASES = [  # (precision, head_dim, heads, lengths, options)
    *[("fp32", d, 2, LENGTHS, {}) for d in (16, 64, 128)],
    ("tf32", 64, 2, LENGTHS, {}),
    *[("bf16", d, 4, LENGTHS, {}) for d in (16, 48, 64, 128)],
    *[("fp16", d, 4, LENGTHS, {}) for d in (16, 80, 128)],
    ("bf16", 64, 2, [1], {}),
    ("fp32", 128, 1, [5, 18], {"max_seqlen": 70, "scale": 0.3}),
    ("fp32", 32, 2, [32, 7], {"dropout_p": 0.25, "seed": 3}),
    ("bf16", 64, 2, [100, 17], {"dropout_p": 0.1, "seed": 4}),
]
DRY_RUN_LENGTHS = [1, 37, 0, 20]
DRY_RUN_CASES = [("fp32", 16, 2, DRY_RUN_LENGTHS, {}), ("tf32", 16, 1, DRY_RUN_LENGTHS, {}),
                 ("bf16", 16, 1, DRY_RUN_LENGTHS, {}), ("fp16", 48, 1, DRY_RUN_LENGTHS, {}), ("bf16", 16, 1, [1], {}),
                 ("fp32", 16, 1, [20, 7], {"dropout_p": 0.25, "seed": 3})]


def kernel(dry_run: bool) -> tuple[dict, str, bool]:
    """Every case as tests/test_flash_attention.py checks it, compiled for the GPU this time."""
    from minibert.kernels.reference import DTYPES, TOLERANCE, kernel_and_reference, tolerance_ratio

    device = "cpu" if dry_run else "cuda"
    rows, results = [], []
    for precision, head_dim, heads, lengths, options in DRY_RUN_CASES if dry_run else KERNEL_CASES:
        tol = TOLERANCE[precision]
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # the kernel's fp32 product mode
        case = {"precision": precision, "head_dim": head_dim, "heads": heads, "lengths": lengths, **options, "tolerance": tol}
        try:
            outputs = kernel_and_reference(lengths, heads, head_dim, DTYPES[precision], device, **options)
            case["ratio"] = {name: tolerance_ratio(got, want, tol) for name, got, want in outputs}
            case["max_abs_error"] = {name: float((got.detach().double() - want.detach()).abs().max()) for name, got, want in outputs}
            case["passed"] = max(case["ratio"].values()) <= 1.0
            errors = " / ".join(f"{error:.1e}" for error in case["max_abs_error"].values())
            worst = f"{max(case['ratio'].values()):.2f}"
        except Exception as error:  # one broken case must not hide the others
            case.update(passed=False, error=f"{type(error).__name__}: {error}")
            errors, worst = case["error"][:120], "-"
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        extra = ", ".join(f"{k} {v}" for k, v in options.items() if k != "seed") or "-"
        rows.append([precision, head_dim, heads, lengths, extra, f"{tol:g}", errors, worst, "pass" if case["passed"] else "FAIL"])
        results.append(case)
    header = ["precision", "head dim", "heads", "lengths", "options", "atol = rtol", "max abs error out / dq / dk / dv",
              "worst error / allowed", "result"]
    note = ("\n\nReference: float64 attention per sequence (minibert/kernels/reference.py). tf32 = fp32 inputs "
            "with torch.backends.cuda.matmul.allow_tf32, which the kernel follows; 'worst error / allowed' is "
            "max |got - want| / (atol + rtol |want|) over out, dq, dk, dv: at most 1 passes.")
    return {"cases": results}, table(header, rows) + note, all(case["passed"] for case in results)


# --- end to end: training tokens/s and MFU at BERT-base shape -----------------------------------

DRY_RUN_SHAPE = dict(hidden=32, layers=2, heads=2, ffn=64, vocab=100, length=16, batch=4)


def with_attention(model, backend: str):
    """The same weights behind another attention backend (the backend is fixed at construction)."""
    twin = type(model)(model.config.replace(attention_backend=backend))
    twin.load_state_dict(model.state_dict())
    return twin


def end_to_end(dry_run: bool) -> tuple[dict, str, bool]:
    """minibert (triton), minibert (sdpa) and transformers' BertForMaskedLM (sdpa) with the same
    weights and batch, bf16 autocast, taking turns step by step (drift hits all alike)."""
    from throughput import SHAPES, build_pair, make_batch, shape_config

    from minibert.runs.flops import BatchShape, training_flops
    from minibert.operations.precision import Precision

    device = torch.device("cpu" if dry_run else "cuda")
    shape = DRY_RUN_SHAPE if dry_run else {**SHAPES["base"], "batch": 128}
    warmup, steps = (1, 1) if dry_run else (3, 15)
    with tempfile.TemporaryDirectory() as tmp:
        reference, ours = build_pair(shape, tmp)
    models = {"minibert triton": with_attention(ours, "triton"), "minibert sdpa": with_attention(ours, "sdpa"),
              "transformers sdpa": reference}
    models = {key: model.to(device).train() for key, model in models.items()}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True) for name, m in models.items()}
    amp = Precision("bf16", device)
    name = "CPU dry run" if dry_run else torch.cuda.get_device_name()
    peak = None if dry_run else peak_tflops(name)

    def step(key, ids, mask, labels):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with amp.autocast:
            loss = models[key](input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizers[key].step()
        optimizers[key].zero_grad(set_to_none=True)
        value = loss.item()  # waits for the GPU
        return time.perf_counter() - start, value

    rows, results, ok = [], [], True
    for padded in (False, True):
        ids, mask, labels = (t.to(device) for t in make_batch(shape, padded))
        times, first_loss = {k: [] for k in models}, {}
        order = list(models)
        for i in range(warmup + steps):
            for key in order[i % len(order):] + order[:i % len(order)]:  # a different model goes first each round
                seconds, loss = step(key, ids, mask, labels)
                first_loss.setdefault(key, loss)
                if i >= warmup:
                    times[key].append(seconds)
        tokens = int(mask.sum())
        flops = training_flops(shape_config(shape), BatchShape.of(mask.cpu(), labels.cpu()))
        spread = max(first_loss.values()) - min(first_loss.values())
        agree = spread <= 0.05 * max(1.0, abs(first_loss["transformers sdpa"]))  # same weights, bf16 noise
        ok &= agree
        padding = 1 - tokens / mask.numel()
        for key in models:
            median = statistics.median(times[key])
            mfu = f"{100 * flops / median / (peak * 1e12):.0f}%" if peak else "unknown peak"
            results.append({"model": key, "padding": padding, "tokens_per_s": tokens / median, "median_s": median,
                            "first_loss": first_loss[key], "mfu": mfu, "losses_agree": agree})
            rows.append([key, f"{padding:.0%}", f"{tokens / median:,.0f}", f"{1e3 * median:.1f}", mfu,
                         f"{first_loss[key]:.4f}"])
    header = ["model", "padding", "tokens/s", "ms/step", "MFU", "first loss"]
    note = (f"\n\n{name}; shape {shape}; bf16 autocast; forward + backward + fused AdamW, {steps} timed steps after "
            f"{warmup} warm-up, median; models interleaved. MFU = minibert.runs.flops.training_flops (real tokens "
            f"only, decoder at masked positions only) / dense bf16 peak ({peak or 'unknown'} TFLOP/s). "
            f"First losses agree within 5%: {ok}.")
    return {"device": name, "shape": shape, "peak_tflops": peak, "rows": results}, table(header, rows) + note, ok


# --- the levers: compile, checkpointing, and the loop's host reads under sync debug mode -----------


def levers(dry_run: bool) -> tuple[dict, str, bool]:
    """--compile and --checkpoint-activations beside the plain step (bench/levers.py, on the GPU),
    and the training loop's synchronisations counted by torch.cuda.set_sync_debug_mode."""
    import argparse

    from levers import measure

    device = "cpu" if dry_run else "cuda"
    shape = dict(hidden=32, layers=1, heads=2, length=16, batch=4, steps=3, vocab=100, threads=1) if dry_run else \
        dict(hidden=768, layers=12, heads=12, length=512, batch=32, steps=8, vocab=30522, threads=1)
    rows = [measure(argparse.Namespace(**shape), lever, device) for lever in ("none", "compile", "checkpoint")]
    losses_agree = all(abs(r["loss"] - rows[0]["loss"]) <= 0.02 * abs(rows[0]["loss"]) for r in rows)
    syncs = loop_syncs(device)
    markdown = table(["lever", "step (ms)", "first step (s)", "activations kept (MB)", "peak memory (MB)", "loss"],
                     [[r["lever"], f"{1e3 * r['step_s']:.0f}", f"{r['first_step_s']:.1f}", f"{r['saved_activations_mb']:.0f}",
                       f"{r['peak_rss_mb']:.0f}", f"{r['loss']:.4f}"] for r in rows])
    markdown += (f"\n\nshape {shape}, {device}; losses agree within 2%: {losses_agree}. The training loop's own "
                 f"synchronisations over 6 steps (torch.cuda.set_sync_debug_mode, warnings raised in training/loop.py): "
                 f"{syncs if syncs is not None else 'not measured on the CPU'} (expected: the logging step's 2).")
    ok = losses_agree and (syncs is None or syncs <= 2)
    return {"shape": shape, "rows": rows, "loop_syncs": syncs}, markdown, ok


def loop_syncs(device: str) -> int | None:
    """Synchronisations raised in training/loop.py over 6 steps whose last alone logs (None on the CPU)."""
    if device != "cuda":
        return None
    import warnings

    from minibert.config import ModelConfig
    from minibert.heads import MaskedLM
    from minibert.operations.distributed import Distributed
    from minibert.operations.precision import Precision
    from minibert.training.loop import Progress, train
    from minibert.training.settings import LoopSettings
    from minibert.training.optimizer import build_optimizer
    from minibert.runs.metrics import MetricsLog

    class Objective(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = MaskedLM(ModelConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256))

        def forward(self, batch):
            loss = self.model(**batch).loss
            return loss, {"mlm_loss": loss.detach()}

    ids = torch.randint(5, 1000, (8, 64))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.where(torch.rand(ids.shape) < 0.15, ids, -100)}
    module = Objective().cuda()
    loop = LoopSettings(steps=6, lr=1e-4, warmup=0.1, weight_decay=0.01, clip=1.0, seed=0, log_every=100,
                        eval_every=100, save_every=100)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            train(module, build_optimizer(module, lr=1e-4, weight_decay=0.01), [iter([batch] * 6)], None, loop, Progress(),
                  dist=Distributed(), device=torch.device("cuda"), amp=Precision("bf16", torch.device("cuda")),
                  log=MetricsLog(Path(tmp) / "metrics.jsonl"))
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum(1 for w in caught if w.filename.endswith(str(Path("training", "loop.py"))))


STEPS = {"environment": environment, "kernel": kernel, "end_to_end": end_to_end, "levers": levers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=STEPS)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    record, markdown, ok = STEPS[args.step](args.dry_run)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.step}.json").write_text(json.dumps({"ok": ok, **record}, indent=2, default=str) + "\n")
    print(markdown, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
