"""The stored names a checkpoint or config.json may carry besides today's: every rename, in one place.

A checkpoint or config.json outlives the code that wrote it. When a stored name changes, the
old name is listed here, and the code that reads the files passes what it read through these
functions first — `pretrained.stored_config` for every config.json and run.json's model,
`checkpoint.read_checkpoint` for a checkpoint's training state (the data order each process
resumes) — so the model, the data and the loop know only today's names. Tests:
tests/test_old_files.py (each old name read back, through the file that holds it).
"""

from __future__ import annotations

# what is stored -> {old name: today's name}
RENAMED = {
    "model config": {"attention": "attention_backend"},  # ModelConfig's attention backend
    "data order": {"rows": "examples", "copies": "examples"},  # how many examples a checkpoint's data order serves
    "eval.json args": {"glue_recipe": "recipe"},  # a fine-tune's flags as eval.json records them
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


def upgrade_training_state(state: dict) -> dict:
    """A checkpoint's training state (runs/run.py: `training_state`) with today's names in each
    process's data order (`PretrainingBatches.state_dict`, one per stream)."""
    for rank in state.get("ranks", ()):
        rank["data"] = [upgrade("data order", order) for order in rank["data"]]
    return state
