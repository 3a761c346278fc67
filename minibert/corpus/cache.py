"""Content-addressed cache for everything the data pipeline derives from a corpus.

Training a tokenizer and tokenizing a corpus take seconds to minutes, so each is done
once and saved under a name that is a hash of *what it was built from* (the corpus
bytes and every setting that changes the result). Same inputs -> same name -> reuse;
any change -> a new name, so a stale file can never be picked up by mistake.

Results are published with `minibert.operations.files` (a temporary name, then a rename), so a build
that is interrupted (or two processes building at once, e.g. DDP ranks) never leaves a
half-written file under the final name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# The repository's git-ignored data/ folder (minibert/corpus/cache.py -> repo root / data).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


def fingerprint(*parts: object) -> str:
    """A short stable hash of settings (their repr) — the cache key of a derived file."""
    return hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).hexdigest()
