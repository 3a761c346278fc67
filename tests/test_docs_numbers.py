"""Every number a hand-written page states is true: a test here computes it from the code, or it
lives in a generated page (docs/README.md lists them) that the page links to.

Computed here, wherever a hand-written page states them: docs/reading.md's chapter table (its
files, their lines, its total and the prose's total); the functions docs/step-path.md names, and
reading.md's walk through the step against that page; the default runs' shape and step counts,
ALBERT's factorization and spans, BERT's static copies, ELECTRA's generator width and detection weight,
`Encoder.UNPAD_FROM`, the albert-base parameter count, bench/throughput.py's shapes, the default
band's seeds, spread and floor, the plateau warning's margin and the pooling's bar; `--data`'s help against the
formats the corpus reader reads. No paragraph of a hand-written page is written twice. (The
README's variant numbers and every masking rate: tests/test_docs_agree.py.)
"""

from __future__ import annotations

import ast
import importlib.util
import json
import keyword
import re
from pathlib import Path

import pytest

from test_docs_agree import clauses
from test_docs_pages import DOCS, README, ROOT, defined, hand_written

PAGES = [README, ROOT / "CHANGELOG.md", *hand_written()]
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


def load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def stated_facts() -> list[tuple[str, re.Pattern, object]]:
    """(what, the pattern that states it, its value in the code): a page's match must be the value."""
    from minibert.data.static_masks import STATIC_DUPE_FACTOR
    from minibert.finetune.recipes import SENTENCE_LEARNED
    from minibert.model import Encoder
    from minibert.runs.report import BehindWarning
    from minibert.variants import DEFAULT_MODEL
    from minibert.variants import VARIANTS

    settings = {name: variant.default_settings() for name, variant in VARIANTS.items()}
    albert, electra = VARIANTS["albert"].model, settings["electra"]
    steps = sorted(s.steps for s in settings.values())
    throughput, curves = load_bench("throughput"), load_bench("default_curves")
    mini, base = throughput.SHAPES["mini"], throughput.SHAPES["base"]
    bands = json.loads((ROOT / "minibert" / "runs" / "default_curves.json").read_text())["variants"]
    seeds = {name: len(band["seeds"]) for name, band in bands.items()}
    others = {count for name, count in seeds.items() if name != "albert"}
    return [
        ("the default runs' shape", re.compile(r"(\d+) layers, H = (\d+), an (\d+)k (?:SentencePiece )?vocabulary, "
                                               r"(?:batches of )?(\d+) × (\d+)"),
         (DEFAULT_MODEL["num_layers"], DEFAULT_MODEL["hidden_size"], DEFAULT_MODEL["vocab_size"] // 1000,
          settings["albert"].batch_size, settings["albert"].seq_len)),
        ("the default runs' steps", re.compile(r"for ([\d,]+)–([\d,]+) steps"), (steps[0], steps[-1])),
        ("ALBERT's factorization", re.compile(r"E = (\d+)(?: < |, projected to )H = (\d+)"),
         (albert["embedding_size"], albert["hidden_size"])),
        ("ALBERT's n-gram spans", re.compile(r"spans of up to (\d+) words"), (settings["albert"].max_span,)),
        ("BERT's static copies", re.compile(r"(\d+) copies drawn once"),
         (settings["bert"].dupe_factor or STATIC_DUPE_FACTOR,)),
        ("ELECTRA's generator width", re.compile(r"`electra` \|.* a generator 1/(\d+) as wide"),
         (round(1 / electra.generator_fraction),)),
        ("ELECTRA's detection weight", re.compile(r"`electra` \|.* weighted (\d+) against"), (round(electra.rtd_weight),)),
        ("Encoder.UNPAD_FROM", re.compile(r"(?i)(?=.*unpad(?:s|ding|_from)?\b).*?(\d+)%"), (round(100 * Encoder.UNPAD_FROM),)),
        ("bench/throughput.py's mini shape",
         re.compile(r"\*\*mini\*\* is (\d+) layers, H = (\d+), (\d+) heads, a ([\d,]+)-word "
                    r"vocabulary, batches of (\d+) × (\d+), (\d+)% of the tokens masked"),
         (mini["layers"], mini["hidden"], mini["heads"], mini["vocab"], mini["batch"], mini["length"],
          round(100 * throughput.MASKED))),
        ("bench/throughput.py's base shape",
         re.compile(r"\*\*base\*\* is BERT-base \((\d+) layers, H = (\d+)\), batches of (\d+) × (\d+)"),
         (base["layers"], base["hidden"], base["batch"], base["length"])),
        ("bench/throughput.py's padded lengths", re.compile(r"lengths drawn uniformly from \[(\d+), (\d+)\]"),
         (mini["length"] // 8, mini["length"])),
        ("the band's spread and floor",
         re.compile(r"mean ± (\w+) sample standard deviations, never narrower than ±(\d+(?:\.\d+)?)"),
         (round(curves.SPREAD), curves.FLOOR)),
        ("the band's seeds", re.compile(r"albert's (\w+), the others' (\w+)\)"), (seeds["albert"], *others)),
        ("the plateau warning's margin", re.compile(r"within ([\d.]+)× of the unigram guess"), (BehindWarning.MARGIN,)),
        ("the pooling's bar", re.compile(r"reaches ([\d.]+) \(`SENTENCE_LEARNED`\)"), (SENTENCE_LEARNED,)),
    ]


def value(text: str) -> float:
    return WORDS.get(text, None) or float(text.replace(",", ""))


def test_every_stated_setting_is_the_codes():
    """Each pattern must still find its fact somewhere, so that a reworded page cannot slip past."""
    facts = stated_facts()
    found, wrong = set(), []
    for page, clause in clauses(PAGES):
        for what, pattern, expected in facts:
            for match in pattern.finditer(clause):
                found.add(what)
                said = tuple(value(group) for group in match.groups())
                if said != tuple(float(e) for e in expected):
                    wrong.append(f"{page}: {what} is {expected}, the page says {match.group(0)!r}")
    assert not wrong, "\n".join(wrong)
    assert found == {what for what, _, _ in facts}, f"no page states: {sorted({w for w, _, _ in facts} - found)}"


def test_the_readmes_example_counts_the_parameters():
    from minibert import Encoder, ModelConfig

    block = README.read_text(encoding="utf-8").split("```python\n", 1)[1].split("```", 1)[0]
    said = number(re.search(r'preset\("albert-base"\)\)\s+# ([\d,]+) parameters', block).group(1))
    config = ModelConfig.preset("albert-base")
    count = sum(p.numel() for p in Encoder(config).parameters())
    assert said == count, f"README says albert-base has {said:,} parameters, it has {count:,}"
    assert f"[1, 4, {config.hidden_size}]" in block


def test_the_data_flags_help_names_every_format_the_reader_reads():
    from minibert.corpus.formats import COMPRESSIONS, TABLE_KINDS, TEXT_KINDS
    from minibert.runs.cli import build_parser

    help = next(action.help for action in build_parser()._actions if action.dest == "data")
    missing = [suffix for suffix in (*TEXT_KINDS, *TABLE_KINDS, *COMPRESSIONS) if suffix not in help]
    assert not missing and "datasets" in help, f"--data's help does not name {missing}: {help}"


def repeated_paragraphs(pages: dict[str, str], words: int = 20) -> list[str]:
    """Each paragraph of more than `words` words that appears a second time, within a page or across."""
    seen, repeated = {}, []
    for name, text in pages.items():
        for paragraph in re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.DOTALL)):
            normal = " ".join(paragraph.split())
            if len(normal.split()) > words:
                if normal in seen:
                    repeated.append(f"{name} repeats a paragraph of {seen[normal]}: {normal[:70]}...")
                seen.setdefault(normal, name)
    return repeated


def test_no_paragraph_is_written_twice():
    pages = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in PAGES}
    assert not (repeated := repeated_paragraphs(pages)), "\n".join(repeated)


def test_a_repeated_paragraph_is_found():
    long = " ".join(["NSP's segment pairs are the cost for BERT, they carry more real tokens a batch"] * 2)
    short = "A short paragraph may repeat."
    pages = {"a.md": f"# A\n\n{long}\n\n{short}\n", "b.md": f"{short}\n\nother words\n\n{long}\n"}
    assert repeated_paragraphs(pages) == [f"b.md repeats a paragraph of a.md: {long[:70]}..."]
    assert repeated_paragraphs({"a.md": f"{long}\n\n{long}\n"}) == [f"a.md repeats a paragraph of a.md: {long[:70]}..."]
