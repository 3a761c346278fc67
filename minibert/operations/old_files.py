"""The stored names a checkpoint or config.json may carry besides today's: every rename, in one place.

A checkpoint or config.json outlives the code that wrote it. When a stored name changes, the
old name is listed here, and the readers (`ModelConfig.from_dict` for every config.json and
checkpoint config, `PretrainingData.load_state_dict` for the data order a checkpoint resumes)
pass what they read through these functions first, so the rest of the code knows only today's
names. Tests: tests/test_old_files.py (an old config.json loaded), test_config.py and
test_data_dataset.py (each old name read back).
"""

from __future__ import annotations

# what is stored -> {old name: today's name}
RENAMED = {
    "model config": {"attention": "attention_backend"},  # ModelConfig's attention backend
    "data order": {"rows": "copies"},  # the example copies a checkpoint's data order serves
}


def upgrade(kind: str, stored: dict) -> dict:
    """`stored` (a dict of `kind`, as read from disk) with every old name of RENAMED[kind]
    replaced by today's; a name present under both keeps today's value."""
    stored = dict(stored)
    for old, new in RENAMED[kind].items():
        if old in stored:
            value = stored.pop(old)
            stored.setdefault(new, value)
    return stored
