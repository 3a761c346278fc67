"""Data-parallel training with the same script: `torchrun --nproc_per_node=N train.py ...`.

torchrun starts N copies and tells each its RANK, WORLD_SIZE and LOCAL_RANK. Each copy
holds the whole model, reads its own disjoint share of the batches, and PyTorch's
DistributedDataParallel averages the gradients during backward — so all copies take the
same optimizer step. Only rank 0 writes files and prints.

With gradient accumulation, averaging after every micro-step would be wasted
communication: the loop (loop.py) asks DDP for it on the last micro-step of a step only.
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    enabled: bool = field(init=False)  # more than one process (attributes, not properties: the step reads them)
    is_main: bool = field(init=False)  # rank 0: the one that writes files and prints

    def __post_init__(self):
        self.enabled, self.is_main = self.world_size > 1, self.rank == 0

    def device(self, kind: str) -> torch.device:
        """auto/cpu/cuda/mps -> this process's device (its own GPU under torchrun)."""
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda was asked for but no CUDA GPU is available; use --device cpu")
        if kind == "mps":
            return mps_device()
        if kind == "cpu" or (kind == "auto" and not torch.cuda.is_available()):
            return torch.device("cpu")
        torch.cuda.set_device(self.local_rank)
        return torch.device("cuda", self.local_rank)

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """DDP around `model` (the model itself in one process). A model whose `unused_parameters`
        is True has a parameter that gets no gradient (a pooler that no sentence task reads,
        RoBERTa's recipe), so DDP must look for it — a pass over the graph every step, asked for
        only then."""
        if not self.enabled:
            return model
        ids = [device.index] if device.type == "cuda" else None
        unused = getattr(model, "unused_parameters", False)
        return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=unused)

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.enabled:
            dist.all_reduce(tensor)
        return tensor

    def broadcast_float(self, value: float) -> float:
        """Rank 0's `value` on every rank (e.g. its clock, so all stop a --budget run together)."""
        if not self.enabled:
            return value
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        tensor = torch.tensor([value], dtype=torch.float64, device=device)
        dist.broadcast(tensor, src=0)
        return float(tensor)

    def gather(self, value) -> list:
        """Every rank's `value` (small, e.g. its RNG and data position), on every rank."""
        if not self.enabled:
            return [value]
        values = [None] * self.world_size
        dist.all_gather_object(values, value)
        return values

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def mps_device() -> torch.device:
    """Apple's GPU, when this torch build and machine have it; asked for explicitly, never chosen by auto."""
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        built = mps is not None and mps.is_built()
        why = "this Mac's GPU is not usable (macOS 12.3+ needed)" if built else "this torch build or machine has no MPS (Apple GPU) support"
        raise ValueError(f"--device mps was asked for but {why}; use --device cpu")
    return torch.device("mps")


def setup(device_kind: str, timeout_s: float = 1800) -> Distributed:
    """Join the process group when started by torchrun; a no-op for a single process. `timeout_s`:
    how long a process waits for the others at a collective (rank 0 building the data cache)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Distributed()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_nccl = device_kind != "cpu" and torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if use_nccl else "gloo", timeout=timedelta(seconds=timeout_s))
    return Distributed(rank, world_size, local_rank)


@contextlib.contextmanager
def rank_0_prints(dist: Distributed):
    """Only rank 0's lines reach the screen: every process runs the same command."""
    if dist.is_main:
        yield
        return
    with open(os.devnull, "w") as silent, contextlib.redirect_stdout(silent):
        yield


def in_shards(n: int, predict, dist: Distributed) -> list:
    """`predict(rows)` -> one result per row, for all `n` dev rows, in order, on every process:
    under torchrun each process predicts every world_size-th row from its rank on, and the
    shares are gathered, so dev is read once in all rather than once per process."""
    shares = dist.gather(predict(list(range(dist.rank, n, dist.world_size))))
    results = [None] * n
    for rank, share in enumerate(shares):
        results[rank::dist.world_size] = share
    return results
