"""docs/departures.md's table: every flag it names to undo a departure exists, and changes the
setting it names from the variant's default run (read as train.py reads it: the real parser and
the resolved settings and architecture, tests/test_recipes_release.py's `run_values`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_recipes_release import run_values

PAGE = Path(__file__).resolve().parents[1] / "docs" / "departures.md"


def restorations() -> list[list[str]]:
    """The table's last column, each cell's flags as argv."""
    rows = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ") and "`--" in line]
    return [re.fullmatch(r".*\| `([^`]+)` \|", row).group(1).split() for row in rows]


def test_the_table_names_a_flag_for_every_departure():
    assert len(restorations()) >= 9


@pytest.mark.parametrize("argv", restorations(), ids=" ".join)
def test_each_flag_changes_the_setting_it_names(argv):
    variant = argv[argv.index("--variant") + 1] if "--variant" in argv else "albert"
    default, restored = run_values(["--variant", variant]), run_values(argv)
    for name in (flag[2:].replace("-", "_") for flag in argv if flag.startswith("--") and flag != "--variant"):
        key = name if name in default else f"model.{name}"
        assert key in default, f"{name}: neither a setting nor a model field"
        assert restored[key] != default[key], f"{' '.join(argv)} leaves {name} at {default[key]!r}"
