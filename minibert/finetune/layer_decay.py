"""Layer-wise learning-rate decay (`--layer-decay D`): lower layers move less while fine-tuning.

ELECTRA fine-tunes with it (Clark et al., 2020, appendix): the layers nearest the input hold
the most general features, so each layer below the top trains at D times the lr of the one
above it. Here the head, the pooler and a pre-LN model's final LayerNorm train at the lr;
so does the top layer; layer d of L (0 = the lowest) at lr × D^(L-1-d); the embeddings
(and ALBERT's or ELECTRA-Small's E -> H projection) at lr × D^L, the lowest of all.

(ELECTRA counts its task head as one more layer, so its top layer trains at lr × D; its
released code at lr × D², counting a pooler there too: google-research/electra#51.)
"""

from __future__ import annotations

from torch import nn

from ..model import Encoder


def layer_lr_scales(module: nn.Module, encoder: Encoder, decay: float) -> dict[str, float]:
    """The lr factor of every parameter of `module` (named as `module.named_parameters()`
    names it), whose encoder is `encoder`: D^(depth below the top layer), 1 for what sits on
    top of the encoder.

    A shared layer (ALBERT: one attention and one feed-forward sublayer applied at every
    depth) is ONE set of parameters, so it gets one lr: that of the highest depth it serves,
    the top's for ALBERT's layers shared across all depths. Sharing only the attention (or
    only the feed-forward) sublayers decays the unshared ones per depth as usual."""
    depth = encoder.config.num_layers
    factor = {}
    for part in (encoder.embeddings, encoder.embedding_projection):
        for p in part.parameters() if part is not None else ():
            factor[id(p)] = decay ** depth
    for sublayers in (encoder.attention, encoder.feed_forward):
        n = len(sublayers)  # depth for unshared layers, 1 for shared ones: module i serves depths i, i + n, ...
        for i, sublayer in enumerate(sublayers):
            highest = i + n * ((depth - 1 - i) // n)
            for p in sublayer.parameters():
                factor[id(p)] = decay ** (depth - 1 - highest)
    return {name: factor.get(id(p), 1.0) for name, p in module.named_parameters()}
