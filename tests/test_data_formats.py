"""The formats corpora come in (formats.py), the cheap corpus key (fingerprint.py) and examples
written block by block (examples.write_examples)."""

import bz2
import gzip
import json
import lzma
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from minibert.corpus import fingerprint
from minibert.corpus import stored_examples
from minibert.corpus.documents import corpus_files, read_documents
from minibert.corpus.stored_examples import write_examples
from minibert.data.examples import Examples, build_examples
from minibert.corpus.storage import build_token_store
from minibert.runs.cli import main as train_main
from tiny_run import tiny_args, write_corpus

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet  # noqa: E402

zstandard = pytest.importorskip("zstandard")


def records(corpus):
    """The corpus's documents as JSONL-style records (text = paragraphs joined by newlines)."""
    return [{"id": i, "body": text} for i, text in enumerate(corpus.read_text().split("\n\n"))]


def write_datasets_folder(folder, rows, field):
    """What datasets' save_to_disk writes: Arrow IPC stream files, state.json, dataset_info.json."""
    folder.mkdir()
    table = pa.table({field: [r[field] for r in rows], "id": [r["id"] for r in rows]})
    halves = [table.slice(0, len(rows) // 2), table.slice(len(rows) // 2)]
    for i, part in enumerate(halves):
        with pa.ipc.new_stream(folder / f"data-0000{i}-of-00002.arrow", part.schema) as writer:
            writer.write_table(part)
    state = {"_data_files": [{"filename": f"data-0000{i}-of-00002.arrow"} for i in range(2)], "_fingerprint": "0",
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": None}
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "dataset_info.json").write_text(json.dumps({"features": {field: {"dtype": "string", "_type": "Value"}}}))


@pytest.fixture
def formats(tmp_path):
    corpus = write_corpus(tmp_path / "plain.txt", documents=24)
    rows = records(corpus)
    jsonl = "".join(json.dumps({"text": r["body"]}) + "\n" for r in rows).encode()
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "a.txt.gz").write_bytes(gzip.compress(corpus.read_bytes()))
    (folder / "b.jsonl.bz2").write_bytes(bz2.compress(jsonl))
    (folder / "c.txt.xz").write_bytes(lzma.compress(corpus.read_bytes()))
    (folder / "d.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl))
    pyarrow.parquet.write_table(pa.table({"body": [r["body"] for r in rows]}), folder / "e.parquet", row_group_size=7)
    write_datasets_folder(tmp_path / "saved", rows, "body")
    return corpus, folder, tmp_path / "saved"


def test_every_format_reads_as_the_plain_text(formats):
    corpus, folder, saved = formats
    plain = list(read_documents(corpus))
    for path in corpus_files(folder):
        field = "body" if path.suffix == ".parquet" else "text"
        assert list(read_documents(path, field)) == plain, path.name
    assert list(read_documents(saved, "body")) == plain
    assert [p.name for p in corpus_files(saved)] == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]


def test_pretrains_from_every_format(formats, tmp_path):
    _, folder, saved = formats
    (folder / "b.jsonl.bz2").unlink(), (folder / "d.jsonl.zst").unlink()  # their field is "text": read above
    args = tiny_args("bert", folder, tmp_path / "cache", tmp_path / "out", 2, "--text-field", "body", "--eval-every", "2")
    args[args.index("--data") + 1: args.index("--data") + 2] = [str(folder), str(saved)]
    assert train_main(args) == 0
    assert (tmp_path / "out" / "model.safetensors").is_file()


def test_bad_files_are_one_line_and_leave_nothing_built(formats, tmp_path, capsys):
    corpus, folder, saved = formats
    truncated = tmp_path / "bad" / "cut.txt.gz"
    truncated.parent.mkdir()
    truncated.write_bytes(gzip.compress(corpus.read_bytes() * 3)[:-200])
    with pytest.raises(ValueError, match="cut.txt.gz is truncated or damaged.*compress it again"):
        list(read_documents(truncated))
    assert train_main(tiny_args("bert", truncated, tmp_path / "cache", tmp_path / "out", 2)) == 2
    assert "cut.txt.gz is truncated or damaged" in capsys.readouterr().err
    assert not [p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]  # nothing published
    with pytest.raises(ValueError, match=r"e.parquet has no column 'text' \(its columns: body\); pass --text-field"):
        list(read_documents(folder / "e.parquet"))
    with pytest.raises(ValueError, match="line 1: expected an object with a \"body\" string field; pass --text-field"):
        list(read_documents(folder / "b.jsonl.bz2", "body"))
    (tmp_path / "bad" / "junk.parquet").write_bytes(b"PAR1 not a table")
    with pytest.raises(ValueError, match="junk.parquet is not a readable parquet file"):
        list(read_documents(tmp_path / "bad" / "junk.parquet"))
    (saved / "data-00001-of-00002.arrow").unlink()
    with pytest.raises(ValueError, match="lacks its data file.*save_to_disk"):
        corpus_files(saved)


COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
            ".zst": lambda data: zstandard.ZstdCompressor().compress(data)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(compression=st.sampled_from(sorted(COMPRESS)), kept=st.floats(0.0, 1.0, exclude_max=True))
def test_a_compressed_file_cut_short_is_refused(formats, compression, kept):
    """However much of a compressed corpus an interrupted download kept, reading it fails in
    one line naming the file, never with the part it could read."""
    corpus, folder, _ = formats
    data = COMPRESS[compression](corpus.read_bytes())
    cut = folder.parent / f"cut.txt{compression}"
    cut.write_bytes(data[: max(1, int(kept * len(data)))])
    with pytest.raises(ValueError, match=f"{cut.name} is truncated or damaged.*download"):
        list(read_documents(cut))


def test_a_damaged_gzip_stream_is_one_line(formats):
    corpus, folder, _ = formats
    data = bytearray(gzip.compress(corpus.read_bytes()))
    data[10] = 0xFF  # the first deflate block's header: a reserved block type (zlib.error)
    (folder / "a.txt.gz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="a.txt.gz is truncated or damaged"):
        list(read_documents(folder / "a.txt.gz"))


def test_a_truncated_zst_trains_only_once_downloaded_whole(formats, tmp_path, capsys):
    """A .zst cut short is one line and leaves the cache empty; the whole file then trains there.
    Its text is in two frames (as pzstd writes) and the cut falls in the second: the first
    alone reads as a smaller corpus."""
    corpus, _, _ = formats
    text = corpus.read_bytes()
    first, second = (COMPRESS[".zst"](part) for part in (text[: len(text) // 2], text[len(text) // 2:]))
    download = tmp_path / "download.txt.zst"
    download.write_bytes(first + second[: len(second) // 2])
    args = tiny_args("bert", download, tmp_path / "cache", tmp_path / "out", 2, "--eval-every", "2")
    assert train_main(args) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"train.py: error: corpus file {download} is truncated or damaged (EOFError: the file ends inside a zstd frame); "
        f"download or compress it again, or leave it out"]
    assert not list((tmp_path / "cache").iterdir())  # nothing half-built, not even a temporary file
    download.write_bytes(first + second)
    assert train_main(args) == 0


def test_the_key_samples_large_files_and_is_computed_once(tmp_path, monkeypatch):
    monkeypatch.setattr(fingerprint, "FULL_HASH_BYTES", 1000)
    monkeypatch.setattr(fingerprint, "BLOCK", 100)
    path = tmp_path / "big.txt"
    path.write_bytes(bytes(range(256)) * 100)
    key = fingerprint.corpus_fingerprint([path])
    reads = []
    monkeypatch.setattr("builtins.open", lambda *a, **k: reads.append(a) or pytest.fail("read again"))
    assert fingerprint.corpus_fingerprint([path]) == key  # known: not read again
    monkeypatch.undo()
    os.utime(path, ns=(1, 1))  # same bytes, another time: another key
    assert fingerprint.corpus_fingerprint([path]) != key


@pytest.mark.parametrize("layout", ["nsp", "full_sentences"])
def test_examples_written_in_blocks_do_not_depend_on_workers(layout, tmp_path, monkeypatch):
    from minibert.tokenizers.wordpiece import WordPieceTokenizer

    corpus = write_corpus(tmp_path / "plain.txt", documents=30)
    words = sorted({w.strip(".") for w in corpus.read_text().split()} | {"."})
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])
    store = build_token_store(read_documents(corpus), tokenizer, tmp_path / "store", workers=1)
    settings = dict(layout=layout, max_length=32, short_seq_prob=0.1, seed=3, specials=(2, 3))
    documents = range(0, 28)
    one = write_examples(store, tokenizer, documents, settings, tmp_path / "one")  # one block: as before
    spans = build_examples(store, documents=documents, **settings)
    assert np.array_equal(one.input_ids, Examples.from_spans(store, spans, tokenizer, 32).input_ids)
    monkeypatch.setattr(stored_examples, "BLOCK_TOKENS", 200)
    serial = write_examples(store, tokenizer, documents, settings, tmp_path / "serial", workers=1)
    parallel = write_examples(store, tokenizer, documents, settings, tmp_path / "parallel", workers=2)
    for name in Examples.FIELDS:
        a, b = getattr(serial, name), getattr(parallel, name)
        assert (a is None and b is None) or np.array_equal(a, b), name
    assert len(serial) > 0 and not np.array_equal(serial.input_ids[:len(one)], one.input_ids[:len(serial)])
