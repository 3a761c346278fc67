"""The package's modules import one another without a cycle: each sits above what it uses.

Read from the source (every `import`, including those under TYPE_CHECKING, which a cycle
through type hints still couples), not from what Python happened to load.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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


# --- transformers: a test oracle, never a dependency ------------------------------------------------

# The one function that may import transformers: the export's read-back check, at run time and
# only where transformers is installed (it says the check was skipped otherwise).
TRANSFORMERS_ALLOWED = {("minibert.interop.huggingface.export_check", "check_export")}


class TransformersImports(ast.NodeVisitor):
    """Every import of transformers in one module, with the function it sits in (None: at import
    time) and whether an `except ImportError` around it makes it optional."""

    def __init__(self):
        self.scope: list[str] = []
        self.guards: list[bool] = []
        self.found: list[tuple[str | None, bool, int]] = []

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node):
        catches = any(handler.type is None or "ImportError" in ast.unparse(handler.type) for handler in node.handlers)
        self.guards.append(catches)
        for statement in node.body:
            self.visit(statement)
        self.guards.pop()
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    def record(self, node, module: str | None) -> None:
        if module and module.split(".")[0] == "transformers":
            self.found.append((".".join(self.scope) or None, any(self.guards), node.lineno))

    def visit_Import(self, node):
        for alias in node.names:
            self.record(node, alias.name)

    def visit_ImportFrom(self, node):
        self.record(node, node.module if not node.level else None)

    def visit_Call(self, node):  # importlib.import_module("transformers"), __import__("transformers")
        name = ast.unparse(node.func)
        if name.split(".")[-1] in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            self.record(node, str(node.args[0].value))
        self.generic_visit(node)


def transformers_imports(root: Path) -> dict[tuple[str, str | None], list[tuple[bool, int]]]:
    """(module, function) -> [(guarded by except ImportError, line)] for every import of transformers under `root`."""
    found: dict[tuple[str, str | None], list[tuple[bool, int]]] = {}
    for path in sorted(root.rglob("*.py")):
        visitor = TransformersImports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        for function, guarded, line in visitor.found:
            found.setdefault((module_name(path, root), function), []).append((guarded, line))
    return found


def transformers_violations(root: Path, allowed=TRANSFORMERS_ALLOWED) -> list[str]:
    """Imports of transformers outside the allowed functions, or inside them but not optional."""
    problems = []
    for (module, function), imports in transformers_imports(root).items():
        for guarded, line in imports:
            if (module, function) not in allowed:
                problems.append(f"{module}:{line} imports transformers {'in ' + function if function else 'at import time'}")
            elif not guarded:
                problems.append(f"{module}:{line} imports transformers without an except ImportError around it")
    return problems


def test_only_the_export_check_imports_transformers_and_only_if_installed():
    assert transformers_violations(PACKAGE) == []
    assert set(transformers_imports(PACKAGE)) == TRANSFORMERS_ALLOWED  # the allowed import is where the rule says


@pytest.mark.parametrize("source", [
    "import transformers\n",
    "from transformers import AutoModel\n",
    "import transformers.models.bert\n",
    "def load():\n    from transformers import AutoModel\n",
    "def load():\n    try:\n        import transformers\n    except ImportError:\n        return None\n",
    "import importlib\ndef load():\n    return importlib.import_module('transformers')\n",
    "try:\n    import transformers\nexcept ImportError:\n    transformers = None\n",
])
def test_any_other_import_of_transformers_is_caught(tmp_path, source):
    root = package(tmp_path, {"interop/huggingface/export_check.py": ALLOWED_SOURCE, "elsewhere.py": source})
    assert [p.split(":")[0] for p in transformers_violations(root)] == ["minibert.elsewhere"]


def test_the_allowed_import_must_be_optional(tmp_path):
    root = package(tmp_path, {"interop/huggingface/export_check.py": "def check_export():\n    import transformers\n"})
    assert transformers_violations(root) == ["minibert.interop.huggingface.export_check:2 imports transformers without an except "
                                             "ImportError around it"]


ALLOWED_SOURCE = "def check_export():\n    try:\n        import transformers\n    except ImportError:\n        return None\n"


def package(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A package named minibert under `tmp_path`: `modules` (path inside it -> source), an
    empty __init__.py in every folder."""
    root = tmp_path / "minibert"
    for path, source in modules.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(source)
    for folder in (root, *(path for path in root.rglob("*") if path.is_dir())):
        (folder / "__init__.py").touch()
    return root


def test_importing_every_command_loads_no_transformers():
    """What Python actually loads: the package and its commands import without transformers."""
    code = ("import sys, minibert, minibert.__main__, minibert.interop.huggingface.export, minibert.runs.cli, minibert.finetune; "
            "sys.exit('transformers' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=PACKAGE.parent).returncode == 0


# --- the core stands apart from interop ------------------------------------------------------------

# What a learner reads to see how the five families work (docs/reading.md); a name covers the
# package's modules below it.
CORE = ("minibert.config", "minibert.model", "minibert.attention", "minibert.heads", "minibert.variants",
        "minibert.kernels.unpad", "minibert.pretrained", "minibert.objectives", "minibert.data", "minibert.tokenizers",
        "minibert.kernels")


def is_core(module: str, core=CORE) -> bool:
    return any(module == name or module.startswith(name + ".") for name in core)


def core_reaching_interop(root: Path, core=CORE) -> list[str]:
    """Each core module from which a chain of imports reaches minibert.interop: the chain."""
    graph = imports_within(root)
    problems = []
    for module in sorted(m for m in graph if is_core(m, core)):
        seen, frontier = {module: [module]}, [module]
        while frontier:
            current = frontier.pop()
            for used in sorted(graph[current]):
                if used not in seen:
                    seen[used] = seen[current] + [used]
                    frontier.append(used)
        reached = sorted(m for m in seen if m == "minibert.interop" or m.startswith("minibert.interop."))
        if reached:
            problems.append(" -> ".join(seen[reached[0]]))
    return problems


def test_no_core_module_imports_interop():
    """The core reads on its own: Hugging Face's layouts and the released tokenizers' formats
    register themselves with it (minibert/__init__.py imports minibert.interop), and no chain of
    imports from a core module leads there."""
    modules = imports_within(PACKAGE)
    for name in CORE:  # every name still stands for something
        assert any(is_core(module, (name,)) for module in modules), name
    assert core_reaching_interop(PACKAGE) == []


@pytest.mark.parametrize("planted", [
    {"model.py": "from .interop.huggingface import families\n"},
    {"tokenizers/load.py": "from ..interop.tokenizers import albert\n"},
    {"model.py": "from .runs import run\n", "runs/run.py": "from ..interop import huggingface\n"},
])
def test_a_core_import_of_interop_is_caught(tmp_path, planted):
    modules = {"interop/huggingface/families.py": "", "interop/tokenizers/albert.py": "", "interop/huggingface/__init__.py": "",
               "model.py": "", "tokenizers/load.py": "", "runs/run.py": "", **planted}
    root = package(tmp_path, modules)
    assert core_reaching_interop(root) != []
    clean = package(tmp_path / "clean", {name: "" for name in modules})
    assert core_reaching_interop(clean) == []


# --- the chapter imports no machinery --------------------------------------------------------------

# What a learner reads to see how the five families work and learn: the folders' docstrings call
# these the chapter (a name covers the package's modules below it). Of minibert/tokenizers/ only
# base.py, the interface the examples are laid out with: the tokenizers themselves save and load
# their own files (operations/files.py's atomic writes), so they stand outside this rule.
CHAPTER = ("minibert.config", "minibert.model", "minibert.attention", "minibert.heads", "minibert.variants",
           "minibert.objectives", "minibert.data", "minibert.training", "minibert.tokenizers.base")
# What makes the chapter work at any size and in and out of files, none of it a paper's idea:
# corpus files to arrays, a run's plumbing, checkpoints, DDP, precision and atomic files, other
# libraries' layouts, the tools, fine-tuning, and a model saved and loaded again.
MACHINERY = ("minibert.corpus", "minibert.runs", "minibert.operations", "minibert.interop", "minibert.tools",
             "minibert.finetune", "minibert.pretrained")
# Neither: minibert.kernels (speed; the chapter takes it at its one `if`), the tokenizers beside
# base.py, and the package's own __init__ and __main__.


def chapter_reaching_machinery(root: Path, chapter=CHAPTER, machinery=MACHINERY) -> list[str]:
    """Each chapter module from which a chain of imports (through any module that is not
    machinery itself) reaches machinery: the chain."""
    graph = imports_within(root)
    problems = []
    for module in sorted(m for m in graph if is_core(m, chapter)):
        seen, frontier = {module: [module]}, [module]
        while frontier:
            current = frontier.pop()
            for used in sorted(graph[current]):
                if used not in seen:
                    seen[used] = seen[current] + [used]
                    if not is_core(used, machinery):
                        frontier.append(used)
        reached = sorted(m for m in seen if is_core(m, machinery))
        if reached:
            problems.append(" -> ".join(seen[reached[0]]))
    return problems


def test_no_chapter_module_imports_machinery():
    """What `python train.py` runs and a learner reads imports nothing that only keeps a run
    going: machinery imports the chapter, never the other way (directly or through kernels)."""
    modules = imports_within(PACKAGE)
    for name in (*CHAPTER, *MACHINERY):  # every name still stands for something
        assert any(is_core(module, (name,)) for module in modules), name
    assert chapter_reaching_machinery(PACKAGE) == []


@pytest.mark.parametrize("planted", [
    {"data/masking.py": "from ..operations import files\n"},
    {"training/settings.py": "from ..corpus.pipeline import MASKINGS\n"},
    {"heads.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .runs.run import Run\n"},
    {"variants.py": "def load():\n    from .pretrained import from_pretrained\n"},
    {"tokenizers/base.py": "import minibert.operations.files\n"},
    {"model.py": "from .kernels import unpad\n", "kernels/unpad.py": "from ..operations import precision\n"},
])
def test_a_chapter_import_of_machinery_is_caught(tmp_path, planted):
    modules = {"data/masking.py": "", "training/settings.py": "", "heads.py": "", "variants.py": "", "model.py": "",
               "tokenizers/base.py": "", "kernels/unpad.py": "", "operations/files.py": "", "operations/precision.py": "",
               "corpus/pipeline.py": "", "runs/run.py": "", "pretrained.py": ""}
    root = package(tmp_path, {**modules, **planted})
    assert len(chapter_reaching_machinery(root)) == 1
    clean = package(tmp_path / "clean", {**modules, "runs/run.py": "from ..training import settings\n",  # machinery may read the chapter
                                         "tokenizers/wordpiece.py": "from ..operations import files\n"})  # beside the chapter
    assert chapter_reaching_machinery(clean) == []
