"""matplotlib, the one optional dependency that draws: imported here only, headless.

The attention heatmaps (attention_maps.py) and the training curves (runs/curves.py) need it;
nothing else does. Without it, drawing is one clear line naming the fix.
"""

from __future__ import annotations

from pathlib import Path

INSTALL = "pip install matplotlib (or pip install 'minibert[viz]')"


class MissingMatplotlib(ImportError, ValueError):
    """matplotlib is not installed: an ImportError to code, a one-line user error to the command line."""

    def __init__(self, what: str = "drawing"):
        super().__init__(f"{what} needs matplotlib: {INSTALL}")


def pyplot(what: str = "drawing"):
    """matplotlib.pyplot with the file-only backend (no window, no display needed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingMatplotlib(what) from None
    return plt


def picture_path(out: str | Path) -> Path:
    """`out`, checked before anything is drawn: its folder must exist."""
    out = Path(out)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"--out {out}: the folder {out.parent} does not exist; create it or choose another path")
    return out


def save_figure(plt, figure, out: Path, title: str | None = None, dpi: int = 90) -> Path:
    """Title the figure, lay it out, write it to `out` and free it."""
    if title:
        figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(out, dpi=dpi)
    plt.close(figure)
    return out
