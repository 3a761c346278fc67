"""The run's resolved configuration: every value, and the layer it came from, in one block.

A pretraining run's values are stacked from layers, each later one winning:

    default     what every default run shares: variants.py's DEFAULT_MODEL and MASK_PROB, and
                Settings' defaults (settings.py); a ModelConfig field named in none keeps
                ModelConfig's own (BERT-base's)
    variant     what the variant itself sets (variants.py), its objectives' examples included
    tokenizer   vocab_size and pad_token_id, fixed by the tokenizer the run trains or reads
    --seq-len   max_positions, sized to the sequence length
    teacher / --init   the architecture of DistilBERT's teacher, or of the checkpoint started from
    flag        the command line

`python train.py` prints this block when it starts (and saves the values in OUT/run.json);
`python train.py --print-config` prints it and exits.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

from ..config import ModelConfig
from ..variants import Variant, with_layout
from ..training.settings import Settings

LAYERS = ("flag", "variant", "tokenizer", "--seq-len", "teacher", "--init", "default")
# Settings that only one kind of objective reads: shown only for the variants that have it.
ONLY_FOR = {
    "kd": ("teacher", "kd_temperature", "kd_soft_weight", "kd_mlm_weight", "kd_cosine_weight", "kd_all_tokens"),
    "rtd": ("rtd_weight", "generator_fraction", "generator_heads", "rtd_tokens", "init_generator"),
}
WIDTH = 100


def unread_settings(variant: Variant) -> set[str]:
    """The settings no objective of `variant` reads (ELECTRA's for BERT, say): no difference between runs."""
    return {name for objective, names in ONLY_FOR.items() if objective not in variant.objectives for name in names}


def model_sources(variant: Variant, overrides: dict, inherited: str | None = None,
                  tokenizer_known: bool = False) -> dict[str, str]:
    """ModelConfig field -> the layer its value came from."""
    sources = {}
    for name in (f.name for f in dataclasses.fields(ModelConfig)):
        if name in overrides:
            sources[name] = "flag"
        elif inherited:
            sources[name] = inherited
        elif tokenizer_known and name in ("vocab_size", "pad_token_id"):
            sources[name] = "tokenizer"
        elif name == "max_positions":
            sources[name] = "--seq-len"
        elif name in variant.model_fields:
            sources[name] = "variant"
        else:
            sources[name] = "default"
    return sources


def settings_sources(variant: Variant, settings: Settings) -> dict[str, str]:
    """Settings field -> the layer its value came from (a flag that repeats its layer's value
    is shown as that layer: the result is the same)."""
    by_variant = with_layout(variant, variant.default_settings())
    unused = unread_settings(variant)
    sources = {}
    for name in (f.name for f in dataclasses.fields(Settings)):
        value = getattr(settings, name)
        if name in unused or name == "variant":
            continue
        if name == "out" and value == str(Path("checkpoints") / variant.name):
            sources[name] = "variant"  # the default OUT is named after the variant
        elif value != getattr(by_variant, name):
            sources[name] = "flag"
        else:
            own = name in variant.settings or (name == "layout" and value != "full_sentences")  # the variant's sentence task
            sources[name] = "variant" if own else "default"
    return sources


def show(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(show(v) for v in value)
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def section(title: str, values: dict, sources: dict[str, str]) -> list[str]:
    lines = [f"  {title}"]
    for layer in LAYERS:
        names = [name for name, source in sources.items() if source == layer]
        if names:
            text = " ".join(f"{name}={show(values[name])}" for name in names)
            lines += textwrap.wrap(text, WIDTH, initial_indent=f"    {layer:<10} ", subsequent_indent=" " * 15)
    return lines


def describe_run(variant: Variant, settings: Settings, overrides: dict, config: ModelConfig | None, *,
                 inherited: str | None = None, tokenizer_known: bool = False) -> str:
    """The block: the architecture and the settings, each value under the layer it came from.
    `config` None: the architecture is not known yet (a teacher's or a checkpoint's, `inherited`)."""
    lines = [f"{variant.name}: each value under the layer it came from (a flag beats the variant, the variant the defaults; "
             f"minibert/runs/resolved.py)"]
    if config is None:
        flags = " ".join(f"{k}={show(v)}" for k, v in overrides.items())
        lines += [f"  model      the {inherited}'s architecture, read when the run starts" + (f"; flags: {flags}" if flags else "")]
    else:
        lines += section("model", config.to_dict(), model_sources(variant, overrides, inherited, tokenizer_known))
    lines += section("settings", settings.to_dict(), settings_sources(variant, settings))
    return "\n".join(lines)
