"""The corpus's cache key, cheap for any corpus size: what every start computes before step 1.

Hashing every byte of a 10 GB corpus takes minutes, at every start. So the key reads a file
whole only when it is small (up to FULL_HASH_BYTES); a larger file is known by its size, its
modification time and SAMPLES blocks of BLOCK bytes spread evenly through it (first and last
included) — about 1 MB read per file whatever its size. Editing a large file in place changes
its time; copying it elsewhere changes its time too, so the copy is built again (its full hash
is kept in the token store's meta.json, `full_hash`, for anyone who wants to compare).

A process computes a file's key once (`_known`, by path, size and time); under torchrun rank 0
computes it and hands it to the others (`remember`), so no process but one reads the corpus
at start-up.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

from ..operations.files import hash_file

FULL_HASH_BYTES = 1 << 20  # up to this size a file is hashed whole (its content alone is its key)
SAMPLES, BLOCK = 16, 1 << 16

_known: dict[tuple, str] = {}  # (path, size, mtime_ns) -> the file's key


def corpus_fingerprint(files: Iterable[Path]) -> str:
    """The key of everything built from these files (see the module docstring)."""
    digest = hashlib.blake2b(digest_size=16)
    for path in files:
        digest.update(file_fingerprint(Path(path)).encode() + b"\0")
    return digest.hexdigest()


def corpus_key(files: Iterable[Path], text_field: str) -> str | tuple[str, str]:
    """What a cache built from these files is keyed by: their fingerprint, and the text field
    read from them when it is not the default (so a key from before --text-field still holds)."""
    return corpus_fingerprint(files) if text_field == "text" else (corpus_fingerprint(files), text_field)


def file_fingerprint(path: Path) -> str:
    stat = path.stat()
    identity = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if identity not in _known:
        digest = hashlib.blake2b(str(stat.st_size).encode() + b"\0", digest_size=16)
        if stat.st_size <= FULL_HASH_BYTES:
            hash_file(path, digest)
        else:
            digest.update(str(stat.st_mtime_ns).encode() + b"\0")
            with open(path, "rb") as f:
                for i in range(SAMPLES):
                    f.seek((stat.st_size - BLOCK) * i // (SAMPLES - 1))
                    digest.update(f.read(BLOCK))
        _known[identity] = digest.hexdigest()
    return _known[identity]


def known() -> dict:
    """The keys this process computed (to hand to other processes)."""
    return dict(_known)


def remember(keys: dict) -> None:
    """Take keys another process computed; a file that changed since has another identity."""
    _known.update(keys)


def full_hash(files: Iterable[Path]) -> str:
    """Every byte of the files: kept beside what is built from them, not a key."""
    digest = hashlib.blake2b(digest_size=16)
    for path in files:
        hash_file(path, digest)
    return digest.hexdigest()
