"""`python -m minibert explore DIR`: watch the project's own code act on real text, in a local page.

    session.py    the checkpoint, its run's pretrainer, data and masking, loaded once
    answers.py    one example masked as the run masks it, and each panel's numbers (JSON), from
                  example.py, step.py, strip.py, guesses.py, inside.py and code_ran.py
    questions.py  a question-answering model's answer: windows, logits, the n-best list
    overview.py   what does not depend on the text: parameter accounting, curves, source
    server.py     the page on 127.0.0.1 (http.server), or written as one file (--out)
    page.html     the page: HTML, CSS and plain JavaScript, no build step, no network
"""

from .server import make_server, serve, write_page
from .session import open_session

__all__ = ["make_server", "open_session", "serve", "write_page"]
