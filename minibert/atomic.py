"""Writing files so that a crash, a full disk or Ctrl-C never leaves half of one.

Every file minibert writes for later (checkpoints, the data cache, saved models) goes
through here: the content is written under a temporary name in the same folder, flushed to
the disk (fsync), and only then renamed to its final name. A rename within a folder is
atomic, so a reader sees the old file or the new one, never a part — and a model still
reading the old file keeps it, because a rename makes a new file instead of new bytes.
Folders (a checkpoint, a cache entry) are built the same way and renamed whole.

Temporary names are `.tmp-<random>-<final name>`: hidden, recognisable, and ending like
the final name, since some writers (numpy's `save`) append a suffix the name lacks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

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
