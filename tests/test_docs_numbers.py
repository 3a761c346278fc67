"""Every number a hand-written page states is true: a test here computes it from the code, or it
lives in a generated page (docs/README.md lists them) that the page links to.

Computed here: docs/reading.md's chapter table (its files, their lines, its total and the prose's
total); the functions docs/step-path.md names, and reading.md's walk through the step against
that page. (The README's variant numbers and every masking rate: tests/test_docs_agree.py.)
"""

from __future__ import annotations

import ast
import keyword
import re
from pathlib import Path


from test_docs_pages import DOCS, ROOT, defined

# The chapter a learner reads (each folder's __init__.py says which kind of code it holds).
CHAPTER = ("config.py", "model.py", "attention.py", "heads.py", "variants.py", "objectives", "data", "training", "tokenizers")


def number(text: str) -> int:
    return int(text.replace(",", ""))


def chapter_files() -> set[str]:
    """The chapter's files that define something (an __init__.py of imports alone is a table of contents)."""
    found = set()
    for name in CHAPTER:
        path = ROOT / "minibert" / name
        for file in [path] if path.is_file() else sorted(path.glob("*.py")):
            body = ast.parse(file.read_text(encoding="utf-8")).body
            if any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in body):
                found.add(file.relative_to(ROOT).as_posix())
    return found


def reading_order_errors(text: str) -> list[str]:
    """What docs/reading.md's chapter table and its prose total get wrong, computed from the files."""
    rows = re.findall(r"^\| \d+ \| `(minibert/[^`]+)` \| ([\d,]+) \|", text, re.MULTILINE)
    listed, chapter = {path for path, _ in rows}, chapter_files()
    errors = [f"the table lists {path}, which is not a chapter file" for path in sorted(listed - chapter)]
    errors += [f"the table lacks {path}" for path in sorted(chapter - listed)]
    lines = {path: len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in chapter}
    errors += [f"{path}: says {said} lines, has {lines[path]}" for path, said in rows
               if path in lines and number(said) != lines[path]]
    total = sum(lines.values())
    table = re.search(r"\*\*total\*\* \| \*\*([\d,]+)\*\*", text)
    if not table or number(table.group(1)) != total:
        errors.append(f"the table's total says {table and table.group(1)}, the chapter has {total:,} lines")
    prose = re.search(r"The chapter is ([\d,]+) lines", text)
    if not prose or number(prose.group(1)) != total:
        errors.append(f"the prose says {prose and prose.group(1)} lines, the chapter has {total:,}")
    return errors


def test_the_reading_order_counts_the_chapter_as_it_is():
    """The table's files are the chapter's, each with its `wc -l`, and both totals are their sum."""
    errors = reading_order_errors((DOCS / "reading.md").read_text(encoding="utf-8"))
    assert not errors, "docs/reading.md is stale (update its table and total):\n" + "\n".join(errors)


def test_a_wrong_number_in_the_reading_order_fails():
    text = (DOCS / "reading.md").read_text(encoding="utf-8")
    row = re.search(r"^\| \d+ \| `minibert/model\.py` \| (\d+) \|", text, re.MULTILINE)
    planted = text[:row.start(1)] + str(int(row.group(1)) + 1) + text[row.end(1):]
    planted = re.sub(r"The chapter is [\d,]+ lines", "The chapter is 2,470 lines", planted)
    planted = re.sub(r"^\| \d+ \| `minibert/training/lamb\.py` .*\n", "", planted, flags=re.MULTILINE)
    errors = "\n".join(reading_order_errors(planted))
    assert "minibert/model.py: says" in errors and "the prose says 2,470" in errors, errors
    assert "lacks minibert/training/lamb.py" in errors and "the table's total" not in errors, errors


def step_page() -> dict[str, list[str]]:
    """docs/step-path.md's functions, by file."""
    text = (DOCS / "step-path.md").read_text(encoding="utf-8")
    return {file: re.findall(r"`([^`]+)`", names)
            for file, names in re.findall(r"^- `((?:minibert/[\w/]+|train)\.py)`: (.+)$", text, re.MULTILINE)}


def test_the_step_page_names_what_the_code_defines():
    """A rename in the step's code fails here until `python bench/step_path.py --page docs/step-path.md` runs again."""
    page = step_page()
    assert len(page) >= 5, "docs/step-path.md lists no files: its format and this test disagree"
    wrong = [f"{file}:{name}" for file, names in page.items() for name in names
             if not (ROOT / file).is_file() or not defined(ROOT / file, name.split(".<locals>.")[0])]
    assert not wrong, "docs/step-path.md names what the code does not define (run the command in its first line):\n" + "\n".join(wrong)


def test_the_reading_orders_step_is_the_traced_step():
    """Each file and function docs/reading.md's walk through the step names is one the traced step ran."""
    text = (DOCS / "reading.md").read_text(encoding="utf-8")
    walk = text.split("\n## First: one training step\n", 1)[1].split("\n## ", 1)[0]
    page = step_page()
    names = {part for qualnames in page.values() for qualname in qualnames for part in [qualname, *qualname.split(".")]}
    wrong = []
    for item in re.findall(r"^\d+\. (.+(?:\n   .+)*)", walk, re.MULTILINE):
        for named in re.findall(r"`([^`]+)`", item):
            if named.endswith(".py"):
                wrong += [] if f"minibert/{named}" in page else [f"{named} (not a file the step ran)"]
            elif re.fullmatch(r"[A-Za-z_][\w.]*", named) and not keyword.iskeyword(named) and named not in names:
                wrong.append(f"{named} (not a function the step ran)")
    assert not wrong, "docs/reading.md's step names what docs/step-path.md does not list:\n" + "\n".join(wrong)
