"""The formats corpora come in, read as a stream: compressed text, Parquet, `datasets` folders.

    NAME.txt / NAME.jsonl           plain (documents.py reads them)
    ... + .gz .bz2 .xz              compressed, read with the standard library
    ... + .zst                      compressed, read with `zstandard` (pip install minibert[corpora])
    NAME.parquet                    a table; each row's text column is one document (pyarrow)
    a `datasets` folder             what `Dataset.save_to_disk` writes: state.json, dataset_info.json
                                    and data-0000N-of-0000M.arrow (Arrow IPC streams), read with
                                    pyarrow alone; each row's text column is one document
    NAME.arrow                      one such Arrow stream file

The text column (and a JSONL record's field) is `text` unless --text-field names another. Every
file is read batch by batch, so memory does not grow with its size. A damaged file (a truncated
.gz, a Parquet file without the column) is one line naming the file and what to do.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

TEXT_KINDS = (".txt", ".jsonl")
TABLE_KINDS = (".parquet", ".arrow")
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
# What --data reads, as its help says it (settings.py): from the lists above, so the two cannot drift.
CORPUS_FORMATS = f"{'/'.join(TEXT_KINDS)}, compressed {'/'.join(COMPRESSIONS)}; {'/'.join(TABLE_KINDS)}; a datasets folder"
EXTRA = "pip install 'minibert[corpora]' (or pyarrow and zstandard)"
ROWS_PER_BATCH = 1024
ZSTD_READ_BYTES = 1 << 16  # compressed bytes read at a time from a .zst file


def corpus_kind(path: Path) -> tuple[str, str | None] | None:
    """(".txt" | ".jsonl" | ".parquet" | ".arrow", the compression suffix or None), or None if not a corpus file."""
    compression = path.suffix if path.suffix in COMPRESSIONS else None
    kind = Path(path.stem).suffix if compression else path.suffix
    if kind in TEXT_KINDS or (kind in TABLE_KINDS and compression is None):
        return kind, compression
    return None


def is_datasets_folder(path: Path) -> bool:
    return (path / "state.json").is_file() and (path / "dataset_info.json").is_file()


def datasets_files(folder: Path) -> list[Path]:
    """The Arrow files of a `save_to_disk` folder, in the order its state.json lists them."""
    try:
        names = [entry["filename"] for entry in json.loads((folder / "state.json").read_text())["_data_files"]]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{folder / 'state.json'} does not list the folder's data files (_data_files); "
                         f"save the dataset again with save_to_disk") from None
    files = [folder / name for name in names]
    missing = [f.name for f in files if not f.is_file()]
    if missing or not files:
        raise ValueError(f"datasets folder {folder} lacks its data file(s) {', '.join(missing) or '(none listed)'}; "
                         f"save the dataset again with save_to_disk")
    return files


def open_binary(path: Path, compression: str | None) -> BinaryIO:
    """The file's bytes, decompressed; a compressed file that ends early raises EOFError."""
    if compression is None:
        return open(path, "rb")
    if compression == ".zst":
        try:
            import zstandard
        except ImportError:
            raise ValueError(f"corpus file {path} is zstd-compressed and zstandard is not installed; {EXTRA}") from None
        return io.BufferedReader(ZstdFrames(path, zstandard.ZstdDecompressor()))
    return {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[compression](path, "rb")


class ZstdFrames(io.RawIOBase):
    """A .zst file's bytes, frame after frame, raising EOFError where the file ends inside a frame.

    gzip, bz2 and lzma refuse a file cut short; zstandard's own stream reader stops at the cut
    without a word, so a download cut short would train as a smaller corpus. Each frame knows
    where it ends (`eof`), so a file that stops before its last frame ends is caught here.
    """

    def __init__(self, path: Path, decompressor):
        self._file, self._decompressor = open(path, "rb"), decompressor
        self._frame = None  # the decompressor of the frame being read; None between frames
        self._out, self._at = b"", 0  # decompressed bytes not yet read, and how far they were read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._at == len(self._out):
            data = self._file.read(ZSTD_READ_BYTES)
            if not data:
                if self._frame is not None:
                    raise EOFError("the file ends inside a zstd frame")
                return 0
            self._out, self._at = self._decompress(data), 0
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = self._out[self._at : self._at + n]
        self._at += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._frame is None:
                self._frame = self._decompressor.decompressobj()
            out.append(self._frame.decompress(data))
            data = b""
            if self._frame.eof:  # the frame is whole; what follows it starts the next one
                data, self._frame = self._frame.unused_data, None
        return b"".join(out)

    def close(self) -> None:
        self._file.close()
        super().close()


def damaged(path: Path, error: BaseException) -> ValueError:
    """A decompression error as one line."""
    return ValueError(f"corpus file {path} is truncated or damaged ({type(error).__name__}: {error}); "
                      f"download or compress it again, or leave it out")


def decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [EOFError, OSError, lzma.LZMAError, gzip.BadGzipFile, zlib.error]
    try:
        import zstandard
        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def table_texts(path: Path, field: str) -> Iterator[str]:
    """Each row's `field` of a Parquet file or an Arrow stream, batch by batch (None rows skipped)."""
    try:
        import pyarrow as pa
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise ValueError(f"corpus file {path} is a {path.suffix[1:].capitalize()} table and pyarrow is not installed; {EXTRA}") from None
    try:
        if path.suffix == ".parquet":
            table = pyarrow.parquet.ParquetFile(path)
            schema, batches = table.schema_arrow, lambda: table.iter_batches(ROWS_PER_BATCH, columns=[field])
        else:
            reader = pyarrow.ipc.open_stream(pa.memory_map(str(path)))
            schema, batches = reader.schema, lambda: reader
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"corpus file {path} is not a readable {path.suffix[1:]} file ({' '.join(str(error).split())[:200]}); "
                         f"write it again or leave it out") from None
    if field not in schema.names:
        raise ValueError(f"corpus file {path} has no column {field!r} (its columns: {', '.join(schema.names)}); "
                         f"pass --text-field with the column that holds the text")
    kind = schema.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise ValueError(f"corpus file {path}: column {field!r} holds {kind}, not text; pass --text-field with the column that holds the text")
    try:
        for batch in batches():
            yield from (text for text in batch.column(field).to_pylist() if text is not None)
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"corpus file {path} is truncated or damaged ({' '.join(str(error).split())[:200]}); "
                         f"write it again or leave it out") from None
