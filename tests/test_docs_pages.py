"""The front page and the docs keep their shape: a README a learner reads in minutes, one question
a docs page, generated pages that say so, no lab notebook, and links and names that resolve.

docs/README.md lists the generated pages (its "Generated pages" table); every other page in docs/
is hand-written and opens with the question it answers and its short answer.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
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


# The code's prose (docstrings and comments under minibert/ and in train.py, and bench/'s module
# docstrings) says what the code does and why; a measurement, the code's history or a ticket
# belongs in a generated page, bench output or CHANGELOG.md, which the prose may link to.
QUOTED = re.compile(r"`[^`\n]*`|\"[^\"\n]*(?:\n[^\"\n]*)?\"|“[^”]*”|(?<!\w)'[^'\n]*'(?!\w)|[\w.-]*/[\w./-]+(?:#\d+)?|\b[\w-]+\.(?:py|md)\b")
SENTENCE_END = re.compile(r"(?<=[.;!?])\s+|\n\s*\n")
FIGURE = r"\d(?:[\d.,]*\d)?\s?(?:%|×(?!\s?\d)|x\b(?!\s?\d)|[KMG]B\b|GFLOP)"  # not a shape, 32 × 64
TIME = (r"\b(?:step|wall|training|the|its|less|more) time\b|\btimes? (?:as|the)\b|\btok(?:en)?s?/s\b|\bthroughput\b"
        r"|\bcheaper\b|\bcostlier\b|\bof (?:a|each|one|the) (?:training )?step\b(?!['s])|\b(?:a|per) second\b")
TIMING = re.compile(r"\d(?:[\d.,]*\d)?\s?(?:ns|µs|us|ms|s|secs?|seconds?|mins?|minutes?|h|hours?)\b")  # lower case: not 3H
SETTING = re.compile(r"\bevery\b|\bbudget\b|\btimeout\b|\blimit\b|\bdeadline\b|--\w", re.IGNORECASE)
NOTEBOOK = {
    "a speed comparison": re.compile(r"\b(?:faster|slower|quicker|speed-?ups?|slow-?downs?)\b", re.IGNORECASE),
    "a measurement": re.compile(rf"\bmeasured:|{FIGURE}.*?(?:{TIME})|(?:{TIME}).*?{FIGURE}", re.IGNORECASE | re.DOTALL),
    "history": re.compile(r"\bused to\b|\bearlier versions?\b|\b(?:was|were|been) renamed\b|\b(?:is|are|was|were) now\b"
                          r"|\bnow (?:faster|slower|reads?|uses?|takes?|writes?|decodes?)\b|\bany ?more\b|\b(?:had|held) before\b"
                          r"|\bno longer (?:uses?|reads?|re-exports?|needs?|has|have|does|is|are|calls?|writes?|keeps?)\b"
                          r"|\bpreviously\b|\bformerly\b|\buntil (?:it|they) (?:is|are|has been|have been) (?:measured|tested)\b"
                          r"|\bnot yet (?:measured|tested)\b|\b(?:torch|triton|transformers|numpy|python)\s+\d+\.\d+(?:\.\d+)?'s\b"
                          r"|\b20\d\d-\d\d-\d\d\b", re.IGNORECASE),
    "a ticket": re.compile(r"(?<![\w/])(?<!UAX )#\d+|\bissues?\b|\btickets?\b", re.IGNORECASE),
}
# An approximate figure, or a ratio written N×: "~14%", "about 36%", "~2.4×", "1.4×". That is how a
# measurement reads even in a sentence with no word of time, so the code a learner reads (the chapter,
# tests/test_docs_numbers.py's CHAPTER, and the speed code beside it, kernels/) states none; the
# generated page that measured it does, and the prose links to it. An exact figure is a fact of a
# paper or a setting, not a measurement: "BERT masks 15%", "a generator 1/4 as wide", "3 × the
# forward FLOPs" (a product, spaced), "[H, 3H]", "32 × 64" (a shape).
NUMBER = r"\d(?:[\d.,]*\d)?"
APPROXIMATE = re.compile(rf"(?:~|≈|\b(?:about|around|roughly|approximately|nearly|almost)\s+){NUMBER}\s?(?:%|×|x\b)"
                         rf"|(?<![\w.]){NUMBER}(?:×|x\b)(?!\s?\d)", re.IGNORECASE)
SPEED_CODE = ("minibert/kernels/",)


def docstrings_and_comments(source: str, module_only: bool = False):
    """(first line, text) of each docstring (the module's alone with `module_only`) and each run
    of comment lines; string literals that are code or messages are not prose."""
    tree = ast.parse(source)
    nodes = [tree] if module_only else [node for node in ast.walk(tree) if isinstance(
        node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in nodes:
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            yield first.value.lineno, first.value.value
    if module_only:
        return
    run: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            if run and token.start[0] != run[-1][0] + 1:
                yield run[0][0], "\n".join(text for _, text in run)
                run = []
            run.append((token.start[0], token.string.lstrip("#").strip()))
    if run:
        yield run[0][0], "\n".join(text for _, text in run)


def lab_notebook(source: str, module_only: bool = False, learner_reads: bool = False) -> list[str]:
    """"line: what: the words" for each measurement, piece of history or ticket in the source's
    prose. The rule, sentence by sentence, quoted text, `code` and file paths left out:

    - a speed comparison: "faster", "slower", "speed-up", always (the code does not race itself);
    - a measurement: "Measured:", or a figure (N%, N×, N MB) in a sentence about time or speed
      ("less time", "tokens/s", "of a step"); a figure alone is a fact of the method or the paper
      ("BERT masks 15% of the tokens", "a generator 1/4 as wide", "[H, 3H]");
    - with `learner_reads` (the chapter and kernels/), an approximate figure as well, in any
      sentence: "~N%", "about N%", "~N×", "N×" (APPROXIMATE);
    - a timing (N ms, N s, N minutes) unless the sentence makes it a setting (every, budget,
      timeout, limit, deadline, a --flag);
    - history: "used to", "earlier versions", "was renamed", "is now", "had before", "no longer
      reads", "until it is measured", a library version's behaviour ("torch 2.13's"), a date;
    - a ticket: "#32", "issue", "ticket" (a standard's "UAX #29" and "owner/repo#N" are citations).
    """
    kinds = {**NOTEBOOK, "an approximate figure": APPROXIMATE} if learner_reads else NOTEBOOK
    return sorted_hits(hit for first_line, text in docstrings_and_comments(source, module_only)
                       for hit in notebook_hits(first_line, text, kinds))


def notebook_hits(first_line: int, text: str, kinds: dict[str, re.Pattern]):
    """(line, "line: what: the words") for each of `kinds`, and each timing, in the prose `text`."""
    text = QUOTED.sub(lambda match: " " * len(match.group(0)), text)
    bounds = [0, *(match.end() for match in SENTENCE_END.finditer(text)), len(text)]
    for begin, end in zip(bounds, bounds[1:]):
        sentence = text[begin:end]
        hits = [(what, match) for what, pattern in kinds.items() for match in pattern.finditer(sentence)]
        hits += [("a timing", match) for match in TIMING.finditer(sentence) if not SETTING.search(sentence)]
        for what, match in hits:
            line = first_line + text[:begin + match.start()].count("\n")
            yield line, f"{line}: {what}: {' '.join(match.group(0).split())!r}"


def sorted_hits(hits) -> list[str]:
    return [said for _, said in sorted(set(hits))]


def code_prose_files() -> list[tuple[str, bool, bool]]:
    """(path, module docstring only, a learner reads it) of every file whose prose the rule reads:
    minibert/ and train.py, whole; bench/, its module docstrings. A learner reads the chapter
    (tests/test_docs_numbers.py's `chapter_files`) and kernels/."""
    from test_docs_numbers import chapter_files  # it imports this module: read at call time

    chapter = chapter_files()
    code = [path.relative_to(ROOT).as_posix() for path in [*sorted((ROOT / "minibert").rglob("*.py")), ROOT / "train.py"]]
    return [(name, False, name in chapter or name.startswith(SPEED_CODE)) for name in code] + [
        (path.relative_to(ROOT).as_posix(), True, False) for path in sorted((ROOT / "bench").rglob("*.py"))]


def test_no_lab_notebook_in_the_codes_prose():
    """Docstrings and comments say what the code does and why, in the present tense; a reader who
    needs the measured reason follows a link to the generated page that holds it."""
    flagged = {name: lab_notebook((ROOT / name).read_text(encoding="utf-8"), module_only, learner_reads)
               for name, module_only, learner_reads in code_prose_files()}
    wrong = [f"{name}:{said}" for name, found in flagged.items() for said in found]
    assert not wrong, "measurements, history or tickets in docstrings and comments:\n" + "\n".join(wrong)


def test_the_lab_notebook_rule_finds_what_it_names(tmp_path):
    planted = (
        '"""The sparse last layer: 15% faster steps measured on 2 cores."""\n'
        "\n"
        "\n"
        "def pad(x):\n"
        '    """Measured: the fused loss takes 7% less time than the plain one."""\n'
        "    # the decoder runs in 212 ms here\n"
        "    return x  # issue #37: the name `pad` was renamed from `fill`\n"
        "\n"
        "\n"
        "# torch 2.13's manual_seed would take all 64 bits\n"
        "def seed(key):\n"
        '    """Pick the backend, until it is measured on a GPU."""\n'
        "    return key >> 1\n")
    (tmp_path / "planted.py").write_text(planted, encoding="utf-8")
    found = "\n".join(lab_notebook((tmp_path / "planted.py").read_text(encoding="utf-8")))
    for line, what in [(1, "a speed comparison"), (5, "a measurement"), (6, "a timing"), (7, "a ticket"),
                       (7, "history"), (10, "history"), (12, "history")]:
        assert f"{line}: {what}:" in found, f"line {line}, {what}: not found in\n{found}"
    fair = (
        '"""BERT masks 15% of the tokens; the generator is 1/4 as wide.\n'
        "\n"
        "One [H, 3H] matmul reads the input once ('90s' is a --budget of 90 seconds), and the run\n"
        "stops at the deadline of 5 minutes. See UAX #29 and triton-lang/triton#11584.\n"
        '"""\n'
        "\n"
        "\n"
        "def train(budget):\n"
        "    # a warm-up over 15% of the steps, then linear decay; 3 × the forward FLOPs\n"
        "    return budget  # held-out accuracy is measured at 15%, on batches of 32 × 64 (`~2×`)\n")
    assert lab_notebook(fair) == [], "the rule flags a paper's fact, a setting or a citation"
    assert lab_notebook(fair, learner_reads=True) == [], "the approximate figures' rule flags an exact figure"
    approximate = (
        '"""With ~14% of the tokens replaced, answering "original" everywhere scores 0.86.\n'
        "\n"
        "Spans begun at the naive rate cover about 36% of the words, and buckets waste ~1.2×\n"
        "the FLOPs of one grid; the fused loss is 1.4× the plain one.\n"
        '"""\n')
    found = "\n".join(lab_notebook(approximate, learner_reads=True))
    for line, words in [(1, "~14%"), (3, "about 36%"), (3, "~1.2×"), (4, "1.4×")]:
        assert f"{line}: an approximate figure: {words!r}" in found, f"line {line}, {words}: not found in\n{found}"
    assert lab_notebook(approximate) == [], "the approximate figures' rule reads only the code a learner reads"


# Hand-written pages whose prose still states measurements (timings, speed-ups) that belong in a
# generated page; each is to move there, and this set to shrink.
MEASURED_PROSE = {"docs/gpu.md", "docs/scale.md"}


def test_no_measurement_in_the_hand_written_prose():
    """A page explains; its timings and speed-ups come from a generated page it links to (the same
    rule as the code's prose, history aside: tables and code blocks are not read)."""
    kinds = {what: NOTEBOOK[what] for what in ("a speed comparison", "a measurement")}
    flagged = {}
    for path in [README, ROOT / "CHANGELOG.md", *hand_written()]:
        text = re.sub(r"```.*?```", lambda match: "\n" * match.group(0).count("\n"), path.read_text(encoding="utf-8"), flags=re.DOTALL)
        text = "\n".join("" if line.startswith("|") else line for line in text.split("\n"))
        flagged[path.relative_to(ROOT).as_posix()] = sorted_hits(notebook_hits(1, text, kinds))
    wrong = [f"{name}:{said}" for name, found in flagged.items() if name not in MEASURED_PROSE for said in found]
    assert not wrong, "measurements in hand-written prose (move them to a generated page and link it):\n" + "\n".join(wrong)
    clean = sorted(name for name in MEASURED_PROSE if not flagged.get(name))
    assert not clean, f"no longer flagged, so take them off MEASURED_PROSE: {clean}"


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


def test_every_import_a_command_in_the_docs_makes_resolves():
    """A `python -c "from minibert.x import y"` in a README or docs command (bash blocks, which
    test_docs_code.py does not run) names a module and names that exist: a module moved leaves no
    command behind that fails for the reader who pastes it."""
    import importlib

    found = [(page.name, module, names) for page in [README, *sorted(DOCS.glob("*.md"))]
             for module, names in re.findall(r"\bfrom (minibert[\w.]*) import ([\w, ]+?)(?: as \w+)?;", page.read_text(encoding="utf-8"))]
    assert found, "no command in the docs imports from minibert; the pattern has gone stale"
    missing = [f"{page}: from {module} import {name}" for page, module, names in found for name in map(str.strip, names.split(","))
               if not hasattr(importlib.import_module(module), name)]
    assert not missing, f"the docs' commands import what minibert does not have: {missing}"
