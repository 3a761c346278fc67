"""Content-addressed cache for everything the data pipeline derives from a corpus.

Training a tokenizer and tokenizing a corpus take seconds to minutes, so each is done
once and saved under a name that is a hash of *what it was built from* (the corpus
bytes and every setting that changes the result). Same inputs -> same name -> reuse;
any change -> a new name, so a stale file can never be picked up by mistake.

Results are written to a temporary name first and renamed into place, so a build that
is interrupted (or two processes building at once, e.g. DDP ranks) never leaves a
half-written file under the final name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

# The repository's git-ignored data/ folder (minibert/data/cache.py -> repo root / data).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "data"


def fingerprint(*parts: object) -> str:
    """A short stable hash of settings (their repr) — the cache key of a derived file."""
    return hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).hexdigest()


def publish_file(write, final: Path) -> Path:
    """Call `write(tmp_path)`, then atomically rename the result to `final`."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-", suffix=f"-{final.name}")  # keeps the suffix
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; a cache is for everyone
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return final


def publish_dir(write, final: Path) -> Path:
    """Call `write(tmp_dir)`, then rename the finished folder to `final`.

    If another process published the same folder first, its (identical) result is kept.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-", suffix=f"-{final.name}"))
    try:
        write(tmp)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
