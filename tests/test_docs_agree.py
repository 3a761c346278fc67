"""The prose agrees with the variants: no docstring, comment or page states a masking rate or
an n-gram unit that the variants contradict.

A rate in minibert/ must say whose it is (BERT's 15%, ELECTRA's, the held-out measurement's,
or the default runs'); every rate given for a default run, anywhere in the prose (README.md,
docs/*.md, minibert/), must be that run's variant's; ALBERT's n-gram masking is described in
words exactly when the albert variant masks whole words.
"""

import re
from pathlib import Path

from minibert.training.settings import MASK_PROB
from minibert.variants import VARIANTS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minibert"
RATE = re.compile(r"(\d+(?:\.\d+)?)\s*%")
ABOUT_MASKING = re.compile(r"mask|select", re.IGNORECASE)
# Whose rate a line states: a family's (BERT's 15%; "BERT" also matches RoBERTa and ALBERT),
# the held-out measurement's, or the default runs' (which must then be theirs).
WHOSE = re.compile(r"BERT|ELECTRA|held-out|EVAL_MASK_PROB|default run", re.IGNORECASE)


def lines():
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            yield f"{path.relative_to(PACKAGE.parent)}:{number}", line


def test_every_masking_rate_in_the_prose_says_whose_it_is():
    """"~15% of the tokens" reads as the rate of every run; the default runs mask more."""
    wrong = [f"{where}: {line.strip()}" for where, line in lines()
             if ABOUT_MASKING.search(line) and RATE.search(line) and not WHOSE.search(line)]
    assert not wrong, "masking rates in the prose that do not say whose they are:\n" + "\n".join(wrong)


def percent(probability: float) -> float:
    return round(100 * probability, 6)


RATES = {name: percent(variant.default_settings().mask_prob) for name, variant in VARIANTS.items()}
NAME = "|".join(RATES)
# A rate stated for a default run: "<variant>'s default run", "the default <variant> run" (or
# model), a row of the README's table of variants; or all of them: "the default runs", "all five".
ONE_RUN = re.compile(rf"\b({NAME})(?:'s)?\s+default[\s-]+(?:runs?|model)\b|\bdefault\s+({NAME})\s+(?:runs?|model)\b"
                     rf"|^\|\s*`({NAME})`\s*\|", re.IGNORECASE)
EVERY_RUN = re.compile(r"\bdefault[\s-]+runs?\b|\ball five\b", re.IGNORECASE)
# The rate a masking clause gives: "40% masking", "25% masked", "masks 25% of the tokens".
MASKING_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*%\s+mask(?:ing|ed)\b|\bmask(?:s|ing|ed)?\s+(\d+(?:\.\d+)?)\s*%", re.IGNORECASE)


def clauses():
    """(where, clause) of the prose: README.md, docs/*.md and minibert/'s docstrings and comments,
    wrapped lines joined (a table row stands alone), cut at each sentence's or clause's end."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(PACKAGE.rglob("*.py"))]:
        text = re.sub(r"^[ \t]*#+ ?", "", path.read_text(), flags=re.MULTILINE)  # comments read as prose
        for paragraph in re.split(r"\n\s*\n|\n(?=\|)|(?<=\|)\n", text):
            paragraph = " ".join(paragraph.split())
            for clause in [paragraph] if paragraph.startswith("|") else re.split(r"(?<=[.;:!?])\s+", paragraph):
                yield path.relative_to(ROOT), clause


def stated_rate(clause: str, mention: re.Match) -> float | None:
    """The rate the clause gives for the run it mentions: right after it ("the default runs'
    40%"), right before it ("40% in the default runs"), or the first masking rate after it."""
    found = (re.compile(r"(?:'s?)?:?\s*(\d+(?:\.\d+)?)\s*%").match(clause, mention.end())
             or re.search(r"(\d+(?:\.\d+)?)\s*%\s+(?:in|for|of)\s+(?:all\s+)?(?:the\s+)?$", clause[:mention.start()])
             or MASKING_RATE.search(clause, mention.end()))
    return float(next(group for group in found.groups() if group)) if found else None


def test_every_default_runs_masking_rate_in_the_prose_is_its_variants():
    """A masking rate given for a variant's default run is that variant's (variants.py); one given
    for all the default runs is MASK_PROB, and names each variant that masks another share
    (ELECTRA's 25%) with its own rate, or points to variants.py."""
    others = {name: rate for name, rate in RATES.items() if rate != percent(MASK_PROB)}
    wrong, checked = [], set()
    for where, clause in clauses():
        named = list(ONE_RUN.finditer(clause))
        for mention in named:
            variant = next(group for group in mention.groups() if group).lower()
            rate = stated_rate(clause, mention)
            checked |= {variant} if rate is not None else set()
            if rate is not None and rate != RATES[variant]:
                wrong.append(f"{where}: {clause}  ({variant}'s default run masks {RATES[variant]:g}%)")
        for mention in EVERY_RUN.finditer(clause):
            if any(m.start() <= mention.start() < m.end() for m in named):
                continue  # "ELECTRA's default run": one variant's, checked above
            rate = stated_rate(clause, mention)
            if rate is None:
                continue
            checked.add("every")
            if rate != percent(MASK_PROB):
                wrong.append(f"{where}: {clause}  (the default runs mask {percent(MASK_PROB):g}%, MASK_PROB)")
            unsaid = [f"{name}'s {other:g}%" for name, other in others.items()
                      if "variants.py" not in clause
                      and not (re.search(rf"\b{name}\b", clause, re.IGNORECASE) and other in map(float, RATE.findall(clause)))]
            if unsaid:
                wrong.append(f"{where}: {clause}  (not every default run: say {', '.join(unsaid)} or point to variants.py)")
    assert not wrong, "masking rates of the default runs that the variants contradict:\n" + "\n".join(wrong)
    assert {"every", "albert", *others} <= checked, f"the patterns no longer find the prose's rates: {checked}"


def test_the_n_gram_unit_in_the_prose_is_the_albert_variants():
    albert = VARIANTS["albert"].default_settings()
    assert albert.max_span == 3
    unit = "word" if albert.whole_word else "token"
    wrong = [f"{where}: {line.strip()}" for where, line in lines()
             if re.search(r"n-gram", line, re.IGNORECASE) and "ALBERT" in line.upper() and "span" in line
             and unit not in line.lower()]
    assert not wrong, f"ALBERT's n-gram masking described without its unit ({unit}s):\n" + "\n".join(wrong)


def test_the_reading_order_counts_the_lines_the_files_have():
    """docs/reading.md's table of the core: each file's line count and the total, as they are."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "reading.md").read_text()
    rows = re.findall(r"^\| \d+ \| `(minibert/[^`]+)` \| (\d+) \|", text, re.MULTILINE)
    assert len(rows) >= 10
    actual = {path: len((root / path).read_text().splitlines()) for path, _ in rows}
    wrong = [f"{path}: says {said}, has {actual[path]}" for path, said in rows if int(said) != actual[path]]
    assert not wrong, "docs/reading.md's line counts are stale:\n" + "\n".join(wrong)
    total = int(re.search(r"\*\*total\*\* \| \*\*([\d,]+)\*\*", text).group(1).replace(",", ""))
    assert total == sum(actual.values())


# The README's table of variants: one held-out number each, the stored band's mean at the last
# evaluation (minibert/runs/default_curves.json, measured by bench/default_curves.py).
README_METRIC = {"MLM accuracy": "eval_mlm_accuracy", "replaced-token detection AUC": "eval_rtd_auc"}


def test_the_readmes_variant_numbers_are_the_stored_bands():
    import json

    curves = json.loads((PACKAGE / "runs" / "default_curves.json").read_text())["variants"]
    text = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|.*\| ([\w -]+?) \*\*([\d.]+)\*\* \|$", text, re.MULTILINE)
    assert {name for name, _, _ in rows} == set(VARIANTS), f"the README's table of variants: {rows}"
    wrong = []
    for name, metric, said in rows:
        mean = curves[name]["metrics"][README_METRIC[metric]]["mean"][-1]
        if said != f"{mean:.3f}":
            wrong.append(f"{name}: README says {metric} {said}, default_curves.json's mean is {mean:.3f}")
    assert not wrong, "\n".join(wrong)
