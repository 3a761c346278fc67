"""Reading and fingerprinting files: one way each, for the whole library and its benchmarks.

Checkpoints, caches, tokenizers and run folders all read small JSON files a user may have
edited, truncated or pointed at the wrong place; each reader used to check a different part
of that. `read_json_object` checks all of it and fails in one line that names the file, the
problem and the fix. `hash_file` streams a file into a hash, so a multi-gigabyte corpus or
tensor file is fingerprinted without being read into memory at once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CHUNK = 1 << 22  # bytes read at a time while hashing


def hash_file(path: Path, digest=None):
    """Feed the bytes of `path` to `digest` (a hashlib object; SHA-256 when None) and return it."""
    digest = hashlib.sha256() if digest is None else digest
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest


def read_json_object(path: Path, fix: str) -> dict:
    """The JSON object stored in `path`. No such file is a FileNotFoundError; unreadable bytes,
    invalid JSON or another JSON value than an object are a ValueError — each one line naming
    `path` and ending with `fix`, what the user can do about it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name} in {path.parent}; {fix}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}); {fix}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(value).__name__}; {fix}")
    return value


def read_json_lines(path: Path) -> list[dict]:
    """The objects of a JSON-lines file such as a run's metrics.jsonl, in order; a last line
    cut short by a crash is skipped."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
