"""An answer's character span mapped onto the tokens that cover it (minibert/finetune/kinds/windows.py)."""

from hypothesis import given, strategies as st

from minibert.finetune.kinds.squad_scores import normalize_answer
from minibert.finetune.kinds.windows import aligned, answer_tokens

# "The 1990s were loud." as a whitespace-and-punctuation tokenizer with a split "1990 ##s" would cut it
CONTEXT = "The 1990s were loud."
SPANS = [(0, 3), (4, 8), (8, 9), (10, 14), (15, 19), (19, 20)]


def test_normalize_answer_is_squads():
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("an Apple, a day") == "apple day"
    assert normalize_answer("theory") == "theory"  # an article only as a whole word


def test_answer_tokens_cover_the_answer():
    assert answer_tokens(SPANS, 4, 9) == (1, 2)  # "1990s"
    assert answer_tokens(SPANS, 5, 7) == (1, 1)  # inside one token
    assert answer_tokens(SPANS, 9, 10) is None  # only the space between tokens
    assert answer_tokens([(0, 0), (0, 3), (4, 4), (4, 6)], 0, 6) == (1, 3)  # empty spans begin and end nothing


def test_aligned_only_where_whole_tokens_spell_the_answer():
    assert aligned(CONTEXT, SPANS, "1990s", 4)
    assert aligned(CONTEXT, SPANS, "1990", 4)  # "1990" is a token of its own here
    assert not aligned(CONTEXT, [(0, 3), (4, 9), (10, 14)], "1990", 4)  # one token "1990s": the answer cuts it
    assert aligned(CONTEXT, SPANS, "the 1990s", 0)  # articles do not count


@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.integers(0, 200), st.integers(1, 20))
def test_answer_tokens_are_exactly_those_that_overlap(gaps, char_start, length):
    """Tokens one after another with gaps: the first and last returned are the first and last that
    overlap the answer, so every token between overlaps it or lies inside it."""
    spans, at = [], 0
    for gap in gaps:
        spans.append((at, at + gap))
        at += gap + 1
    char_end = char_start + length
    found = answer_tokens(spans, char_start, char_end)
    overlapping = [n for n, (a, b) in enumerate(spans) if a < b and a < char_end and b > char_start]
    assert found == ((overlapping[0], overlapping[-1]) if overlapping else None)
