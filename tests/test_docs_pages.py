"""The front page and the docs keep their shape: a README a learner reads in minutes, one question
a docs page, generated pages that say so, no lab notebook, and links and names that resolve.

docs/README.md lists the generated pages (its "Generated pages" table); every other page in docs/
is hand-written and opens with the question it answers and its short answer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def generated() -> dict[str, str]:
    """docs/README.md's generated pages: file name -> the command that writes it."""
    section = (DOCS / "README.md").read_text(encoding="utf-8").split("\n## Generated pages\n", 1)[1]
    return {name: command for name, command in re.findall(r"^\| \[([\w.-]+\.md)\]\([\w.-]+\) \| `([^`]+)` \|$", section, re.MULTILINE)}


def hand_written() -> list[Path]:
    return [path for path in sorted(DOCS.glob("*.md")) if path.name not in generated()]


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "README.md is over 250 lines"
    assert len(text.encode()) <= 15_000, "README.md is over 15 KB"
    first_screen = text.split("\n## Where each idea lives\n", 1)[0]
    assert "## Quick start" in first_screen and "docs/default-runs.png" in first_screen


def test_the_generated_pages_say_so_first_and_name_their_command():
    pages = generated()
    assert {"results.md", "gpu-compile.md"} <= set(pages)
    for name, command in pages.items():
        lines = (DOCS / name).read_text(encoding="utf-8").splitlines()
        assert "generated" in lines[0].lower() and f"`{command}`" in lines[0], f"docs/{name}'s first line: {lines[0]}"
        head = lines[:lines.index(next(line for line in lines if line.startswith("## ")))] if any(
            line.startswith("## ") for line in lines) else lines
        summary = [line for line in head[1:20] if line.startswith("| ") or re.search(r"\d.*\.$", line)]
        assert summary, f"docs/{name}: no at-a-glance summary in its first lines, before its first section"
        assert (ROOT / command.split()[1]).is_file(), f"docs/{name}: its command's script {command.split()[1]} is gone"


def test_every_hand_written_page_opens_with_its_question_and_short_answer():
    for path in hand_written():
        opening = "\n".join(path.read_text(encoding="utf-8").splitlines()[:15])
        assert "**The question.**" in opening and "**The short answer" in opening, f"{path.name} does not open with them"
        assert not opening.lower().startswith("_generated"), f"{path.name} says it is generated: list it in docs/README.md"


def test_the_hand_written_docs_stay_small():
    sizes = {path.name: len(path.read_bytes()) for path in hand_written()}
    assert all(size <= 25_000 for size in sizes.values()), f"pages over 25 KB: {sizes}"
    assert sum(sizes.values()) <= 100_000, f"hand-written docs total {sum(sizes.values()):,} bytes, over 100 KB"


def test_every_docs_page_is_listed():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    unlisted = [path.name for path in DOCS.glob("*.md") if path.name != "README.md" and f"]({path.name})" not in index]
    assert not unlisted, f"docs/README.md does not list: {unlisted}"


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
HISTORY = re.compile(r"re-measured|first build|\bit was \d|\bthe old (?:default|lists|rate)|before spans|"
                     r"\bbefore the (?:change|restructure)|\bnow (?:decode|faster|slower)", re.IGNORECASE)


def prose() -> list[tuple[str, str]]:
    """(where, text) of the README, the hand-written docs and minibert's docstrings."""
    found = [(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")) for path in [README, *hand_written()]]
    for path in sorted((ROOT / "minibert").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node)
                if docstring:
                    found.append((path.relative_to(ROOT).as_posix(), docstring))
    return found


def test_no_lab_notebook_outside_the_generated_pages():
    """A dated measurement or a comparison with an earlier version of the code belongs in a generated
    page, bench output or CHANGELOG.md."""
    wrong = [f"{where}: {match.group(0)!r}" for where, text in prose()
             for match in [*DATE.finditer(text), *HISTORY.finditer(text)]]
    assert not wrong, "dates or history in the prose:\n" + "\n".join(wrong)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_relative_link_resolves():
    pages = [README, ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]
    wrong = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            where = (page.parent / file).resolve() if file else page
            if not where.exists():
                wrong.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                wrong.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not wrong, "links that do not resolve:\n" + "\n".join(wrong)


def defined(path: Path, name: str) -> bool:
    """Whether `name` ("f", "Class", "Class.method" or a module-level NAME = ...) is defined in `path`."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    *outer, last = name.split(".")
    for part in outer:
        body = next((node.body for node in body if isinstance(node, ast.ClassDef) and node.name == part), [])
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == last:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(target, ast.Name) and target.id == last for target in targets):
            return True
    return False


def test_every_file_and_function_the_readme_names_exists():
    section = README.read_text(encoding="utf-8").split("\n## Where each idea lives\n", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([\w/]+\.py):([\w.]+)`", section)
    assert len(named) >= 20, "the concept table names fewer functions than it should"
    wrong = [f"{file}:{name}" for file, name in named
             if not (ROOT / "minibert" / file).is_file() or not defined(ROOT / "minibert" / file, name)]
    assert not wrong, f"README names what minibert/ does not define: {wrong}"
