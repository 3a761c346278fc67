"""Training state without pickle: what exact resume needs, as JSON + safetensors.

Resuming a run EXACTLY means restoring everything its future depends on: the weights,
the optimizer's moments, the step (the schedule is a function of it), every random
generator (dropout, masks, ELECTRA's samples) and the position in the data. These come
as nested dicts, lists and tuples of numbers, strings, numpy arrays and tensors.

`encode` splits such a value into a JSON document and a flat {name: tensor} dict for
safetensors; `decode` puts it back together. Unlike pickle, neither file can run code
when it is loaded, and both stay readable with ordinary tools.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn


def encode(value, tensors: dict[str, torch.Tensor], path: str = "state"):
    """`value` as JSON-able data; its tensors are moved into `tensors` under their path."""
    if isinstance(value, torch.Tensor):
        tensors[path] = value.detach().cpu().contiguous()
        return {"$tensor": path}
    if isinstance(value, np.ndarray):
        return {"$ndarray": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, tensors, f"{path}.{i}") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode(v, tensors, f"{path}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, tensors, f"{path}.{k}") for k, v in value.items()}
        return {"$items": [[encode(k, tensors, f"{path}.key{i}"), encode(v, tensors, f"{path}.{i}")]
                           for i, (k, v) in enumerate(value.items())]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__} in a checkpoint without pickle")


def decode(value, tensors: dict[str, torch.Tensor]):
    """The inverse of `encode`."""
    if isinstance(value, list):
        return [decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if "$tensor" in value:
        return tensors[value["$tensor"]]
    if "$ndarray" in value:
        return np.array(value["$ndarray"], dtype=value["dtype"])
    if "$tuple" in value:
        return tuple(decode(v, tensors) for v in value["$tuple"])
    if "$items" in value:
        return {decode(k, tensors): decode(v, tensors) for k, v in value["$items"]}
    return {k: decode(v, tensors) for k, v in value.items()}


def rng_state() -> dict:
    """Every random generator a step can draw from."""
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() and torch.cuda.is_initialized() else None,
    }


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def trainable_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The parameters that train and the buffers, each shared tensor ONCE (ELECTRA's
    generator and discriminator share embeddings; a frozen teacher is not part of it)."""
    state = {name: p for name, p in module.named_parameters() if p.requires_grad}
    state.update(module.named_buffers())
    return state


def load_trainable_state(module: nn.Module, saved: dict[str, torch.Tensor]) -> None:
    expected = trainable_state(module)
    missing, unexpected = sorted(set(expected) - set(saved)), sorted(set(saved) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"the checkpoint does not fit this model (missing {missing[:3]}, unexpected {unexpected[:3]}); "
            f"resume with the flags the run was started with"
        )
    with torch.no_grad():
        for name, tensor in expected.items():
            if tensor.shape != saved[name].shape:
                raise ValueError(f"the checkpoint's {name} has shape {tuple(saved[name].shape)}, the model's {tuple(tensor.shape)}")
            tensor.copy_(saved[name])
