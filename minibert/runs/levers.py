"""Two levers a run at scale reaches for, each a flag and off by default; neither changes
what a step computes (same losses and gradients, tests/test_levers.py).

    --compile                  torch.compile on the LAYERS: each attention and feed-forward
                               sublayer (residual and LayerNorm included) of every encoder.
                               The data-dependent parts of a step stay eager around them: the
                               masked positions' gather (`needed`), unpadding, the losses.
                               Batches are cut to their longest example, so lengths vary from
                               batch to batch: the sublayers compile with dynamic shapes (one
                               graph for every length) instead of once per length.
    --checkpoint-activations   each layer's activations recomputed in the backward instead of
                               kept (torch.utils.checkpoint, in `Encoder.forward`'s layer
                               loop): memory for one layer's activations, not every layer's,
                               for about one more forward of compute.
"""

from __future__ import annotations

from torch import nn

from ..model import Encoder


def use_levers(module: nn.Module, *, compile: bool = False, checkpoint_activations: bool = False) -> None:
    """Switch the levers on in every encoder `module` holds (ELECTRA's generator, a teacher)."""
    if not (compile or checkpoint_activations):
        return
    for encoder in (m for m in module.modules() if isinstance(m, Encoder)):
        encoder.checkpoint_activations = checkpoint_activations
        if compile:
            for sublayer in (*encoder.attention, *encoder.feed_forward):
                sublayer.compile(dynamic=True)
