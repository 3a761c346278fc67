"""Writing, reading and fingerprinting files: one way each, for the whole library and its benchmarks.

Writing: every file minibert writes for later (checkpoints, the data cache, saved models)
goes through `publish_file` / `publish_dir`: the content is written under a temporary name
in the same folder, flushed to the disk (fsync), and only then renamed to its final name. A
rename within a folder is atomic, so a reader sees the old file or the new one, never a part
— and a model still reading the old file keeps it, because a rename makes a new file instead
of new bytes. Temporary names are `.tmp-<random>-<final name>`: hidden, recognisable, and
ending like the final name, since some writers (numpy's `save`) append a suffix the name lacks.

Reading: checkpoints, caches, tokenizers and run folders all read small JSON files a user may have
edited, truncated or pointed at the wrong place. `read_json_object` checks all of it and fails in one line that names the file, the
problem and the fix; `read_record` reads one a run may have left, that only informs. `hash_file` streams a file into a hash, so a multi-gigabyte corpus or
tensor file is fingerprinted without being read into memory at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

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
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}); {fix}") from None
    return parse_json_object(text, path, fix)


def parse_json_object(text: str, source: str | Path, fix: str) -> dict:
    """The JSON object that `text` (read from `source`) holds; a one-line ValueError otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON ({error}); {fix}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{source} must hold a JSON object, got {type(value).__name__}; {fix}")
    return value


def read_record(path: Path, fix: str | None = None) -> dict:
    """The JSON object a run may have left at `path` (its config, run.json, eval.json), a record
    that only informs: {} where there is none. One that is unreadable or no object is {} too, or
    with `fix` a one-line ValueError (read_json_object's) ending with `fix`."""
    if not Path(path).is_file():
        return {}
    try:
        return read_json_object(path, fix or "")
    except (OSError, ValueError):
        if fix is not None:
            raise
        return {}


def read_flags(path: Path, defaults: dict[str, bool], fix: str) -> dict[str, bool]:
    """The true/false switches named in `defaults` from the JSON object in `path` (e.g. a
    tokenizer_config.json's do_lower_case); `defaults` where the file or a key is absent."""
    stored = read_record(path, fix)
    flags = {name: stored.get(name, default) for name, default in defaults.items()}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f"{path}: {name} must be true or false, got {value!r}; {fix}")
    return flags


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


# --- writing ----------------------------------------------------------------------------

TMP_PREFIX = ".tmp-"


def fsync_path(path: Path) -> None:
    """Force a file's contents (or a folder's list of names) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_file(write: Callable[[Path], object], final: Path) -> Path:
    """Call `write(tmp_path)`, flush the result to disk, then rename it to `final`."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=TMP_PREFIX, suffix=f"-{final.name}")
    os.close(fd)
    try:
        write(Path(tmp))
        fsync_path(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; saved files are for everyone
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    fsync_path(final.parent)
    return final


def write_json(path: Path, value: dict) -> Path:
    """A JSON object, indented for people to read, written with `publish_file`."""
    return write_atomic(path, json.dumps(value, indent=2) + "\n")


def write_atomic(path: Path, data: bytes | str) -> Path:
    """`publish_file` for content already in memory (text is written as UTF-8)."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    return publish_file(lambda tmp: tmp.write_bytes(content), path)


def publish_dir(write: Callable[[Path], object], final: Path, *, replace: bool = False) -> Path:
    """Call `write(tmp_dir)`, flush every file in it, then rename the folder to `final`.

    If `final` exists already: `replace=True` deletes it first (a checkpoint of the same
    step saved again); otherwise the existing folder is kept (another process published
    the same, identical cache entry first).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=TMP_PREFIX, suffix=f"-{final.name}"))
    try:
        write(tmp)
        for file in tmp.rglob("*"):
            if file.is_file():
                fsync_path(file)
        fsync_path(tmp)
        os.chmod(tmp, 0o755)
        if replace and final.exists():
            shutil.rmtree(final)
        try:
            os.rename(tmp, final)
        except OSError:
            if replace or not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_path(final.parent)
    return final


def remove_leftovers(folder: Path) -> None:
    """Delete what an interrupted write left behind in `folder`."""
    for leftover in Path(folder).glob(f"{TMP_PREFIX}*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
