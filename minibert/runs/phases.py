"""A recipe in two phases (BERT: 90% of the steps at 128 tokens, then 512), as two commands:

    python train.py @recipes/bert-base-128.txt --data DIR --out bert-128     # --stop-at 900000 of --steps 1000000
    python train.py @recipes/bert-base-512.txt --data DIR --out bert-512 --continue-from bert-128

The first phase stops at --stop-at while its schedule runs over the whole --steps. The second
takes, from the first's newest checkpoint, the weights, AdamW's moments, the fp16 loss scale
and the step count — so the schedule goes on where it stopped — and its tokenizer; only the
data starts afresh, with the new --seq-len and --batch-size. The architecture must be the
first phase's (BERT's first phase already has the 512 positions the second reads).
"""

from __future__ import annotations

from pathlib import Path

from ..operations.checkpoint import Checkpoints
from ..operations.state import load_trainable_state
from ..operations.errors import TrainingError
from ..training.loop import Progress


def continue_run(folder: str, pretrainer, optimizer, amp) -> tuple[Progress, str]:
    """The first phase's state, loaded into this run; and a line saying so."""
    loaded = Checkpoints(Path(folder) / "checkpoints").load()
    if loaded is None:
        raise TrainingError(f"--continue-from {folder} holds no checkpoint; run the first phase with --out {folder} first")
    state, path = loaded
    try:
        load_trainable_state(pretrainer, state["model"])
    except (RuntimeError, KeyError, ValueError) as error:
        raise TrainingError(f"--continue-from {folder}: its model differs from this run's ({str(error).splitlines()[0]}); "
                            f"pass the first phase's model flags") from None
    optimizer.load_state_dict(state["optimizer"])
    if state.get("scaler"):
        amp.scaler.load_state_dict(state["scaler"])
    progress = Progress(step=state["step"], skipped_steps=state["skipped_steps"], elapsed=state.get("elapsed", 0.0))
    return progress, f"continuing {path} at step {progress.step}: its weights, optimizer and schedule, new data"
