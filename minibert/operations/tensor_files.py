"""Checkpoint files: read and write tensors by name, one at a time, with every name accounted for.

The loader is generic: it is handed `names`, a map from each of our parameters to the checkpoint
tensor(s) it is made of (a family table, or the identity for minibert's own format), and it
- refuses a checkpoint that lacks a tensor, has one nobody asked for (unless `tolerated`), or
  has one of the wrong shape — each error names the tensor;
- builds the model on the meta device (shapes, no memory) and copies each checkpoint tensor once
  into the parameter it becomes (`assign=True`): memory peaks near twice the checkpoint (the
  file's mapped pages plus the parameters) and settles at one copy.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from .files import publish_file, read_json_object

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
PICKLE_FILE = "pytorch_model.bin"
SHOWN = 5  # how many names an error message lists
# LayerNorm parameters as TensorFlow-era checkpoints name them, read under today's names
LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}


class TensorFile:
    """The tensors of one checkpoint file, by (modernised) name; `take` reads one of them."""

    def __init__(self, path: Path, stored_names, read):
        self.path = path
        self.stored = {modern_name(n): n for n in stored_names}
        self._read = read

    def names(self) -> set[str]:
        return set(self.stored)

    def take(self, name: str) -> torch.Tensor:
        return self._read(self.stored[name])


@contextmanager
def open_tensors(directory: Path) -> Iterator[TensorFile]:
    """model.safetensors (memory-mapped), else pytorch_model.bin read with weights_only=True."""
    if (directory / SAFETENSORS_FILE).is_file():
        path = directory / SAFETENSORS_FILE
        try:
            handle = safe_open(path, framework="pt")
        except SafetensorError as error:
            raise ValueError(f"{path} is not a readable safetensors file ({error})") from None
        with handle:
            yield TensorFile(path, handle.keys(), handle.get_tensor)
    elif (directory / PICKLE_FILE).is_file():
        path = directory / PICKLE_FILE
        state = load_pickle(path)
        yield TensorFile(path, list(state), state.pop)  # pop: hand each tensor over, keep no second copy
    else:
        raise FileNotFoundError(f"{directory} holds neither {SAFETENSORS_FILE} nor {PICKLE_FILE}; pass a checkpoint directory")


def load_pickle(path: Path) -> dict[str, torch.Tensor]:
    """A pickled state dict, unpickling tensors only: a .bin file can otherwise run arbitrary code."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        reason = str(error).strip().splitlines()[0]
        raise ValueError(
            f"{path} holds objects other than tensors, which torch.load(weights_only=True) refuses to "
            f"unpickle ({reason}); convert it to {SAFETENSORS_FILE} from a trusted environment"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} is not a state dict (a dict of name -> tensor)")
    return state


def modern_name(name: str) -> str:
    for old, new in LEGACY_SUFFIXES.items():
        if name.endswith(old):
            return name.removesuffix(old) + new
    return name


def load_tensors(
    model: nn.Module, names: dict[str, tuple[str, ...]], tensors: TensorFile, tolerated: tuple[str, ...]
) -> None:
    """Fill `model` (built on the meta device) from `tensors`, checking every name and shape."""
    wanted = {reference for references in names.values() for reference in references}
    present = tensors.names()
    missing = sorted(wanted - present)
    if missing:
        raise ValueError(f"{tensors.path} lacks tensor(s) {listing(missing)} that its config.json implies")
    unexpected = sorted(n for n in present - wanted if not any(inside(n, t) for t in tolerated))
    if unexpected:
        raise ValueError(
            f"{tensors.path} has unexpected tensor(s) {listing(unexpected)}: they map onto nothing in this "
            f"model; minibert loads only checkpoints it can map completely"
        )
    state = {}
    for ours, target in model.state_dict().items():
        references = names[ours]
        part_shape = (target.shape[0] // len(references), *target.shape[1:])
        parts = []
        for reference in references:
            tensor = tensors.take(reference)
            if tuple(tensor.shape) != part_shape:
                raise ValueError(
                    f"{tensors.path}: tensor {reference!r} has shape {tuple(tensor.shape)}, "
                    f"but its config.json implies {part_shape}"
                )
            parts.append(tensor)
        # cat copies even one part: a parameter owns its memory and never aliases the file.
        state[ours] = torch.cat(parts).to(torch.float32)
    model.load_state_dict(state, assign=True)


def save_tensors(
    model: nn.Module, names: dict[str, tuple[str, ...]], path: Path, computed: dict[str, torch.Tensor] | None = None
) -> None:
    """Write `model`'s parameters under the checkpoint names (a fused tensor is split back),
    plus `computed` tensors that are no parameter of ours (RoFormer's table of angles)."""
    tensors = dict(computed or {})
    for ours, value in model.state_dict().items():
        references = names[ours]
        parts = value.detach().cpu().contiguous().chunk(len(references))
        for reference, part in zip(references, parts):
            # The parts of a split share memory, which safetensors refuses: give each its own.
            tensors[reference] = part.clone() if len(parts) > 1 else part
    publish_file(lambda tmp: save_file(tensors, tmp, metadata={"format": "pt"}), path)


def read_json(path: Path) -> dict:
    """One JSON file of a checkpoint folder (its config, its labels), checked."""
    return read_json_object(path, f"a checkpoint directory holds {CONFIG_FILE} and its weights")


def inside(name: str, path: str) -> bool:
    """Is tensor `name` the module or parameter `path`, or inside it?"""
    return name == path or name.startswith(path + ".")


def listing(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
