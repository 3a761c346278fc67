"""Forward + backward speed of minibert's Triton varlen FlashAttention against torch SDPA.

Usage (CUDA machine): python bench/attention.py
       (any machine):  python bench/attention.py --dry-run   (tiny shapes on the CPU through Triton's
       interpreter, so that this script is exercised where no GPU is; its numbers mean nothing)
Prints a markdown table at BERT-base attention shapes (12 heads, head_dim 64, bf16) for batches
of 32-256 sequences of up to 128-1024 tokens, with 0% and ~50% padding. Three contenders:
  * ours: flash_attention on the packed real tokens (no padding computed at all);
  * SDPA flash, no mask: the padded batch through torch's flash kernel with no mask. With
    padding this is not a correct result (pads are attended to); it is the speed the flash
    kernel would have if it could skip nothing;
  * SDPA + mask: the padded batch with a key-padding mask, the correct SDPA call for BERT
    (torch cannot use its flash kernel with a mask and picks another backend).
TFLOP/s counts only the real tokens' work for every column, 4 * n^2 * heads * head_dim per
sequence of n tokens forward and 3.5 times that forward + backward (the backward does 5 of the
forward's 2 matmuls' worth), so time spent on padding shows up as lost throughput.
"""

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

HEADS, HEAD_DIM, DTYPE = 12, 64, torch.bfloat16
SHAPES = [(256, 128), (128, 256), (64, 512), (32, 1024), (256, 512)]  # (batch, max length)
DRY_RUN_SHAPES, DRY_RUN_HEADS = [(2, 32)], 2  # the interpreter runs each program in Python
PADDINGS = (0.0, 0.5)


def sequence_lengths(batch, max_len, padding, generator):
    """Uniform lengths in [(1 - 2 * padding) * max_len, max_len], mean padding ~ `padding`;
    the first is max_len so max_seqlen is the same for every contender."""
    low = max(1, round((1 - 2 * padding) * max_len))
    lengths = torch.randint(low, max_len + 1, (batch,), generator=generator)
    lengths[0] = max_len
    return lengths


def forward_backward(attend, inputs, grad):
    """A closure running attend(*inputs) and its backward, without accumulating into .grad."""
    return lambda: torch.autograd.grad(attend(*inputs), inputs, grad)


def cpu_median_ms(run, repeats=1):
    """The dry run's stand-in for triton.testing.do_bench, which needs CUDA."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU (Triton interpreter); numbers mean nothing")
    args = parser.parse_args(argv)
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are defined, at the first call
    elif not torch.cuda.is_available():
        sys.exit("bench/attention.py needs a CUDA GPU; torch.cuda.is_available() is False here (or pass --dry-run)")
    import triton
    import triton.testing
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from minibert.kernels import flash_attention

    device = "cpu" if args.dry_run else "cuda"
    shapes, heads = (DRY_RUN_SHAPES, DRY_RUN_HEADS) if args.dry_run else (SHAPES, HEADS)
    milliseconds_of = cpu_median_ms if args.dry_run else lambda run: triton.testing.do_bench(run, return_mode="median")
    generator = torch.Generator().manual_seed(0)
    card = "CPU dry run" if args.dry_run else torch.cuda.get_device_name()
    print(f"Attention forward+backward, TFLOP/s of real-token work. {card}, "
          f"{datetime.date.today()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"bf16, {heads} heads x {HEAD_DIM}.\n")
    print("| batch | max len | padding | ours | SDPA flash, no mask | SDPA + mask | ours / flash | ours / mask "
          "| max abs diff vs SDPA + mask |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch, max_len in shapes:
        for padding in PADDINGS:
            lengths = sequence_lengths(batch, max_len, padding, generator)
            real = (torch.arange(max_len) < lengths[:, None]).to(device)  # [batch, max_len]
            cu_seqlens = F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32).to(device)
            padded = [torch.randn(batch, max_len, heads, HEAD_DIM, device=device, dtype=DTYPE).requires_grad_()
                      for _ in range(3)]
            packed = [t.detach()[real].requires_grad_() for t in padded]  # [tokens, heads, head_dim]
            key_mask = real[:, None, None, :]  # [batch, 1, 1, max_len]: attend to real keys only

            def ours(q, k, v):
                return flash_attention(q, k, v, cu_seqlens, max_len)

            def sdpa_flash(q, k, v):
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))

            def sdpa_masked(q, k, v):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      attn_mask=key_mask)

            with torch.no_grad():
                expected = sdpa_masked(*padded).transpose(1, 2)[real]
                diff = (ours(*packed).float() - expected.float()).abs().max().item()
            flops = 3.5 * 4 * heads * HEAD_DIM * (lengths.double() ** 2).sum().item()
            tflops = []
            for attend, inputs in ((ours, packed), (sdpa_flash, padded), (sdpa_masked, padded)):
                grad = torch.randn_like(attend(*inputs))
                run = forward_backward(attend, inputs, grad)
                run()  # compile and autotune outside the timing
                milliseconds = milliseconds_of(run)
                tflops.append(flops / (milliseconds * 1e-3) / 1e12)
            real_padding = 1 - lengths.sum().item() / (batch * max_len)
            print(f"| {batch} | {max_len} | {real_padding:.0%} | {tflops[0]:.0f} | {tflops[1]:.0f} | {tflops[2]:.0f} "
                  f"| {tflops[0] / tflops[1]:.2f} | {tflops[0] / tflops[2]:.2f} | {diff:.1e} |", flush=True)
            del padded, packed, real, key_mask
            if device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
