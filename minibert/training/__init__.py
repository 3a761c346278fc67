"""Pretraining: the loop (loop.py) and what surrounds it.

    settings.py     every knob of a run (one dataclass; the command line is generated from it)
    run.py          a run from settings to a saved model, step by step
    loop.py         the one training loop, its AdamW (no decay on biases/LayerNorm) and schedule
    metrics.py      OUT/metrics.jsonl
    checkpoint.py   atomic, checksummed checkpoints; state.py: their contents without pickle
    outdir.py       OUT's lock, and refusing to clobber a checkpoint
    distributed.py  torchrun / DDP
    errors.py, cli.py   one-line errors; the command line
"""
