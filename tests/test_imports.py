"""The package's modules import one another without a cycle: each sits above what it uses.

Read from the source (every `import`, including those under TYPE_CHECKING, which a cycle
through type hints still couples), not from what Python happened to load.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minibert"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_within(root: Path) -> dict[str, set[str]]:
    """Each module of the package under `root` -> the package's modules it imports."""
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        used = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                used.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: climb level - 1 packages from this one
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + [base] if base else anchor)
                # `from .pkg import mod` uses the module pkg.mod; `from .mod import name`, mod
                used.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names)
        graph[name] = {module for module in used if module in paths and module != name}
    return graph


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A path a -> ... -> a through `graph`, or None when it has no cycle."""
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        for used in sorted(graph[module]):
            if cycle := walk(used, path + [module]):
                return cycle
        done.add(module)
        return None

    return next((cycle for module in sorted(graph) if (cycle := walk(module, []))), None)


def test_the_package_has_no_import_cycle():
    cycle = first_cycle(imports_within(PACKAGE))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_is_found_even_through_type_checking_imports(tmp_path):
    root = tmp_path / "pkg"
    (root / "training").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "training" / "__init__.py").write_text("")
    (root / "training" / "loop.py").write_text("from .optim import learning_rate\n")
    (root / "training" / "optim.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    from ..training import loop\n")
    assert first_cycle(imports_within(root)) == ["pkg.training.loop", "pkg.training.optim", "pkg.training.loop"]
    (root / "training" / "optim.py").write_text("import math\n")
    assert first_cycle(imports_within(root)) is None


@pytest.mark.parametrize("source, expected", [
    ("from . import loop", {"pkg.training.loop"}),
    ("from .loop import train", {"pkg.training.loop"}),
    ("from ..data import corpus", {"pkg.data.corpus"}),
    ("from .. import data", {"pkg.data"}),
    ("import pkg.data.corpus", {"pkg.data.corpus"}),
])
def test_every_spelling_of_an_import_is_read(tmp_path, source, expected):
    root = tmp_path / "pkg"
    for folder in ("training", "data"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "training" / "loop.py").write_text("")
    (root / "data" / "corpus.py").write_text("")
    (root / "training" / "run.py").write_text(source + "\n")
    assert imports_within(root)["pkg.training.run"] == expected


def test_no_bench_script_shadows_a_package_the_benches_import():
    """A script's folder comes first on sys.path when it runs, so bench/tokenizers.py would be
    imported instead of the `tokenizers` package by every script beside it (transformers among
    their imports): no file in bench/ may share its name with a top-level module they import."""
    bench = PACKAGE.parent / "bench"
    scripts = {path.stem for path in bench.glob("*.py")} | {path.name for path in bench.iterdir() if path.is_dir()}
    imported = set()
    for path in bench.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {"torch", "numpy", "transformers", "tokenizers", "triton", "sentencepiece", "safetensors", "tqdm",
                   "matplotlib", "minibert", "pytest", "hypothesis"}
    assert not scripts & (third_party | {name for name in imported if name not in scripts}), scripts & third_party
