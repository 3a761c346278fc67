"""Checkpoints that survive a crash at any moment.

    OUT/checkpoints/step-00000200/state.json            the JSON half of the training state
                                 /tensors.safetensors   its tensors (weights, Adam moments, RNG)
                                 /manifest.json         SHA-256 of both, written last
    OUT/checkpoints/latest                              "step-00000200"

A checkpoint is written into a hidden temporary folder, every file flushed to disk
(fsync), then the folder is renamed to its final name — a rename is atomic, so a
`step-*` folder is always complete. Only then does `latest` move to it (again: temporary
file, fsync, rename), so it never points at a partial checkpoint. The last `keep` are
kept. On load the checksums are verified; a truncated or corrupted checkpoint is
reported, and `load()` falls back to the newest intact one with a warning.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from .files import hash_file, publish_dir, read_json_object, remove_leftovers, write_atomic
from .old_files import upgrade_training_state
from .errors import TrainingError, warn
from .state import decode, encode

STATE, TENSORS, MANIFEST, LATEST = "state.json", "tensors.safetensors", "manifest.json", "latest"
STEP_DIR = re.compile(r"step-(\d+)")




class Checkpoints:
    """The checkpoints of one run, in `root` (OUT/checkpoints)."""

    def __init__(self, root: str | Path, keep: int = 3):
        self.root = Path(root)
        self.keep = keep

    def steps(self) -> list[Path]:
        """Complete checkpoint folders, newest first."""
        if not self.root.is_dir():
            return []
        found = [p for p in self.root.iterdir() if p.is_dir() and STEP_DIR.fullmatch(p.name)]
        return sorted(found, key=lambda p: int(STEP_DIR.fullmatch(p.name).group(1)), reverse=True)

    def save(self, step: int, state: dict) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step-{step:08d}"

        def write(folder: Path) -> None:
            tensors = {}
            document = encode(state, tensors)
            save_file(tensors, folder / TENSORS)
            (folder / STATE).write_text(json.dumps(document))
            manifest = {"step": step, "sha256": {name: hash_file(folder / name).hexdigest() for name in (STATE, TENSORS)}}
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))

        publish_dir(write, final, replace=True)  # the same step saved again after a resume: replace it
        write_atomic(self.root / LATEST, final.name)
        self._prune(final)
        return final

    def _prune(self, latest: Path) -> None:
        for old in self.steps()[self.keep:]:
            if old != latest:
                shutil.rmtree(old, ignore_errors=True)
        remove_leftovers(self.root)  # a save interrupted by a crash

    def load(self) -> tuple[dict, Path] | None:
        """The newest intact checkpoint (`latest` first), or None when there is none at all."""
        candidates = self.steps()
        pointer = self.root / LATEST
        if pointer.is_file():
            named = self.root / pointer.read_text().strip()
            candidates = [named] + [c for c in candidates if c != named]
        problems = []
        for path in candidates:
            try:
                state = read_checkpoint(path)
            except (ValueError, FileNotFoundError) as error:
                problems.append(str(error))
                continue
            if problems:
                warn(f"{'; '.join(problems)} — resuming from the newest intact checkpoint, {path.name}")
            return state, path
        if problems:
            raise TrainingError(f"no intact checkpoint in {self.root} ({'; '.join(problems)}); start over with --overwrite")
        return None


def read_checkpoint(path: Path) -> dict:
    """Load one checkpoint folder, verifying every checksum first."""
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {path.name} is missing")
    try:
        manifest = read_json_object(path / MANIFEST, "an interrupted save leaves it so")
        expected = manifest["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f"checkpoint {path.name} has no readable {MANIFEST} (interrupted or damaged)") from None
    for name in (STATE, TENSORS):
        if not (path / name).is_file() or hash_file(path / name).hexdigest() != expected.get(name):
            raise ValueError(f"checkpoint {path.name} is corrupted ({name} does not match its recorded checksum)")
    state = decode(json.loads((path / STATE).read_text()), load_file(path / TENSORS))  # checksum verified
    return upgrade_training_state(state)
