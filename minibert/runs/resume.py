"""--resume: what a checkpoint holds, and putting a run back where it was taken.

    training_state   the step, the weights, the optimizer, the fp16 loss scale, each process's
                     random generators and data position
    restore          all of it back in place (`resplit`: on another number of processes)
    check_same_run   refuse settings that would make the resumed run another run
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..operations.distributed import Distributed
from ..operations.files import read_json_object
from ..operations.precision import Precision
from ..pretrained import stored_config
from ..operations.state import load_trainable_state, seed_everything, set_rng_state, trainable_state
from ..training.loop import Progress
from ..training.settings import OPERATIONAL, Settings, flag
from ..variants import get_variant
from .resolved import unread_settings

RESPLIT = ("grad_accum",)  # may change on --resume: the data are re-split (`resplit`)


def training_state(progress: Progress, pretrainer, optimizer, amp: Precision, ranks: list) -> dict:
    """What a checkpoint holds to resume exactly: the step and time spent, the weights, the
    optimizer's moments, the fp16 loss scale (empty in other formats), and each process's
    random generators and data position (`ranks`)."""
    return {"step": progress.step, "skipped_steps": progress.skipped_steps, "elapsed": progress.elapsed,
            "model": trainable_state(pretrainer), "optimizer": optimizer.state_dict(), "scaler": amp.scaler.state_dict(),
            "ranks": ranks}


def restore(state: dict, pretrainer, optimizer, amp: Precision, shards, dist: Distributed) -> Progress:
    """Put the run back where the checkpoint was taken: exactly on the same number of processes;
    on another, by the rule of `resplit`."""
    ranks = state["ranks"]
    load_trainable_state(pretrainer, state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if state.get("scaler"):  # fp16: the loss scale the run had found (a checkpoint without one starts it afresh)
        amp.scaler.load_state_dict(state["scaler"])
    positions, exact = resplit(ranks, shards, dist)
    for shard, position in zip(shards, positions, strict=True):
        shard.load_state_dict(position)
    if exact:
        set_rng_state(ranks[dist.rank]["rng"])  # last: nothing after this may draw a random number
    else:
        seed_everything(int(np.random.SeedSequence([shards[0].seed, state["step"], dist.rank]).generate_state(1)[0]))
    return Progress(step=state["step"], skipped_steps=state["skipped_steps"], saved_step=state["step"],
                    elapsed=state.get("elapsed", 0.0))


def resplit(ranks: list, shards, dist: Distributed) -> tuple[list, bool]:
    """Each of this process's streams' data position, and whether the random generators can be
    restored as saved (the same number of processes).

    The run's data are world_size × grad_accum streams; stream k serves every k-th example of
    the epoch's order, so global batch p is examples p·B .. (p+1)·B-1 of that order however many
    streams split it. With as many streams as before, each continues from its own position: the
    same batches. With another number, every stream continues from the position reached in the
    same epoch (each global batch holds the same examples, split otherwise; dynamic masks,
    drawn per stream, differ, and the epoch may end one batch sooner or later); the optimizer
    and the step continue, and the random generators are re-seeded from (--seed, step, rank).
    That is not bit-identical to an uninterrupted run, and the run says so once."""
    saved = [position for rank in ranks for position in rank["data"]]
    streams = dist.world_size * len(shards)
    exact = len(ranks) == dist.world_size and len(saved) == streams  # the same processes × accumulation steps
    if len(saved) == streams:
        mine = saved[dist.rank * len(shards):(dist.rank + 1) * len(shards)]
        positions = [{**position, "world_size": shard.world_size} for shard, position in zip(shards, mine)]
    else:
        positions = []
        for shard in shards:
            position = {**saved[0], "world_size": shard.world_size}
            if position["position"] >= len(shard):  # this split's epoch has ended already
                position.update(epoch=position["epoch"] + 1, position=0)
            positions.append(position)
    if dist.is_main and not exact:
        batches = "the same batches" if len(saved) == streams else \
            "the same examples in each global batch from the position reached, split otherwise (dynamic masks differ)"
        print(f"resuming a run of {len(ranks)} process(es) × {len(saved) // len(ranks)} accumulation step(s) on "
              f"{dist.world_size} × {len(shards)}: {batches}; the optimizer and the step count continue, and the random "
              f"generators are re-seeded from --seed and the step, so the run is not bit-identical to one that was not "
              f"interrupted (docs/scale.md, Many processes)", flush=True)
    return positions, exact


def check_same_run(path: Path, record: dict) -> None:
    """--resume continues the run in OUT: refuse settings that would make it another run."""
    try:
        saved = read_json_object(path, "start over with --overwrite")
    except (OSError, ValueError):
        raise ValueError(f"{path} is missing or damaged, so this run's settings are unknown; start over with --overwrite") from None
    now = json.loads(json.dumps(record))
    before = {**json.loads(json.dumps(Settings().to_dict())), **saved["settings"]}  # a field run.json lacks: its default
    # unread: the settings no objective of this variant reads, such as an rtd_weight in a bert run's run.json
    unread = unread_settings(get_variant(now["settings"]["variant"]))
    changed = [f"--{flag(name)} {before.get(name)!r} -> {value!r}" for name, value in now["settings"].items()
               if name not in (*OPERATIONAL, *RESPLIT) and name not in unread and before.get(name) != value]
    saved_config = stored_config(saved["config"]).to_dict()  # in the current field names
    changed += [f"--{flag(name)} {saved_config.get(name)!r} -> {value!r}"
                for name, value in now["config"].items() if saved_config.get(name) != value]
    if changed:
        raise ValueError(f"--resume continues the run in {path.parent}, but these settings differ from it: {'; '.join(changed)}; "
                         f"rerun with the original flags (see {path}) or start a new --out")
