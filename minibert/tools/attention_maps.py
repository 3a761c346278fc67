"""Look inside a pretrained encoder: where each token's attention goes, drawn as heatmaps.

    python -m minibert attention checkpoints/albert "The cat sat on the mat." --out attention.png
    python -m minibert attention DIR "TEXT" --layer 0 --head 1 --out head.png

`attention_maps` runs the encoder with `output_attentions=True` (`Encoder.forward`): every
layer's attention probabilities [heads, T, T], row i = how query token i spreads its
attention over the key tokens (each row sums to 1). `draw_attention` plots one layer's
heads side by side, the tokens on both axes. matplotlib is needed only to draw
(`pip install matplotlib`, or the package's `viz` extra); nothing else in minibert uses it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..pretrained import from_pretrained
from ..runs.pictures import picture_path, pyplot, save_figure
from ..tokenizers import load_tokenizer


def attention_maps(checkpoint: str | Path, text: str) -> tuple[list[str], torch.Tensor]:
    """(the text's tokens, specials included; attention probabilities [layers, heads, T, T])."""
    encoder, tokenizer = from_pretrained(checkpoint), load_tokenizer(checkpoint)
    batch = tokenizer.batch([text])
    tokens = [tokenizer.piece(int(i)) for i in batch["input_ids"][0]]
    return tokens, attention_probabilities(encoder, batch)


def attention_probabilities(encoder, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Every layer's attention probabilities for the first sequence of a batch [layers, heads, T, T]."""
    with torch.no_grad():
        attentions = encoder(**batch, output_attentions=True).attentions  # num_layers × [B, heads, T, T]
    return torch.stack(attentions)[:, 0].float()  # [layers, heads, T, T]


def pick(count: int, index: int | None, what: str) -> range:
    """The layers or heads to draw: all (index None), or the one asked for (negative = from the end)."""
    if index is None:
        return range(count)
    if not -count <= index < count:
        raise ValueError(f"--{what} {index} does not exist: the model has {count} {what}s, numbered 0 to {count - 1}")
    return range(index % count, index % count + 1)


def draw_attention(tokens: list[str], probs: torch.Tensor, out: str | Path, layer: int = -1, head: int | None = None,
                   title: str | None = None) -> Path:
    """One heatmap per head of `layer` (or only `head`), queries down, keys across; saved to `out`."""
    plt = pyplot("drawing attention")
    out = picture_path(out)
    (layer,) = pick(probs.shape[0], layer, "layer")
    heads = pick(probs.shape[1], head, "head")
    size = 0.9 + 0.28 * len(tokens)  # inches per heatmap: room for one label per token
    figure, axes = plt.subplots(1, len(heads), figsize=(size * len(heads), size + 0.6), squeeze=False)
    brightest = float(probs[layer].max())  # one colour scale for the layer: heads compare at a glance
    for ax, h in zip(axes[0], heads):
        ax.imshow(probs[layer, h].numpy(), cmap="viridis", vmin=0.0, vmax=brightest)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
        ax.set_xlabel("key (attended to)")
        ax.set_title(f"layer {layer}, head {h}", fontsize=9)
    axes[0][0].set_ylabel("query (attending)")
    return save_figure(plt, figure, out, title, dpi=80)
