"""What a run shows and checks about itself, apart from the training step.

    evaluation_line   each held-out evaluation, as one line above the progress bar
    Band              a variant's default run, measured over several seeds on the embedded
                      corpus and stored in the package (default_curves.json): where a run of
                      that recipe stands at each evaluation
    BehindWarning     one warning per run that falls behind: below its variant's band at two
                      evaluations in a row (naming what it changed), or — without a band — still
                      at the unigram plateau late in the run
    HeldOutReport     both, as the loop is handed them (training/loop.py's `report`)

The loop calls these at evaluations only, never per step; curves.py draws the same data.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..variants import Variant, with_layout
from ..operations.errors import warn
from ..training.settings import OPERATIONAL, flag

DEFAULT_CURVES = Path(__file__).with_name("default_curves.json")
# The held-out set (corpus/pipeline.py) depends on these run settings and nothing else: a run that
# changes one of them is measured on other batches, so no stored band describes it.
HELD_OUT_SETTINGS = ("data", "seq_len", "layout", "short_seq_prob", "whole_word", "max_span", "replace_probs",
                     "eval_batches", "init")
# The metric a band is drawn for and a run held against: the kept model's own held-out task.
PRIMARY = {"mlm": "eval_mlm_accuracy", "rtd": "eval_rtd_auc"}


def evaluation_line(record: dict, baselines: dict) -> str:
    """'step 250  1m05s  held-out mlm_accuracy 0.189 (unigram 0.048, neighbours 0.151)  sop_accuracy 0.612  loss 6.120'."""
    minutes, seconds = divmod(round(record.get("elapsed_s", 0.0)), 60)
    parts = [f"step {record['step']:>5}", f"{minutes:>3}m{seconds:02d}s", "held-out"]
    for name, value in record.items():
        if name.startswith("eval_") and name.endswith(("accuracy", "auc")):
            shown = f"{name.removeprefix('eval_')} {value:.3f}"
            if name == "eval_mlm_accuracy" and baselines:
                shown += (f" (unigram {baselines['baseline_unigram_accuracy']:.3f}, "
                          f"neighbours {baselines['baseline_neighbour_accuracy']:.3f})")
            parts.append(shown)
    if "eval_loss" in record:
        parts.append(f"loss {record['eval_loss']:.3f}")
    return "  ".join(parts)


@dataclass
class Band:
    """One held-out metric of a variant's default run at each evaluation: the seeds' mean and
    a tolerance measured from their spread."""

    variant: str
    metric: str
    steps: list[int]
    mean: list[float]
    tolerance: list[float]

    def edges(self) -> tuple[list[float], list[float]]:
        """The band's lower and upper edge at each stored evaluation, as drawn: mean ∓ tolerance,
        kept within [0, 1] for a share (an accuracy or an AUC)."""
        low, high = ([m + sign * t for m, t in zip(self.mean, self.tolerance)] for sign in (-1, 1))
        if self.metric.endswith(("accuracy", "auc")):
            low, high = [max(0.0, v) for v in low], [min(1.0, v) for v in high]
        return low, high

    def at(self, step: float) -> tuple[float, float, float] | None:
        """(low, mean, high) at `step`, between the stored evaluations linearly; None outside them."""
        if not self.steps or not self.steps[0] <= step <= self.steps[-1]:
            return None
        right = next(i for i, s in enumerate(self.steps) if s >= step)
        left = max(0, right - 1)
        share = 0.0 if self.steps[right] == self.steps[left] else (step - self.steps[left]) / (self.steps[right] - self.steps[left])
        mean = self.mean[left] + share * (self.mean[right] - self.mean[left])
        tolerance = self.tolerance[left] + share * (self.tolerance[right] - self.tolerance[left])
        return mean - tolerance, mean, mean + tolerance


def stored_curves() -> dict:
    """The default runs' measured curves ({} before they were measured)."""
    return json.loads(DEFAULT_CURVES.read_text(encoding="utf-8")) if DEFAULT_CURVES.is_file() else {}


def default_bands(variant: str, stored: dict | None = None) -> dict[str, Band]:
    """Every stored held-out metric of `variant`'s default run, as a Band."""
    entry = (stored if stored is not None else stored_curves()).get("variants", {}).get(variant)
    if not entry:
        return {}
    return {metric: Band(variant, metric, curve["steps"], curve["mean"], curve["tolerance"])
            for metric, curve in entry["metrics"].items()}


def fingerprint(settings: dict, model: dict, torch_version: str, threads: int) -> str:
    """What a stored curve was measured with, as a short hash (default_curves.json keeps both)."""
    text = json.dumps({"settings": settings, "model": model, "torch": torch_version, "threads": threads}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(variant: Variant, settings, overrides: dict, names: tuple[str, ...] | None = None) -> list[str]:
    """The run's flags that differ from its variant's default run ('--lr 1e-05'), among `names`
    (every setting and model field that changes results when None; the teacher a distilbert run
    needs is no difference, its vocabulary is the tokenizer check's)."""
    default = dataclasses.asdict(with_layout(variant, variant.default_settings()))
    ignored = () if names else (*OPERATIONAL, "variant", "teacher")
    changed = [f"--{flag(name)} {shown(value)}" for name, value in dataclasses.asdict(settings).items()
               if (names is None or name in names) and name not in ignored and same(value) != same(default.get(name))]
    changed += [f"--{flag(name)} {shown(value)}" for name, value in overrides.items()
                if (names is None or name in names) and same(value) != same(variant.model.get(name))]
    return changed


def same(value):
    """A value as compared: a list read back from run.json equals the tuple it was saved from."""
    return tuple(value) if isinstance(value, list) else value


def shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def band_for(variant: Variant, settings, overrides: dict, vocab_size: int) -> tuple[Band | None, str]:
    """The band a run is held against, and why not when there is none: a run on the embedded
    corpus whose held-out set is its variant's default run's (its vocabulary included),
    whatever else it changed."""
    band = default_bands(variant.name).get(PRIMARY[variant.head])
    if band is None:
        return None, f"the {variant.name} default run's curves are not stored"
    voids = differences(variant, settings, overrides, HELD_OUT_SETTINGS)
    if vocab_size != variant.model["vocab_size"]:
        voids.append(f"a vocabulary of {vocab_size} tokens")
    if voids:
        return None, f"its held-out set differs from the {variant.name} default run's ({', '.join(voids)})"
    return band, ""


class BehindWarning:
    """Warn once when a run falls behind where its recipe should be.

    With a band (a run on the embedded corpus, measured on the default run's held-out set):
    below the band's low edge at two evaluations in a row — once may be noise, twice is a
    trend — says by how much and which settings differ from the variant's defaults. Without a
    band: held-out MLM accuracy within 1.5× of always guessing the most frequent token, past
    half of the run, means the model has learned token frequencies and little else; the
    academic-budget BERT recipe kills such runs early rather than spend the rest on them.
    """

    LATE = 0.5  # share of the run after which the plateau check applies
    MARGIN = 1.5  # "at the plateau": accuracy below this multiple of the unigram guess

    def __init__(self, baselines: dict, band: Band | None = None, changed: list[str] | None = None):
        self.unigram = baselines.get("baseline_unigram_accuracy")
        self.band, self.changed = band, changed or []
        self.behind_before = self.warned = False

    def check(self, record: dict, fraction: float) -> None:
        if self.warned:
            return
        if self.band is not None:
            return self.check_band(record)
        accuracy = record.get("eval_mlm_accuracy")
        if self.unigram is None or accuracy is None or fraction < self.LATE or accuracy >= self.MARGIN * self.unigram:
            return
        self.warned = True
        warn(f"step {record['step']}, {fraction:.0%} of the run: held-out MLM accuracy {accuracy:.3f} is still at the "
             f"unigram plateau (always guessing the most frequent token scores {self.unigram:.3f}); the model has "
             f"learned token frequencies only. Try a lower --lr or more --warmup (docs/training.md: the recipe)")

    def check_band(self, record: dict) -> None:
        value, expected = record.get(self.band.metric), self.band.at(record["step"])
        if value is None or expected is None or record["step"] == 0:
            return
        low, mean, _ = expected
        behind = value < low
        if behind and self.behind_before:
            self.warned = True
            name = self.band.metric.removeprefix("eval_").replace("_", " ")
            what = f"it differs from the {self.band.variant} defaults in {', '.join(self.changed)}" if self.changed else \
                "it runs the defaults, so this is worth a bug report"
            warn(f"step {record['step']}: held-out {name} {value:.3f} is below the {self.band.variant} default run's band "
                 f"for the second evaluation in a row ({low:.3f} to {mean + (mean - low):.3f}, mean {mean:.3f}; "
                 f"{mean - value:.3f} behind); {what}")
        self.behind_before = behind


class HeldOutReport:
    """What the loop shows and checks at each held-out evaluation: its line beside the
    baselines' (`evaluation_line`), and whether the run falls behind (`BehindWarning`)."""

    def __init__(self, baselines: dict, band: Band | None = None, changed: list[str] | None = None):
        self.baselines, self.behind = baselines, BehindWarning(baselines, band, changed)

    def line(self, record: dict) -> str:
        return evaluation_line(record, self.baselines)

    def check(self, record: dict, fraction: float) -> None:
        self.behind.check(record, fraction)
