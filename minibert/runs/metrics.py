"""What a run reports: OUT/metrics.jsonl and the numbers behind the progress bar.

Every logged step appends one JSON object to OUT/metrics.jsonl — `step`, `loss`, each
objective's loss and accuracy averaged over the steps since the previous line, `lr`,
`tokens_per_s`, and `eval_*` metrics when the held-out split was evaluated. One object per
line means the file can be read while the run is going, and a crash loses at most a line.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..operations.files import write_atomic


class MetricsLog:
    """OUT/metrics.jsonl, appended to line by line."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def records(self) -> list[dict]:
        """Every whole record, in order ([] when there is no file); a line cut short by a crash is skipped."""
        if not self.path.exists():
            return []
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records

    def last(self) -> dict:
        """The last whole record ({} when there is none): how the run ended."""
        records = self.records()
        return records[-1] if records else {}

    def keep_until(self, step: int) -> None:
        """After a resume from `step`: drop the lines the interrupted run wrote after it,
        so the file reads as one uninterrupted run."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line + "\n")
            except (ValueError, KeyError, TypeError):
                pass  # a line cut short by the crash
        write_atomic(self.path, "".join(kept))
