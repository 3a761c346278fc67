"""`minibert.pretrain(...)`: a pretraining run from Python, each flag of `python train.py` a keyword.

    result = minibert.pretrain("electra", data="my-corpus/", steps=500, hidden_size=256)
    result.out, result.metrics["eval_rtd_auc"]

A keyword is a flag's name in snake_case (`--seq-len` is `seq_len`): a Settings field or a
ModelConfig field. `resolve` turns keywords into the run's values, and it is the command
line's way too (cli.py's `parse` hands it the flags it read), so both layer the defaults
alike (Settings', then the variant's entry in variants.py, then what was given) and both
meet the same checks when the run starts (runs/run.py). `Keywords` checks each keyword, here
and for `minibert.finetune` (finetune/api.py).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from ..config import ModelConfig
from ..training.settings import Settings, flag
from ..variants import get_variant
from .metrics import MetricsLog

KINDS = {"int": "an integer", "float": "a number", "str": "a string or a path", "bool": "True or False",
         "list[str]": "a path or a list of paths", "list[float]": "a list of numbers", "tuple[float, float]": "two numbers",
         "list[int]": "an integer or a list of integers", "list[name]": "a name or a list of names",
         "int | str": "a number of steps or 'epoch'"}  # a field's type, as written in its dataclass -> what its keyword takes
ONE_OR_MORE = {"list[str]": "str", "list[name]": "str", "list[int]": "int"}  # a list whose keyword takes one item as a list of it


@dataclass(frozen=True)
class Keywords:
    """The keywords of one of the API's functions, each a flag of its command in snake_case:
    each checked, and converted, as the parsed flag would be (`checked`)."""

    function: str  # as its errors name it: "minibert.pretrain"
    command: str  # whose flags the keywords are: "python train.py"
    kinds: dict[str, str]  # keyword -> its field's type, as written in the dataclass (a key of KINDS, maybe " | None")
    shorthands: dict[str, str] = dataclasses.field(default_factory=dict)  # a flag of no field -> the keyword it stands for

    def checked(self, name: str, value):
        """`value` as its field holds it (a path as a string, a number as a float, a sequence as a
        list, as the parsed flag would be), or one line naming what the keyword takes."""
        if name not in self.kinds:
            raise TypeError(f"{self.function} got an unknown keyword {name!r}; {self.unknown_keyword_hint(name)}")
        kind = self.kinds[name]
        optional = kind.endswith(" | None")
        kind = kind.removesuffix(" | None")
        if value is None and optional:
            return None
        converted = converted_to(kind, value)
        if converted is None:
            raise TypeError(f"{self.function}: {name} (--{flag(name)}) takes {KINDS[kind]}"
                            f"{' or None' if optional else ''}, got {value!r}")
        return converted

    def unknown_keyword_hint(self, name: str) -> str:
        """The keyword meant: a flag's shorthand spelled out, or the close matches."""
        if name in self.shorthands:
            return f"pass {self.shorthands[name]}"
        close = difflib.get_close_matches(name.replace("-", "_"), self.kinds, n=3)
        return f"did you mean {', '.join(close)}?" if close else f"each keyword is a flag of {self.command} --help, in snake_case"


SETTINGS_FIELDS = {field.name: str(field.type) for field in dataclasses.fields(Settings)}
MODEL_FIELDS = {field.name: str(field.type) for field in dataclasses.fields(ModelConfig)}
SHORTHANDS = {"nsp": "layout='nsp'", "sop": "layout='sop'", "no_nsp": "layout='full_sentences'"}  # the flags of no field
KEYWORDS = Keywords("minibert.pretrain", "python train.py", {**SETTINGS_FIELDS, **MODEL_FIELDS}, SHORTHANDS)


@dataclass(frozen=True)
class PretrainResult:
    """What a finished run hands back: where it is, and how it ended."""

    out: Path  # the run's folder: `minibert.from_pretrained(out)` loads the model
    metrics: dict  # OUT/metrics.jsonl's last record: the last steps' losses and the final held-out evaluation


def pretrain(variant: str = Settings.variant, *, resume: bool = False, overwrite: bool = False, **options) -> PretrainResult:
    """Pretrain `variant` as `python train.py --variant VARIANT` does, each flag a keyword
    (`steps=200`, `data=["a.txt", "b/"]`, `hidden_size=256`, `nsp` as `layout="nsp"`), with the
    flag's default and checks; `resume` and `overwrite` are the flags of those names."""
    settings, overrides = resolve({"variant": variant, **options})
    from .run import pretrain as run  # as on the command line: the run's machinery loads once the keywords are read

    out = run(settings, overrides, resume=resume, overwrite=overwrite)
    return PretrainResult(out, MetricsLog(out / "metrics.jsonl").last())


def resolve(options: dict) -> tuple[Settings, dict]:
    """Keywords -> (the run's Settings, its ModelConfig overrides): the variant's default run,
    then what `options` gives. The command line's flags come here too (cli.py's `parse`)."""
    values = {name: KEYWORDS.checked(name, value) for name, value in options.items()}
    variant = get_variant(values.pop("variant", Settings.variant))
    settings = variant.default_settings(**{k: v for k, v in values.items() if k in SETTINGS_FIELDS})
    return settings, {k: v for k, v in values.items() if k in MODEL_FIELDS}


def converted_to(kind: str, value):
    """`value` converted to the field's `kind`, or None where it is not one."""
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind == "float":
        return float(value) if is_number(value) else None
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "str":
        return os.fspath(value) if is_path(value) else None
    if kind == "int | str":
        return value if isinstance(value, str) else converted_to("int", value)
    item = ONE_OR_MORE.get(kind, "float")  # else list[float] or tuple[float, float], a list once parsed
    items = [value] if kind in ONE_OR_MORE and converted_to(item, value) is not None else \
        list(value) if isinstance(value, (list, tuple)) else []
    converted = [converted_to(item, each) for each in items]
    return converted if items and None not in converted else None


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_path(value) -> bool:
    return isinstance(value, (str, os.PathLike))
