"""The explorer's answers: one example, masked as the run masks it, and what each part of the
project's code did with it, as JSON for the page. Every number comes from calling the project's
code, never from a copy of it:

    example.py     the example: the run's own text or a typed one, masked as the run masks it
    step.py        the run's objectives on it: their metrics, and the loss summed term by term
    strip.py       the token strip: each token's fate, the spans, the sentence task's verdict
    guesses.py     what the masked-LM head, ELECTRA's generator and discriminator, and
                   DistilBERT's teacher and student made of the masked positions
    inside.py      every layer's and head's attention, and one token through one layer
    code_ran.py    which functions each panel may name, and which of them ran (`Ran`)
"""

from __future__ import annotations

from .code_ran import Ran
from .example import Example, run_example, typed_example
from .guesses import distil_panel, electra_panel, mlm_panel
from .inside import attention_panel, inside_panel
from .session import Session
from .step import Step, run_objectives
from .strip import batch_panel


def explore(session: Session, text: str | None, draw: int, position: int | None = None, layer: int = 0) -> dict:
    """The answer for one text (None: the run's own) and draw: every panel that applies, the inside
    of `layer` followed at `position` (None: the first masked token)."""
    with session.lock:
        example, ran = looked_at(session, text, draw)
        with ran:
            step = run_objectives(session, example)
            answer = {
                "batch": batch_panel(session, example, step, draw),
                "mlm": mlm_panel(session, example),
                "electra": electra_panel(session, example, step),
                "distil": distil_panel(session, example, step),
                "attention": attention_panel(session, example, step),
            }
        answer["inside"] = inside(session, example, step, first_masked(example) if position is None else position, layer)
    for panel, shown in answer.items():
        if shown is not None and panel != "inside":
            shown["code"] = ran.named(panel)
    return answer


def explore_inside(session: Session, text: str | None, draw: int, position: int, layer: int) -> dict:
    """The inside-a-layer panel alone: another token or layer of the same text and draw (ELECTRA's
    discriminator reads the generator's samples, so its objective runs again, with the same seed)."""
    with session.lock:
        example, ran = looked_at(session, text, draw)
        with ran:
            step = run_objectives(session, example) if session.head == "rtd" else Step()
        return inside(session, example, step, position, layer)


def looked_at(session: Session, text: str | None, draw: int) -> tuple[Example, Ran]:
    """The example for a text (None or blank: the run's own) and draw, and the `Ran` that watched it being made."""
    if session.reading is not None:
        raise ValueError(f"{session.directory} is a question-answering model: ask it a question about a passage")
    if not isinstance(draw, int) or isinstance(draw, bool) or not 0 <= draw < 10**9:
        raise ValueError(f"draw must be a whole number from 0, got {draw!r}")
    with Ran() as ran:
        example = typed_example(session, text, draw) if text and text.strip() else run_example(session, draw)
    return example, ran


def inside(session: Session, example: Example, step: Step, position: int, layer: int) -> dict:
    """inside.py's panel, naming the code that ran for it alone."""
    with Ran() as ran:
        panel = inside_panel(session, example, step, position, layer)
    panel["code"] = ran.named("inside")
    return panel


def first_masked(example: Example) -> int:
    """Where the inside-a-layer panel starts: the first masked token, else the first after [CLS]."""
    chosen = example.chosen.nonzero()[:, 0]
    return int(chosen[0]) if len(chosen) else min(1, len(example.chosen) - 1)
