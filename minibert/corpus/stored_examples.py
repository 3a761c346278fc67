"""The examples and BERT's static masks as files: written block by block, memory-mapped back.

data/examples.py says how an example is cut and laid out, and data/static_masks.py how its
masks are drawn; this module only stores them. `write_examples` cuts the corpus in blocks of
about BLOCK_TOKENS tokens, each in a worker process with its own generator, and appends them
in order, so memory holds a few blocks whatever the corpus size and the result does not
depend on the number of workers. Reading back is np.memmap: a batch pages in its rows only.

    input_ids.bin, token_type_ids.bin, lengths.bin, sentence_label.bin, meta.json   Examples
                     (meta.json: the row width, and where each static copy begins)
    mask_offsets.bin, mask_positions.bin, mask_ids.bin                              StaticMasks
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..data.examples import Examples, build_examples
from ..data.masking import Masking
from ..data.static_masks import StaticMasks, draw_static_masks, dupe_factor_passes
from ..operations.files import read_json_object
from ..tokenizers.base import Tokenizer
from .storage import ArrayWriter, TokenStore, in_workers, open_array

BLOCK_TOKENS = 1 << 22  # write_examples cuts the corpus in blocks of about 4M tokens (about 15 MB of text)
EXAMPLE_DTYPES = dict(token_type_ids=np.uint8, lengths=np.int32, sentence_label=np.int8)


def load_examples(directory: Path) -> Examples:
    """Memory-mapped: the rows a batch reads are paged in, nothing more."""
    meta = read_json_object(directory / "meta.json", "delete the folder: it is rebuilt from the corpus")
    dtypes = dict(EXAMPLE_DTYPES, input_ids=meta["token_dtype"])
    arrays = {name: open_array(directory / f"{name}.bin", dtypes[name]) for name in Examples.FIELDS
              if name != "sentence_label" or meta["sentence_label"]}
    for name in ("input_ids", "token_type_ids"):
        arrays[name] = arrays[name].reshape(-1, meta["seq_len"])
    copy_starts = np.asarray(meta["copy_starts"], dtype=np.int64) if "copy_starts" in meta else None  # older caches: unrecorded
    return Examples(**{"sentence_label": None, **arrays}, copy_starts=copy_starts)


class ExampleWriters:
    """The files of `Examples`, appended block by block: flat arrays (storage.py's `ArrayWriter`)
    and a meta.json with the row width and each copy's first row, written last."""

    def __init__(self, directory: Path, token_dtype, seq_len: int, labelled: bool):
        self.directory, self.seq_len, self.labelled, self.rows = Path(directory), seq_len, labelled, 0
        self.copy_starts: list[int] = []
        self.directory.mkdir(parents=True, exist_ok=True)
        self.token_dtype = np.dtype(token_dtype)
        dtypes = dict(EXAMPLE_DTYPES, input_ids=token_dtype)
        self.writers = {name: ArrayWriter(self.directory / f"{name}.bin", dtypes[name]) for name in Examples.FIELDS
                        if name != "sentence_label" or labelled}

    def start_copy(self) -> None:
        """The rows appended next are a new copy's (a copy's blocks may yield none: it starts where the next does)."""
        self.copy_starts.append(self.rows)

    def append(self, examples: Examples) -> None:
        if len(examples) == 0:
            return
        for name, writer in self.writers.items():
            writer.append(getattr(examples, name))
        self.rows += len(examples)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        meta = dict(rows=self.rows, seq_len=self.seq_len, token_dtype=self.token_dtype.name, sentence_label=self.labelled,
                    copy_starts=self.copy_starts)
        (self.directory / "meta.json").write_text(json.dumps(meta))


def example_blocks(store: TokenStore, documents: range, block_tokens: int | None = None) -> list[range]:
    """`documents` in consecutive runs of about `block_tokens` tokens (whole documents): the units
    `write_examples` cuts independently. Fixed by the corpus alone, not by the number of workers."""
    starts, block_tokens = store.document_token_offsets, block_tokens or BLOCK_TOKENS
    blocks, first = [], documents.start
    while first < documents.stop:
        stop = int(np.searchsorted(starts, starts[first] + block_tokens, "left"))
        stop = min(max(stop, first + 1), documents.stop)
        blocks.append(range(first, stop))
        first = stop
    return blocks


def write_examples(store: TokenStore, tokenizer: Tokenizer, documents: range, settings: dict, directory: Path,
                   workers: int = 1, copies: int = 1) -> Examples:
    """Cut and lay out the examples of `documents`, block by block, into `directory`'s files;
    `copies` times over (BERT's static copies: the chapter's loop, data/static_masks.py's
    `dupe_factor_passes`), one copy after the other. Each copy's first row is recorded
    (`Examples.copy_starts`): the copies' lengths differ, as each draws its own cut.

    Each block of each copy is cut with its own generator (`build_examples`' `block` and `copy`)
    and laid out in a worker process; the main process appends them in order, so memory holds a
    few blocks however many copies there are. A corpus of less than one block gives exactly what
    one `build_examples` call gives."""
    directory = Path(directory)
    labelled = settings["layout"] != "full_sentences"
    writers = ExampleWriters(directory, store.tokens.dtype, settings["max_length"], labelled)
    blocks = dupe_factor_passes(example_blocks(store, documents), copies)
    job = (store.directory, tokenizer, settings, documents)
    for (_, number, _), examples in zip(blocks, in_workers(_examples_of_block, job, blocks, workers)):
        if number == 0:
            writers.start_copy()
        writers.append(examples)
    writers.close()
    if writers.rows == 0:
        raise ValueError(f"the {len(documents)} documents yield no {settings['layout']} example; use a larger corpus")
    return load_examples(directory)


def _examples_of_block(job, item) -> Examples:
    store_dir, tokenizer, settings, documents = job
    store = _open_store(store_dir)
    copy, number, block = item
    spans = build_examples(store, documents=block, others=documents, block=number, copy=copy, allow_empty=True, **settings)
    return Examples.from_spans(store, spans, tokenizer, settings["max_length"])


_stores: dict = {}


def _open_store(directory: Path) -> TokenStore:
    if directory not in _stores:
        _stores.clear()
        _stores[directory] = TokenStore(directory)
    return _stores[directory]


def open_static_masks(directory: str | Path, id_dtype: np.dtype) -> StaticMasks:
    directory = Path(directory)
    return StaticMasks(offsets=open_array(directory / "mask_offsets.bin", np.int64),
                       positions=open_array(directory / "mask_positions.bin", np.uint16),
                       ids=open_array(directory / "mask_ids.bin", id_dtype))


def build_static_masks(examples: Examples, masking: Masking, directory: str | Path, *, seed: int) -> StaticMasks:
    """Draw one mask for every example (`draw_static_masks`) and store them in `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    offsets = ArrayWriter(directory / "mask_offsets.bin", np.int64)
    positions = ArrayWriter(directory / "mask_positions.bin", np.uint16)
    ids = ArrayWriter(directory / "mask_ids.bin", examples.input_ids.dtype)
    offsets.append([0])
    for counts, chunk_positions, chunk_ids in draw_static_masks(examples, masking, seed=seed):
        offsets.append(positions.length + np.cumsum(counts))
        positions.append(chunk_positions)
        ids.append(chunk_ids)
    for writer in (offsets, positions, ids):
        writer.close()
    return open_static_masks(directory, examples.input_ids.dtype)
