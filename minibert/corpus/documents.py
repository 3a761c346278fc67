"""Step 1 of the pipeline: text files -> a stream of documents, each a list of sentences.

BERT's pretraining data is "document-level": its sentence-pair tasks need to know which
sentences follow each other (NSP, SOP) and where one document ends (so a "random next
sentence" really comes from elsewhere, and RoBERTa's packing can put a separator there).
So the reader keeps exactly two levels of structure — documents and sentences.

Accepted input (a path, a folder = all corpus files in it, sorted, or a list; compressed,
Parquet and `datasets` folders as formats.py says):

* `.txt` — one paragraph (or sentence) per line; a blank line ends a document (BERT's
  `create_pretraining_data` format). A WikiText-style heading ` = Title = ` always starts
  a new document. A file that *opens* with such a title is read WikiText-style: there,
  blank lines only separate paragraphs of the same article. Sub-headings ` = = Sub = = `
  never split a document. Heading lines are structure, not prose, and are dropped (BERT
  likewise kept "only the text passages" of Wikipedia, no headers).
* `.jsonl` — one JSON object per line; its `"text"` field (or --text-field's) is one
  document, and the newlines inside it separate paragraphs. A table's rows (Parquet, Arrow)
  are read the same way.

Paragraphs are cut into sentences by `split_sentences`. Everything is a generator: a
corpus of any size streams through without ever being held in memory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator, Sequence, Union

from ..operations.files import parse_json_object
from .formats import corpus_kind, damaged, datasets_files, decompression_errors, is_datasets_folder, open_binary, table_texts

PathLike = Union[str, Path]
KINDS = "a .txt/.jsonl file (also .gz, .bz2, .xz, .zst), a .parquet or .arrow"

# A sentence ends at . ! or ? (and one closing quote or bracket) when whitespace and then
# a capital letter, digit or opening quote/bracket follow. Simple and predictable; it also
# cuts after abbreviations such as "e.g. Python", which costs a pair task very little.
_SENTENCE_BREAK = re.compile(r"""(?:(?<=[.!?])|(?<=[.!?]["')\]]))\s+(?=["'(\[]?[A-Z0-9])""")
# ` = Title = ` (level 1) or ` = = Section = = ` (level 2, ...), as in WikiText.
_HEADING = re.compile(r"(=(?: =)*) (.+?) \1")


def split_sentences(paragraph: str) -> list[str]:
    """One paragraph -> its sentences (see `_SENTENCE_BREAK` for the rule)."""
    return [s for s in _SENTENCE_BREAK.split(paragraph.strip()) if s]


def heading_level(line: str) -> int:
    """1 for ` = Title = `, 2 for ` = = Section = = `, ..., 0 for any other line."""
    match = _HEADING.fullmatch(line.strip())
    return 0 if match is None else match.group(1).count("=")


def corpus_files(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    """Resolve the user's paths to the list of corpus files, failing clearly if there are none."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for path in map(Path, paths):
        if not path.exists():
            raise FileNotFoundError(f"corpus path {path} does not exist; pass {KINDS} file or a folder of them")
        if path.is_dir() and is_datasets_folder(path):
            files += datasets_files(path)
        elif path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and corpus_kind(p))
            if not found:
                raise ValueError(f"corpus folder {path} holds no corpus files ({KINDS}); add some or pass the files directly")
            files += found
        elif corpus_kind(path):
            files.append(path)
        else:
            raise ValueError(f"corpus file {path} has suffix {''.join(path.suffixes[-2:])!r}; pass {KINDS} file "
                             f"(or a datasets save_to_disk folder)")
    if not files:
        raise ValueError(f"no corpus paths given; pass at least one {KINDS} file or folder")
    return files


def read_documents(paths: PathLike | Sequence[PathLike], text_field: str = "text") -> Iterator[list[str]]:
    """Stream the corpus as documents, each a non-empty list of sentences. `text_field`: the
    JSONL field or table column holding a document's text."""
    for path in corpus_files(paths):
        kind, _ = corpus_kind(path)
        read = {".txt": _read_txt, ".jsonl": _read_jsonl, ".parquet": _read_table, ".arrow": _read_table}[kind]
        n_docs = 0
        for document in read(path, text_field):
            n_docs += 1
            yield document
        if n_docs == 0:
            raise ValueError(f"corpus file {path} contains no text; remove it or fill it")


def _read_txt(path: Path, text_field: str) -> Iterator[list[str]]:
    document: list[str] = []
    wikitext = None  # decided by the first non-blank line
    for line in _decoded_lines(path):
        text = line.strip()
        level = heading_level(text)
        if wikitext is None and text:
            wikitext = level == 1
        if level == 1 or (not text and not wikitext):
            if document:
                yield document
            document = []
        elif text and level == 0:
            document += split_sentences(text)
    if document:
        yield document


def json_objects(path: Path, lines: Iterable[str]) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSON Lines file; a line that is not
    one JSON object fails with its file and line number. Shared by corpus and task files."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, parse_json_object(line, f"{path} line {number}", "write one JSON object per line")


def _read_jsonl(path: Path, text_field: str) -> Iterator[list[str]]:
    for line_number, record in json_objects(path, _decoded_lines(path)):
        if not isinstance(record.get(text_field), str):
            hint = "" if text_field in record else f"; pass --text-field with the field that holds the text (this line has {', '.join(map(repr, record)) or 'none'})"
            raise ValueError(f'{path} line {line_number}: expected an object with a "{text_field}" string field{hint}')
        if document := _document(record[text_field]):
            yield document


def _read_table(path: Path, text_field: str) -> Iterator[list[str]]:
    for text in table_texts(path, text_field):
        if document := _document(text):
            yield document


def _document(text: str) -> list[str]:
    """A document's text (newlines between paragraphs) -> its sentences."""
    return [s for paragraph in text.splitlines() for s in split_sentences(paragraph)]


def _decoded_lines(path: Path) -> Iterator[str]:
    """The file's lines as text; empty, binary or non-UTF-8 files fail with the byte offset."""
    if path.stat().st_size == 0:
        raise ValueError(f"corpus file {path} is empty; remove it or fill it")
    offset, compression = 0, corpus_kind(path)[1]
    with open_binary(path, compression) as f:
        for raw in _raw_lines(path, f, compression):
            if b"\0" in raw:
                raise ValueError(f"corpus file {path} looks binary (NUL byte at byte offset {offset + raw.index(0)}); pass UTF-8 text")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"corpus file {path} is not valid UTF-8 at byte offset {offset + error.start}; re-encode it as UTF-8") from None
            yield line.lstrip("\ufeff") if offset == 0 else line
            offset += len(raw)


def _raw_lines(path: Path, f, compression: str | None) -> Iterator[bytes]:
    """The file's lines as bytes; a decompression error is one line naming the file."""
    if compression is None:
        yield from f
        return
    lines = iter(f)
    while True:
        try:
            raw = next(lines)
        except StopIteration:
            return
        except decompression_errors() as error:
            raise damaged(path, error) from None
        yield raw
