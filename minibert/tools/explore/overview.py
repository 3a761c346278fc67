"""The explorer's answers that do not depend on the text: the model's parameter accounting,
read from the live module; the run's settings and curves; the source of the code the panels name.

The accounting is the two ALBERT ideas in numbers. Factorized embeddings: a V × E table and
an E × H projection instead of one V × H table. Cross-layer sharing: the encoder keeps fewer
sublayer modules than its depth and applies each at several depths (model.py: build_layers,
Encoder.layer), so a shared layer is counted once and applied N times.
"""

from __future__ import annotations

from torch import nn

from ...runs.curves import BASELINES, panels, read_log, run_band
from ..info import describe
from .code_ran import CODE, source
from .questions import reading_limits
from .session import Session


def overview(session: Session) -> dict:
    """Everything the page shows once: what was loaded, the model panel, the run panel."""
    answering = session.reading is not None
    return {"checkpoint": str(session.directory), "variant": session.variant.name if session.variant else None,
            "head": session.head, "weights": session.weights, "notes": session.notes,
            "static": session.static, "model": model_panel(session), "run": run_panel(session),
            "task": "qa" if answering else "pretraining",
            "qa": {"limits": reading_limits(session), "example": list(session.example)} if answering else None}


def count(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def model_panel(session: Session) -> dict:
    """The encoder's parameters part by part, from the module itself (a shared module once)."""
    encoder = session.encoder
    config = encoder.config
    V, H = config.vocab_size, config.hidden_size
    E = config.embedding_size or H
    embeddings = encoder.embeddings
    word = embeddings.word_embeddings.weight.numel()
    projection = count(encoder.embedding_projection)
    depth = config.num_layers
    sublayers = [{"name": name, "modules": len(modules), "applied": depth, "each": count(modules[0]), "counted": count(modules)}
                 for name, modules in (("attention", encoder.attention), ("feed-forward", encoder.feed_forward))]
    return {
        "V": V, "E": E, "H": H, "max_length": encoder.max_length, "layers": depth, "heads": config.num_heads, "share_layers": config.share_layers,
        "word_embeddings": word, "projection": projection, "unfactorized": V * H,
        "other_embeddings": count(embeddings) - word, "other_parts": other_parts(embeddings), "sublayers": sublayers, "pooler": count(encoder.pooler),
        "final_norm": count(encoder.final_norm), "encoder": count(encoder),
        "facts": describe(session.directory), "code": CODE["model"],
    }


# How the page names an embedding module's parts, beside the word table.
EMBEDDING_PARTS = {"position_embeddings": "positions", "token_type_embeddings": "segments", "norm": "LayerNorm"}


def other_parts(embeddings: nn.Module) -> str:
    """The embedding parts beside the word table that hold parameters, from the module itself:
    a rotary model has no position table (its positions rotate queries and keys instead)."""
    return ", ".join(EMBEDDING_PARTS.get(name, name) for name, module in embeddings.named_children()
                     if name != "word_embeddings" and count(module))


def run_panel(session: Session) -> dict | None:
    """run.json's settings, and each logged curve with the default run's band where the run was
    measured as that run was (runs/curves.py reads both, as `python -m minibert curves` does), and
    the held-out MLM accuracy's baselines, named as the curves' picture names them."""
    if session.settings is None or not (session.directory / "metrics.jsonl").is_file():
        return None
    log = read_log(session.directory)
    bands = run_band(session.directory)
    curves = []
    for name in panels([log], None):
        band = bands.get(name)
        curves.append({"metric": name, "points": [[r["step"], r[name]] for r in log if r.get(name) is not None],
                       "band": None if band is None else {"variant": band.variant, "steps": band.steps, "mean": band.mean,
                                                         **dict(zip(("low", "high"), band.edges()))}})
    baselines = [{"name": name, "words": BASELINES.get(name, name.removeprefix("baseline_").replace("_", " ")), "value": value}
                 for record in log for name, value in record.items() if name.startswith("baseline_")]
    return {"settings": session.settings.to_dict(), "curves": curves, "baselines": baselines, "code": CODE["run"]}


def all_sources() -> dict[str, dict]:
    """Every function the panels name, for a page that has no server to ask."""
    return {ref: source(ref) for refs in CODE.values() for ref in refs}
