"""The optimizer a run steps: AdamW, or ALBERT's LAMB (lamb.py), with BERT's no-decay groups."""

from __future__ import annotations

import torch

from .lamb import Lamb


def build_optimizer(model: torch.nn.Module, *, lr: float, weight_decay: float, optimizer: str = "adamw",
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6, lr_scales: dict | None = None) -> torch.optim.Optimizer:
    """AdamW (or ALBERT's LAMB, lamb.py) at peak `lr`, decaying the matrices by `weight_decay` and nothing else.

    Weight decay pulls weights towards zero, which regularises matrices; but biases and
    LayerNorm gains only shift and scale, and decaying them just fights the normalisation.
    They are exactly the 1-D parameters, so they form the no-decay group (BERT's exclusions).
    `betas` and `eps` are Adam's (RoBERTa: β2 0.98, for stability at large batches).

    `lr_scales`: {parameter name: lr factor}, fine-tuning's layer-wise decay (finetune/layer_decay.py).
    Each group then carries its factor ("lr_scale"), and a hook run before each update multiplies
    the group's lr by it: the loop sets every group to the schedule's lr and knows nothing of it.
    """
    trainable = [((lr_scales or {}).get(name, 1.0), p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for s, p in trainable if s == scale and (p.ndim >= 2) == matrix],  # not matrix: biases, LayerNorm
               "weight_decay": weight_decay if matrix else 0.0, **({"lr_scale": scale} if lr_scales else {})}
              for scale in dict.fromkeys(s for s, _ in trainable) for matrix in (True, False)]  # two groups per lr factor
    kind = Lamb if optimizer == "lamb" else torch.optim.AdamW
    built = kind(groups, lr=lr, betas=tuple(betas), eps=eps)
    if lr_scales:
        built.register_step_pre_hook(scale_lrs)
    return built


def scale_lrs(optimizer: torch.optim.Optimizer, args, kwargs) -> None:
    """Before an update: each group's lr (the schedule's, set by the loop before every step) times
    the group's own factor. A skipped update runs no hook, and the next step sets the lr afresh."""
    for group in optimizer.param_groups:
        group["lr"] *= group["lr_scale"]
