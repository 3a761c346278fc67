"""The prose agrees with the variants: no docstring or comment in minibert/ states a masking
rate or an n-gram unit that the variants contradict.

A rate must say whose it is (BERT's 15%, ELECTRA's, the held-out measurement's, or the
default runs', which must then be the variants' 40%); ALBERT's n-gram masking is described in
words exactly when the albert variant masks whole words.
"""

import re
from pathlib import Path

from minibert.variants import VARIANTS

PACKAGE = Path(__file__).resolve().parents[1] / "minibert"
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
    """"~15% of the tokens" reads as the rate of every run; the default runs mask 40%."""
    default_runs = round(100 * VARIANTS["albert"].default_settings().mask_prob, 6)
    wrong = []
    for where, line in lines():
        rates = [float(m.group(1)) for m in RATE.finditer(line)] if ABOUT_MASKING.search(line) else []
        whose = WHOSE.findall(line)
        if rates and not whose:
            wrong.append(f"{where}: {line.strip()}  (whose rate?)")
        elif rates and [w.lower() for w in whose] == ["default run"] and default_runs not in rates:
            wrong.append(f"{where}: {line.strip()}  (the default runs mask {default_runs:g}%)")
    assert not wrong, "masking rates in the prose that the variants contradict:\n" + "\n".join(wrong)


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
