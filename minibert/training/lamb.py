"""LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes", Algorithm 2): Adam's step, rescaled layer by layer. ALBERT's optimizer.

    m ← β1·m + (1 − β1)·g            v ← β2·v + (1 − β2)·g²          (Adam's moments)
    r = m̂ / (√v̂ + ε)                 m̂, v̂: bias-corrected by 1 − β^t
    u = r + λ·x                       decoupled weight decay, as AdamW
    x ← x − η · (‖x‖ / ‖u‖) · u      the trust ratio: 1 where either norm is 0

Each parameter tensor (a "layer") moves by η times its own norm, whatever the gradient's
scale: what lets BERT train at batches of 32k-64k sequences without its lr diverging. Every
quantity stays on the device (the trust ratio is a `torch.where`), so a step reads nothing back.
"""

from __future__ import annotations

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else torch.enable_grad()(closure)()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for x in (p for p in group["params"] if p.grad is not None):
                state = self.state[x]
                if not state:
                    state.update(step=0, m=torch.zeros_like(x), v=torch.zeros_like(x))
                state["step"] += 1
                m, v, t, g = state["m"], state["v"], state["step"], x.grad
                m.mul_(beta1).add_(g, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                update = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + group["eps"])
                update.add_(x, alpha=group["weight_decay"])
                weight_norm, update_norm = x.norm(), update.norm()
                trust = torch.where((weight_norm > 0) & (update_norm > 0), weight_norm / update_norm, 1.0)
                x.sub_(group["lr"] * trust * update)
        return loss
