"""Reading corpora (documents and sentences), their errors, and the built-in default corpus."""

import itertools
import json

import pytest
from test_data_support import DATASETS

from minibert.corpus import default_corpus
from minibert.corpus.documents import corpus_files, heading_level, read_documents, split_sentences
from minibert.corpus.fingerprint import corpus_fingerprint


def write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_blank_lines_separate_documents_and_lines_split_into_sentences(tmp_path):
    corpus = write(tmp_path / "a.txt", "First one. Second one!\nThird line\n\n\nOther doc? Yes.\n")
    assert list(read_documents(corpus)) == [["First one.", "Second one!", "Third line"], ["Other doc?", "Yes."]]


def test_wikitext_titles_start_documents_but_subheadings_do_not(tmp_path):
    corpus = write(
        tmp_path / "wiki.txt",
        " \n = Alpha = \n \n Alpha is a letter . It comes first . \n \n = = History = = \n \n It is old . \n"
        " \n = Beta = \n \n Beta follows . \n",
    )
    assert list(read_documents(corpus)) == [["Alpha is a letter .", "It comes first .", "It is old ."], ["Beta follows ."]]
    assert [heading_level(line) for line in (" = A = ", " = = B = = ", " = = = C = = = ", "a = b", "= x")] == [1, 2, 3, 0, 0]


def test_jsonl_text_fields_are_documents(tmp_path):
    lines = [json.dumps({"text": "One. Two.\nThree."}), "", json.dumps({"text": "", "id": 3}), json.dumps({"text": "Four.", "x": 1})]
    corpus = write(tmp_path / "c.jsonl", "\n".join(lines) + "\n")
    assert list(read_documents(corpus)) == [["One.", "Two.", "Three."], ["Four."]]


def test_a_folder_means_its_corpus_files_in_sorted_order(tmp_path):
    write(tmp_path / "b.txt", "Bee.\n")
    write(tmp_path / "a.jsonl", json.dumps({"text": "Ay."}) + "\n")
    write(tmp_path / "notes.md", "ignored\n")
    assert [p.name for p in corpus_files(tmp_path)] == ["a.jsonl", "b.txt"]
    assert list(read_documents(tmp_path)) == [["Ay."], ["Bee."]]


def test_sentence_rule():
    assert split_sentences('He said "Go." Then (quietly) left. 3 more! "Quoted" too?') == ['He said "Go."', "Then (quietly) left.", "3 more!", '"Quoted" too?']
    assert split_sentences("version 3.11 and e.g. lower case stay together.") == ["version 3.11 and e.g. lower case stay together."]
    assert split_sentences("   ") == []


def test_reading_streams(tmp_path):
    corpus = write(tmp_path / "a.txt", b"Good first document.\n\n" + b"x" * 100 + b"\xff\n")
    documents = read_documents(corpus)
    assert next(documents) == ["Good first document."]  # served before the bad bytes are reached
    with pytest.raises(ValueError, match="offset 122"):
        next(documents)


@pytest.mark.parametrize(
    "name, content, error, message",
    [
        ("empty.txt", b"", ValueError, "is empty"),
        ("blank.txt", b" \n\n  \n", ValueError, "contains no text"),
        ("binary.txt", b"ok\nab\x00cd", ValueError, r"looks binary \(NUL byte at byte offset 5\)"),
        ("latin1.txt", "caf\xe9 ok".encode("latin-1"), ValueError, "not valid UTF-8 at byte offset 3"),
        ("bad.jsonl", b'{"text": "fine"}\n{"text": broken}\n', ValueError, "line 2 is not valid JSON"),
        ("field.jsonl", b'{"body": "no text field"}\n', ValueError, 'line 1: expected an object with a "text"'),
        ("data.csv", b"a,b\n", ValueError, "pass a .txt/.jsonl file"),
    ],
)
def test_bad_input_fails_naming_the_file(tmp_path, name, content, error, message):
    path = write(tmp_path / name, content)
    with pytest.raises(error, match=message) as raised:
        list(read_documents(path))
    assert name in str(raised.value)


def test_missing_paths_and_empty_folders_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.txt does not exist"):
        corpus_files(tmp_path / "nowhere.txt")
    with pytest.raises(ValueError, match="holds no corpus files"):
        corpus_files(tmp_path)


def test_fingerprint_follows_content_not_names(tmp_path):
    a, b, c = write(tmp_path / "a.txt", "Same.\n"), write(tmp_path / "b.txt", "Same.\n"), write(tmp_path / "c.txt", "Other.\n")
    assert corpus_fingerprint([a]) == corpus_fingerprint([b]) != corpus_fingerprint([c])


def test_prose_filter_keeps_sentences_and_drops_code():
    prose = default_corpus.prose_paragraph
    assert prose("Return the number of items\n   in the :class:`list`, counting ``None``.") == "Return the number of items in the list, counting None."
    assert prose("Customizing attribute access\n****************************") is None  # heading
    assert prose(">>> print(x)\n3") is None and prose("x = {'a': 1, 'b': [2, 3]} if y else z.") is None
    assert prose("Too short.") is None


def test_source_blocks_are_docstrings_and_comments_in_order():
    source = b'"""Module doc.\n\nSecond paragraph."""\n# A comment\n# continued.\nx = 1  # trailing\ndef f():\n    """F doc."""\n'
    assert default_corpus._source_blocks(source) == ["Module doc.", "Second paragraph.", "A comment\ncontinued.", "F doc."]


def test_default_corpus_is_deterministic(tmp_path, monkeypatch):
    sources = default_corpus._documentation_sources
    monkeypatch.setattr(default_corpus, "_documentation_sources", lambda: itertools.islice(sources(), 70, 100))
    first, second = default_corpus.default_corpus_path(tmp_path / "a"), default_corpus.default_corpus_path(tmp_path / "b")
    assert first.read_bytes() == second.read_bytes() and len(first.read_bytes()) > 20_000


def test_default_corpus_is_a_few_mb_of_documents_and_reused(tmp_path):
    path = default_corpus.default_corpus_path(tmp_path)
    documents = list(read_documents(path))
    assert path.stat().st_size > 1_500_000 and len(documents) > 300
    assert sum(len(d) for d in documents) > 10_000
    modified = path.stat().st_mtime_ns
    assert default_corpus.default_corpus_path(tmp_path) == path and path.stat().st_mtime_ns == modified


@pytest.mark.skipif(not (DATASETS / "wikitext-2").is_dir(), reason="shared datasets not present")
def test_wikitext_articles_become_documents():
    path = DATASETS / "wikitext-2" / "valid.txt"
    titles = sum(heading_level(line) == 1 for line in path.read_text(encoding="utf-8").splitlines())
    documents = list(read_documents(path))
    assert len(documents) == titles and all(heading_level(s) == 0 and not s.startswith("= ") for d in documents for s in d)
