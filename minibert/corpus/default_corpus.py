"""The corpus used when none is given: the English prose that ships inside CPython.

Pretraining needs a few MB of real sentences, and `python train.py` should work on a
fresh, offline machine. Every CPython install carries such text: the reference manual's
topics (`pydoc_data.topics`, what `help("topic")` prints) and the docstrings and comments
of the standard library's source files. This module turns them into a corpus file:

* one document per manual topic and per source file (its docstrings and comments in
  source order), so documents have a topic and their sentences follow each other;
* only paragraphs that read as prose are kept (`prose_paragraph`): no code, doctests,
  tables or headings; reST markup is stripped and lines are re-flowed;
* repeated paragraphs are kept once (many docstrings are inherited or copied).

The result (~1.9 MB, ~680 documents, on CPython 3.11) is written once to `<data_dir>/python-docs-*.txt`,
in the `.txt` corpus format of `documents.py`, and reused. The walk is sorted and the
cleaning deterministic, so the same Python always yields the same file.
"""

from __future__ import annotations

import ast
import platform
import re
import sysconfig
import warnings
from pathlib import Path
from typing import Iterator

import pydoc_data.topics

from ..operations.files import publish_file
from .cache import DEFAULT_DATA_DIR

RECIPE_VERSION = 1  # bump when the cleaning below changes, so old caches are not reused

_UNDERLINE = re.compile(r"[-=*~^#+_.]{3,}")
_REST_ROLE = re.compile(r":[\w:.-]+:`([^`]*)`")
_PLAIN_WORD = re.compile(r"[(\"']?[A-Za-z][a-z'-]*[,.;:!?)\"']*")
_SENTENCE_START = re.compile(r"[A-Z\"']")
_SENTENCE_END = re.compile(r"[.!?][\"')]*")
_COMMENT_LINE = re.compile(r"\s*#+(.*)")


def default_corpus_path(data_dir: str | Path = DEFAULT_DATA_DIR) -> Path:
    """The default corpus file, built on first use and reused afterwards."""
    path = Path(data_dir) / f"python-docs-py{platform.python_version()}-v{RECIPE_VERSION}.txt"
    if not path.exists():
        publish_file(_write_corpus, path)
    return path


def prose_paragraph(block: str) -> str | None:
    """A block of documentation text -> one re-flowed prose line, or None if it is not prose.

    Prose here means: at least 6 words, starting like a sentence (capital or quote),
    ending like one (. ! ?), no interactive examples, and at least 70% plain words.
    """
    lines = [line.strip() for line in block.splitlines()]
    lines = [line for line in lines if line and not _UNDERLINE.fullmatch(line)]
    if not lines or any(line.startswith((">>>", "...", "$ ")) for line in lines):
        return None
    text = _REST_ROLE.sub(r"\1", " ".join(lines)).replace("`", "")
    text = " ".join(text.removeprefix("* ").removeprefix("- ").split())
    words = text.split()
    if len(words) < 6 or not _SENTENCE_START.match(text) or not _SENTENCE_END.search(words[-1]):
        return None
    if sum(bool(_PLAIN_WORD.fullmatch(word)) for word in words) < 0.7 * len(words):
        return None
    return text


def _write_corpus(path: Path) -> None:
    seen: set[str] = set()
    with open(path, "w", encoding="utf-8") as out:
        for blocks in _documentation_sources():
            document = []
            for paragraph in map(prose_paragraph, blocks):
                if paragraph is not None and paragraph not in seen:
                    seen.add(paragraph)
                    document.append(paragraph)
            if document:
                out.write("\n".join(document) + "\n\n")


def _documentation_sources() -> Iterator[list[str]]:
    """Raw text blocks, one list per future document: manual topics, then source files."""
    for topic in sorted(pydoc_data.topics.topics):
        yield pydoc_data.topics.topics[topic].split("\n\n")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py"), key=lambda p: p.relative_to(stdlib).as_posix()):
        if not {"site-packages", "test", "tests", "idle_test"} & set(path.relative_to(stdlib).parts):
            yield _source_blocks(path.read_bytes())


def _source_blocks(source: bytes) -> list[str]:
    """A Python file's docstring paragraphs and comment blocks, in source order."""
    blocks: list[tuple[int, str]] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # old files raise SyntaxWarnings; they are data here
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                line = node.body[0].lineno
                blocks += [(line, paragraph) for paragraph in docstring.split("\n\n")]
    blocks += _comment_blocks(source)
    return [text for _, text in sorted(blocks, key=lambda block: block[0])]


def _comment_blocks(source: bytes) -> Iterator[tuple[int, str]]:
    """Runs of consecutive full-line `#` comments (split at empty `#` lines), with their first line."""
    run: list[str] = []
    start = -1
    for number, line in enumerate(source.decode("utf-8", "replace").splitlines(), start=1):
        comment = _COMMENT_LINE.match(line)
        text = comment.group(1).strip() if comment else ""
        if run and not text:
            yield start, "\n".join(run)
            run = []
        if text:
            start = number if not run else start
            run.append(text)
    if run:
        yield start, "\n".join(run)
