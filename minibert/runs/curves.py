"""Training curves as a picture, from OUT/metrics.jsonl: a run, or several side by side.

    python -m minibert curves checkpoints/albert checkpoints/bert --out curves.png

One panel per curve: the training loss, then every held-out metric (accuracy, AUC, loss)
against steps. The unigram and neighbour-count guesses (corpus/baselines.py) are lines on the
held-out MLM accuracy panel, and where a run was measured as its variant's default run was,
that run's band (report.py: the mean of several seeds, and the spread they allow) is shaded
behind it — so a learner sees at a glance where a run stands against the recipe it came from.

`python train.py` draws OUT/curves.png at every checkpoint and at the end (`RunPicture`), from
the log alone: drawing adds no work to a training step. It needs matplotlib (runs/pictures.py);
without it a run says once how to get the picture and carries on.
"""

from __future__ import annotations

from pathlib import Path

from ..operations.files import read_json_object
from ..operations.outdir import RUN_FILE
from .pictures import INSTALL, MissingMatplotlib, picture_path, pyplot, save_figure
from ..variants import get_variant
from .metrics import MetricsLog
from .report import Band, band_for, default_bands
from ..training.settings import Settings

BASELINES = {"baseline_unigram_accuracy": "always the most frequent token", "baseline_neighbour_accuracy": "neighbour counts"}


def read_log(run: Path) -> list[dict]:
    """The records of RUN/metrics.jsonl (a line cut short by a crash is skipped)."""
    path = Path(run) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{run} holds no metrics.jsonl; give the --out folder of a python train.py run")
    return MetricsLog(path).records()


def run_band(run: Path) -> dict[str, Band]:
    """The bands of the variant a run trained, if the run was measured as its default run was."""
    try:
        saved = read_json_object(Path(run) / RUN_FILE, "the run's settings are unknown")
        variant = get_variant(saved["settings"]["variant"])
        settings = Settings(**saved["settings"])
        band, _ = band_for(variant, settings, saved.get("model_overrides", {}), saved["config"]["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return default_bands(variant.name) if band is not None else {}


def panels(logs: list[list[dict]], metrics: list[str] | None) -> list[str]:
    """The curves to draw: those asked for, else the training loss and every held-out metric logged."""
    if metrics:
        return metrics
    found = {name for log in logs for record in log for name in record}
    held_out = sorted(name for name in found if name.startswith("eval_") and name.endswith(("accuracy", "auc")))
    return [name for name in ("loss", *held_out, "eval_loss") if name in found]


def draw_curves(runs: list[Path], out: str | Path, metrics: list[str] | None = None, title: str | None = None) -> Path:
    """Draw the runs' curves side by side into `out` (a PNG); returns its path."""
    plt = pyplot("drawing curves")
    out = picture_path(out)
    logs = [read_log(run) for run in runs]
    names = panels(logs, metrics)
    if not names:
        raise ValueError(f"{', '.join(map(str, runs))}: nothing logged yet to draw")
    unknown = [name for name in names if not any(name in record for log in logs for record in log)]
    if unknown:
        raise ValueError(f"no run logged {', '.join(unknown)}; metrics.jsonl holds e.g. loss, eval_mlm_accuracy")
    bands: dict[str, dict[str, Band]] = {}  # variant -> metric -> band
    for run in runs:
        for metric, band in run_band(run).items():
            bands.setdefault(band.variant, {})[metric] = band
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for variant, by_metric in bands.items():
            if name in by_metric:
                shade(ax, by_metric[name])
        for run, log in zip(runs, logs):
            points = [(record["step"], record[name]) for record in log if name in record]
            ax.plot(*zip(*points), marker="o" if name != "loss" else None, markersize=3, label=Path(run).name)
        if name == "eval_mlm_accuracy":
            for baseline, text in BASELINES.items():
                value = next((record[baseline] for record in logs[0] if baseline in record), None)
                if value is not None:
                    ax.axhline(value, linestyle="--", linewidth=1, color="grey")
                    ax.annotate(text, (0, value), textcoords="offset points", xytext=(2, 2), fontsize=7, color="grey")
        ax.set_title(name if name == "loss" else f"held-out {name.removeprefix('eval_')}", fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    return save_figure(plt, figure, out, title)


def shade(ax, band: Band) -> None:
    """A variant's default run behind the curves: its band shaded, its mean dotted."""
    low, high = band.edges()
    ax.fill_between(band.steps, low, high, alpha=0.2, color="grey", label=f"{band.variant} default run")
    ax.plot(band.steps, band.mean, linestyle=":", color="grey", linewidth=1)


class RunPicture:
    """OUT/curves.png, redrawn at every checkpoint and at the end of a run."""

    def __init__(self, out: Path, title: str):
        self.out, self.title, self.told = Path(out), title, False

    def draw(self) -> None:
        try:
            draw_curves([self.out], self.out / "curves.png", title=self.title)
        except MissingMatplotlib:
            if not self.told:
                self.told = True
                print(f"note: {self.out / 'curves.png'} needs matplotlib: {INSTALL}; the run goes on without it",
                      flush=True)
