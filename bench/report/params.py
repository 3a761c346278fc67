"""Section 1 — parameters: what ALBERT's factorization and sharing save (tight memory)."""

from __future__ import annotations

from pathlib import Path

from minibert import ModelConfig
from minibert.config import PRESETS
from minibert.runs.flops import BatchShape, encoder_flops

from .budget import Budget
from .measure import count_parameters

NAME = "params"
TITLE = "1. Parameters: what ALBERT saves (tight memory)"
TASKS = ()  # nothing is trained or fine-tuned
ALBERT_VOCAB = 30000
ABLATION = (  # (label, changes to BERT-base's shape with ALBERT's vocabulary); the order is read below
    ("BERT-base shape, V=30000: no factorization, no sharing", {}),
    ("factorization alone (E=128)", dict(embedding_size=128)),
    ("sharing alone (all layers)", dict(share_layers="all")),
    ("both (= albert-base)", dict(embedding_size=128, share_layers="all")),
    ("factorization + attention-only sharing", dict(embedding_size=128, share_layers="attention")),
    ("factorization + FFN-only sharing", dict(embedding_size=128, share_layers="ffn")),
)


def plan(budget: Budget) -> str:
    return "none (counted on the meta device, no weights allocated)."


def compute(budget: Budget, runs: Path, jobs: int = 1) -> dict:
    presets = [{"name": name, "parameters": count_parameters(ModelConfig.preset(name))} for name in PRESETS]
    base = ModelConfig.preset("bert-base", vocab_size=ALBERT_VOCAB)
    rows = [{"name": name, "parameters": count_parameters(base.replace(**changes))} for name, changes in ABLATION]
    both = base.replace(**ABLATION[3][1])
    sequence = BatchShape.uniform(1, 128)
    return {"presets": presets, "ablation": rows,
            "shape": {"hidden": base.hidden_size, "layers": base.num_layers, "ffn": base.intermediate_size,
                      "vocab": base.vocab_size, "embedding": both.embedding_size},
            "flops_ratio": encoder_flops(both, sequence) / encoder_flops(base, sequence)}


def plot(result: dict, plots: Path) -> None:
    import matplotlib.pyplot as plt

    presets, ablation = result["presets"], result["ablation"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    for axis, rows, title in ((left, presets, "presets (backbone, pooler included)"), (right, ablation, "ALBERT ablation at base size")):
        names = [r["name"].split(":")[0] for r in rows][::-1]
        values = [r["parameters"] / 1e6 for r in rows][::-1]
        bars = axis.barh(names, values, color="#4477aa" if rows is presets else "#cc6677")
        axis.bar_label(bars, labels=[f"{v:.1f}M" for v in values], padding=3, fontsize=8)
        axis.set_xlim(0, max(values) * 1.18)
        axis.set_xlabel("parameters (millions)")
        axis.set_title(title)
        axis.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(plots / "parameters.png", dpi=110)
    plt.close(fig)


def render(result: dict, plots: Path) -> str:
    plot(result, plots)
    presets, ablation, s = result["presets"], result["ablation"], result["shape"]
    neither, factorized, shared, both = (r["parameters"] for r in ablation[:4])
    H, E, V, L = s["hidden"], s["embedding"], s["vocab"], s["layers"]
    per_layer = (neither - shared) / (L - 1)
    lines = [
        "| preset | parameters |", "|---|---:|",
        *(f"| {r['name']} | {r['parameters']:,} |" for r in presets),
        "", f"ALBERT's two ideas, one at a time, on BERT-base's shape (H={H}, {L} layers, FFN {s['ffn']}) with "
        f"ALBERT's {V:,}-token vocabulary:", "",
        "| configuration | parameters | vs. neither |", "|---|---:|---:|",
        *(f"| {r['name']} | {r['parameters']:,} | {r['parameters'] / neither:.1%} |" for r in ablation),
        "", f"![parameter counts]({plots.name}/parameters.png)", "",
        f"Factorization removes V·(H−E) − E·H ≈ {(neither - factorized) / 1e6:.0f}M parameters (the {V:,} × {H} table "
        f"becomes {V:,} × {E} plus a {E} × {H} projection); sharing removes {L - 1} of the {L} layers' "
        f"{per_layer / 1e6:.1f}M each (≈ {(neither - shared) / 1e6:.0f}M). Together they leave {both / 1e6:.1f}M, "
        f"1/{neither / both:.0f} of the unshared, unfactorized model — the *memory* argument for ALBERT. Compute is "
        f"another matter: a shared layer is still applied {L} times, so ALBERT-base's encoder costs "
        f"{result['flops_ratio']:.2f}× the FLOPs per token of the unshared, unfactorized one (`minibert.runs.flops`, "
        "a 128-token sequence).",
    ]
    return "\n".join(lines)
