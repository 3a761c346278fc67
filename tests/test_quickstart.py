"""The README's Quick start, pyproject.toml's floors and CI say the same thing.

CI (.ci/run) runs the Quick start's commands as README.md writes them; these tests keep that
block in the shape .ci/run reads, and the versions the README's Install and development section
says were tested equal to the floors pyproject.toml declares.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def quickstart(readme: str) -> list[str]:
    """The lines of the first fenced block under "## Quick start"."""
    section = readme.split("\n## Quick start\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def install_prose(readme: str) -> str:
    """The "Install and development" section, where the README names the tested versions."""
    return readme.split("\n## Install and development\n", 1)[1].split("\n## ", 1)[0]


def floors(pyproject: dict) -> dict[str, str]:
    """Each requirement's name -> its declared lower bound ("python" too)."""
    project = pyproject["project"]
    found = {"python": project["requires-python"].removeprefix(">=")}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        if requirement.startswith(f"{project['name']}["):
            continue  # another extra of this package (minibert[corpora]): its own floors, not the suite's
        name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", requirement).groups()
        found[name] = floor
    return found


README = (REPO / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_quick_start_is_two_commands_and_the_second_runs_the_tests():
    install_and_train, install_and_test = quickstart(README)
    assert "python train.py" in install_and_train
    assert install_and_test.endswith("&& python -m pytest -q") and '-e ".[dev]"' in install_and_test


def test_the_quick_start_pins_the_torch_it_declares_as_floor():
    torch = floors(PYPROJECT)["torch"]
    assert all(f"torch=={torch} " in command for command in quickstart(README))


def unnamed(prose: str, declared: dict[str, str]) -> list[str]:
    """The floors `prose` does not name as tested ("numpy 2.4.6", "Python 3.11")."""
    spelled = [f"{'Python' if name == 'python' else name} {floor}" for name, floor in declared.items()]
    return [text for text in spelled if not re.search(rf"(?<![\w.]){re.escape(text)}(?![\w]|\.\d)", prose)]


def test_the_readme_names_every_floor_as_a_tested_version():
    missing = unnamed(install_prose(README), floors(PYPROJECT))
    assert not missing, f"README's Install and development section does not name these floors of pyproject.toml as tested: {missing}"


def test_a_floor_the_readme_does_not_name_is_caught():
    prose = "Tested with Python 3.11, torch 2.13.0 and numpy 2.4.6."
    assert unnamed(prose, {"python": "3.11", "torch": "2.13.0", "numpy": "2.4.6"}) == []
    assert unnamed(prose, {"torch": "2.13", "numpy": "1.24", "tqdm": "4.70.1"}) == ["torch 2.13", "numpy 1.24", "tqdm 4.70.1"]


def test_ci_runs_the_quick_start_read_from_the_readme():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "README.md" in ci and "## Quick start" in ci and 'bash -c "$command"' in ci
    assert "python3 -m venv" in ci  # a fresh environment, not what earlier sessions installed


def test_ci_installs_the_browser_before_the_quick_start_and_requires_its_tests():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    install = ci.index("--no-install-recommends chromium chromium-driver")
    assert install < ci.index('bash -c "$command"') and "export MINIBERT_BROWSER_TESTS=required" in ci
