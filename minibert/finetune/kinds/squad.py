"""Extractive question answering data: SQuAD v1.1 and v2.0, read unchanged.

Three layouts, as SQuAD ships it and as transformers' run_qa.py reads it:

    .json    SQuAD's own file: {"version": ..., "data": [{"title", "paragraphs": [{"context",
             "qas": [{"id", "question", "answers": [{"text", "answer_start"}],
             "is_impossible"?, "plausible_answers"?}]}]}]}
    .json    run_qa.py's local file: {"data": [record, ...]}, one record per question
    .jsonl   one record per line (a .json file of JSON lines is read so too): {"id", "title",
             "context", "question", "answers": {"text": [...], "answer_start": [...]}} (empty lists: no answer)

A gold answer is a character span of its context, and the span is what a model learns, so
every answer is checked against its context (`context[answer_start:][:len(text)] == text`):
an offset that does not point at its text is an error naming the question, never an example
silently dropped or trained on the wrong words. SQuAD v2.0 adds questions the paragraph does
not answer (no gold answers; `plausible_answers` are kept but not trained on); `has_impossible`
tells a caller whether a file has any, so one that fits only v1.1 can refuse it.

A question is read without its leading whitespace, as run_qa.py strips it (`q.lstrip()`): some of
SQuAD's questions begin with a space, which a byte-level BPE (RoBERTa's) would read as a token of its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...corpus.documents import json_objects
from ...operations.files import write_atomic
from .sentence_files import task_file

FORMATS = (".json", ".jsonl")
RECORD = '{"id", "context", "question", "answers": {"text": [...], "answer_start": [...]}}'
LAYOUT = (f'SQuAD\'s {{"data": [{{"title", "paragraphs": [{{"context", "qas": [...]}}]}}]}} or {{"data": [{RECORD}, ...]}} '
          f'(.json), or one {RECORD} per line (.jsonl)')
SNIFF_BYTES = 1 << 16  # how much of a .json file `is_squad` looks at
SQUAD_OPENING = re.compile(r'"data"\s*:\s*\[\s*\{')
QUESTION_KEYS = ("context", "question", "answers")  # what a record of one question has (run_qa.py's columns)


@dataclass
class QAExample:
    """One question about one context; `answers` and `plausible` are (text, answer_start) pairs."""

    id: str
    title: str
    question: str
    context: str
    answers: list[tuple[str, int]]  # empty for an impossible (v2.0) question
    is_impossible: bool = False
    plausible: list[tuple[str, int]] = field(default_factory=list)  # v2.0's plausible_answers: kept, not trained on


class SquadData(list):
    """The questions of one file, in file order: a list of QAExample that knows its file."""

    def __init__(self, path: Path, examples: list[QAExample]):
        super().__init__(examples)
        self.path = path

    @property
    def has_impossible(self) -> bool:
        """Whether any question has no answer (SQuAD v2.0 data)."""
        return any(example.is_impossible for example in self)


def is_squad(path: str | Path) -> bool:
    """Whether `path` looks like question answering data, for --task auto: a .json file that
    opens with {"data": [{...  and names "paragraphs" (SQuAD's) or "context" and "question"
    (run_qa.py's records) in its first 64 KiB (enough for any real file, and no second full read:
    read_squad checks everything else), or a .jsonl file, or a .json file of JSON lines, whose
    first record has "context", "question" and "answers"."""
    path = Path(path)
    if path.suffix not in FORMATS or not path.is_file():
        return False
    with path.open(encoding="utf-8-sig", errors="replace") as file:
        head = file.read(SNIFF_BYTES)
    if path.suffix == ".json" and head.lstrip().startswith("{") and SQUAD_OPENING.search(head):
        return '"paragraphs"' in head or all(f'"{key}"' in head for key in QUESTION_KEYS[:2])
    first = head.lstrip().split("\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and all(key in record for key in QUESTION_KEYS)


def read_squad(path: str | Path, labelled: bool = True) -> SquadData:
    """Every question of a SQuAD .json or Hugging Face .jsonl file (layouts in the module
    docstring), each answer checked against its context; any flaw is a one-line ValueError
    naming the file and the question. `labelled=False`: questions to answer, which may have no
    "answers" at all (predict)."""
    path = Path(path)
    top = load_json(path, FORMATS, "question answering data")
    examples = list(json_examples(path, top, labelled) if isinstance(top, dict) else
                    (record_example(path, f"{path} line {line}", record, labelled) for line, record in top))
    if not examples:
        raise ValueError(f"{path} holds no questions; write {LAYOUT}")
    seen = set()
    for example in examples:
        if example.id in seen:
            raise ValueError(f"{path}: question id {example.id!r} occurs twice; give every question its own id")
        seen.add(example.id)
    return SquadData(path, examples)


def load_json(path: Path, formats: tuple[str, ...], what: str) -> dict | list[tuple[int, dict]]:
    """The top-level object of a SQuAD .json file; or, for a .jsonl file or a .json file of JSON
    lines, its (line number, record) pairs (`formats`, `what`: as task_file checks the file). Broken
    JSON names its line and column."""
    with task_file(path, formats, what) as file:
        if path.suffix == ".jsonl":
            return list(json_objects(path, file))
        text = file.read()
    try:
        top = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data" and text.lstrip().startswith("{"):  # more than one object: JSON lines
            return list(json_objects(path, text.splitlines()))
        raise ValueError(f"{path} is not valid JSON (line {error.lineno} column {error.colno}: {error.msg}); "
                         f"fix the file or re-download it") from None
    if not isinstance(top, dict) or not isinstance(top.get("data"), list):
        raise ValueError(f'{path}: no "data" list at the top level; expected {LAYOUT}')
    return top


def json_examples(path: Path, top: dict, labelled: bool = True):
    """QAExamples from SQuAD's nesting of articles, paragraphs and questions, or from run_qa.py's
    list of records, one per question (an entry with "question" and no "paragraphs")."""
    for a, article in enumerate(top["data"]):
        where = f"{path} article {a}"
        if isinstance(article, dict) and "paragraphs" not in article and "question" in article:
            yield record_example(path, f"{path} record {a}", article, labelled)
            continue
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise ValueError(f'{where}: no "paragraphs" list; every article is {{"title", "paragraphs": [...]}}, '
                             f"or every entry a record {RECORD}")
        title = article.get("title", "")
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise ValueError(f'{where} paragraph {p}: no "qas" list; every paragraph is {{"context", "qas": [...]}}')
            for q, qa in enumerate(qas):
                if not isinstance(qa, dict):
                    raise ValueError(f"{where} paragraph {p} question {q} is not a JSON object; write {{\"id\", \"question\", \"answers\"}}")
                context = paragraph.get("context")
                yield example(path, qa.get("id"), f"{where} paragraph {p} question {q}", title, context, qa.get("question"),
                              qa.get("answers", None if labelled else []), qa.get("is_impossible"), qa.get("plausible_answers", []))


def record_example(path: Path, where: str, record: dict, labelled: bool = True) -> QAExample:
    """One question's record (a .jsonl line, or an entry of run_qa.py's {"data": [...]}): `answers` as
    {"text": [...], "answer_start": [...]} (or SQuAD's list of pairs); `where` locates it in errors."""
    answers = record.get("answers", None if labelled else [])
    if isinstance(answers, dict):
        texts, starts = answers.get("text"), answers.get("answer_start")
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise ValueError(f'{where}: "answers" needs "text" and "answer_start" lists of one length, '
                             f"got {json.dumps(answers)[:80]}")
        answers = [{"text": text, "answer_start": start} for text, start in zip(texts, starts)]
    return example(path, record.get("id"), where, record.get("title", ""), record.get("context"),
                   record.get("question"), answers, record.get("is_impossible"), record.get("plausible_answers", []))


def example(path: Path, id, where: str, title, context, question, answers, is_impossible, plausible) -> QAExample:
    """A QAExample once every field is checked; `where` locates a question without an id."""
    if isinstance(id, int) and not isinstance(id, bool):
        id = str(id)
    if not isinstance(id, str) or not id:
        raise ValueError(f'{where}: no "id"; give every question a unique string id')
    named = f"{path}: question {id!r}"
    if not isinstance(context, str) or not context.strip():
        raise ValueError(f"{named} has no context; give it the paragraph it is asked about")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{named}: the question is empty; write the question or drop the entry")
    if not isinstance(title, str):
        raise ValueError(f"{named}: the title is {json.dumps(title)[:40]}; titles are strings")
    gold = spans(named, context, answers, "answers")
    if is_impossible is not None and not isinstance(is_impossible, bool):
        raise ValueError(f"{named}: is_impossible is {json.dumps(is_impossible)[:40]}; write true or false")
    if is_impossible and gold:
        raise ValueError(f"{named} is marked is_impossible but has {len(gold)} answer(s); "
                         f"move them to plausible_answers or drop is_impossible")
    if is_impossible is False and not gold:
        raise ValueError(f"{named} has no answers but is_impossible is false; add its answers or mark it true")
    return QAExample(id, title, question.lstrip(), context, gold, not gold, spans(named, context, plausible, "plausible_answers"))


def spans(named: str, context: str, answers, key: str) -> list[tuple[str, int]]:
    """(text, answer_start) pairs, each checked to be the very text at its offset in `context`."""
    if not isinstance(answers, list):
        raise ValueError(f'{named}: "{key}" is {json.dumps(answers)[:40]}; write a list of {{"text", "answer_start"}} (empty: no answer)')
    checked = []
    for answer in answers:
        text = answer.get("text") if isinstance(answer, dict) else None
        start = answer.get("answer_start") if isinstance(answer, dict) else None
        if not isinstance(text, str) or not text or not isinstance(start, int) or isinstance(start, bool):
            raise ValueError(f'{named}: an entry of "{key}" is {json.dumps(answer)[:80]}; each needs a non-empty '
                             f'"text" and an integer "answer_start"')
        found = context[start:][:len(text)] if start >= 0 else ""
        if found != text:
            raise ValueError(f"{named}: answer {text[:60]!r} is not at answer_start {start} of its context "
                             f"(found {found[:60]!r}); fix answer_start or the answer text")
        checked.append((text, start))
    return checked


def split_articles(path: str | Path, first_n: int, out_a: str | Path, out_b: str | Path) -> tuple[int, int]:
    """Write the first `first_n` articles of a SQuAD .json file to `out_a` and the rest to
    `out_b`, each article unchanged, in SQuAD's own layout (version kept): a split by article,
    so no paragraph is asked about on both sides (a bench trains on one side of SQuAD's dev
    set and scores the other). Returns the number of questions written to each."""
    path = Path(path)
    data = read_squad(path)  # checks every question before anything is written
    top = load_json(path, (".json",), "a SQuAD file to split")
    articles = top["data"] if isinstance(top, dict) else []
    if not all(isinstance(article, dict) and "paragraphs" in article for article in articles):
        raise ValueError(f"{path} holds one record per question, not SQuAD's articles; splitting by article needs "
                         f'SQuAD\'s own {{"data": [{{"title", "paragraphs": [...]}}]}} file')
    if not 0 < first_n < len(articles):
        raise ValueError(f"{path} has {len(articles)} articles; first_n must be between 1 and {len(articles) - 1}, got {first_n}")
    counts = []
    for out, part in ((out_a, articles[:first_n]), (out_b, articles[first_n:])):
        write_atomic(Path(out), json.dumps({**top, "data": part}, ensure_ascii=False))
        counts.append(sum(len(paragraph["qas"]) for article in part for paragraph in article["paragraphs"]))
    assert sum(counts) == len(data)
    return counts[0], counts[1]
