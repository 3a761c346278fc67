"""minibert's own source, copied into an export folder that transformers loads as custom code.

A model no built-in transformers class holds exactly is exported with its own code (custom_code.py):
the folder's modeling file runs minibert's encoder and heads, and those are not rewritten for
the purpose but copied from this package at export time. `copied_sources` starts from the modules
the folder's wrapper imports (ROOTS) and follows every import of a minibert module it finds in
their syntax trees, at import time or inside a function, so the copy is whatever model.py,
heads.py and config.py need today, whoever changed them last.

transformers' loader (`dynamic_module_utils`) copies a custom-code folder's files into its own
package of modules, and finds them by reading `from .name import ...` lines: every file must sit
in the folder itself, and every import of one must be spelled that way. So the copy is flat
(kernels/unpad.py becomes unpad.py) and each import of a minibert module is rewritten to it:
`from ..attention import attend` in kernels/unpad.py becomes `from .attention import attend`.

The Triton kernel stays out (LEFT_OUT): the folder must run where only torch and transformers
are installed, and the kernel is a GPU-only speed path, never taken unless
`attention_backend="triton"`, which an export does not write. unpad.py, which the encoder imports,
comes along (the layers on the real tokens only, for batches with Encoder.UNPAD_FROM padding); its lazy
import of the kernel becomes a `raise ImportError` that says so. A module imported at import time
that must stay out, or a module name two copied files share, refuses the export in one line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # minibert/
ROOTS = ("model", "heads", "config")  # what the wrapper imports (custom_code/), as modules of minibert
LEFT_OUT = {
    "kernels.flash_attention": "minibert's Triton kernel is not part of an exported model; set "
                               "attention_backend='sdpa' in config.json",
}


@dataclass(frozen=True)
class Edit:
    """Replace the source between two (line, byte column) positions with `text`."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


def copied_sources(roots: tuple[str, ...] = ROOTS, package: Path = PACKAGE) -> dict[str, str]:
    """file name in the export folder -> its text: the modules `roots` need, flat and with their
    imports rewritten. A module is named by its path inside `package` ("kernels.unpad")."""
    files: dict[str, str] = {}
    origin: dict[str, str] = {}
    for name, text in collect(roots, package).items():
        file_name = flat_name(name) + ".py"
        if file_name in files:
            raise ValueError(f"{module_path(package, origin[file_name])} and {module_path(package, name)} would both be "
                             f"{file_name} in the export folder; rename one")
        files[file_name], origin[file_name] = text, name
    return files


def collect(roots: tuple[str, ...], package: Path) -> dict[str, str]:
    """module -> its rewritten source, for `roots` and every minibert module they import."""
    sources: dict[str, str] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in sources:
            continue
        path = module_path(package, name)
        source = path.read_text(encoding="utf-8")
        edits, used = rewrite_imports(name, path, ast.parse(source), package)
        relative = path.relative_to(package.parent).as_posix()
        sources[name] = f"# {relative}, copied by `python -m minibert export` (its imports point into this folder)\n" \
                        + apply(source, edits)
        pending.extend(used)
    return sources


def rewrite_imports(name: str, path: Path, tree: ast.Module, package: Path) -> tuple[list[Edit], list[str]]:
    """The edits that point each import of a minibert module at its flat copy, and the modules used."""
    lazy = {id(node) for function in ast.walk(tree) if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            for node in ast.walk(function)}
    edits, used = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == package.name for a in node.names):
            raise ValueError(f"{path}:{node.lineno}: `import {package.name}...` cannot be copied into an export folder; "
                             f"import it relatively (from .module import name)")
        if not isinstance(node, ast.ImportFrom):
            continue
        target = imported_module(name, path, node, package)
        if target is None:  # torch, the standard library
            continue
        position = dict(start=(node.lineno, node.col_offset), end=(node.end_lineno, node.end_col_offset))
        if target in LEFT_OUT:
            if id(node) not in lazy:
                raise ValueError(f"{path}:{node.lineno} imports {package.name}.{target} when it is imported, but an "
                                 f"export leaves that module out; import it inside the function that uses it")
            edits.append(Edit(**position, text=f"raise ImportError({LEFT_OUT[target]!r})"))
            continue
        names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names)
        edits.append(Edit(**position, text=f"from .{flat_name(target)} import {names}"))
        used.append(target)
    return edits, used


def imported_module(name: str, path: Path, node: ast.ImportFrom, package: Path) -> str | None:
    """The minibert module an import reads from ("kernels.unpad"), or None for any other package.
    `from . import unpad` (a module of a package, not a name in a module) is refused: transformers'
    loader only follows `from .module import name`."""
    if node.level == 0:
        if not node.module or node.module.split(".")[0] != package.name:
            return None
        base = node.module.split(".")[1:]
    else:
        here = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
        if node.level - 1 > len(here):
            raise ValueError(f"{path}:{node.lineno}: a relative import climbs out of {package.name}")
        base = here[:len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    modules = [".".join(base + [a.name]) for a in node.names if is_module(package, ".".join(base + [a.name]))]
    if modules:
        if any(module in LEFT_OUT for module in modules) and len(modules) == len(node.names):
            return modules[0]
        raise ValueError(f"{path}:{node.lineno} imports the module(s) {', '.join(modules)} with `from ... import "
                         f"module`, which transformers' loader does not follow; write `from .module import name`")
    return ".".join(base)


def is_module(package: Path, name: str) -> bool:
    folder = package.joinpath(*name.split("."))
    return bool(name) and (folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file())


def module_path(package: Path, name: str) -> Path:
    folder = package.joinpath(*name.split("."))
    path = folder.with_suffix(".py") if folder.with_suffix(".py").is_file() else folder / "__init__.py"
    if not path.is_file():
        raise ValueError(f"no module {package.name}.{name} to copy into the export folder")
    return path


def flat_name(name: str) -> str:
    """A module's file name in the flat folder: its last part ("kernels.unpad" -> "unpad")."""
    return name.rpartition(".")[2]


def apply(source: str, edits: list[Edit]) -> str:
    """`source` with each edit's span replaced (positions as `ast` gives them: 1-based lines,
    UTF-8 byte columns), last edit first so that the earlier positions stay valid."""
    lines = [line.encode("utf-8") for line in source.splitlines(keepends=True)]
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        (first, start), (last, end) = edit.start, edit.end
        lines[first - 1:last] = [lines[first - 1][:start] + edit.text.encode("utf-8") + lines[last - 1][end:]]
    return b"".join(lines).decode("utf-8")
