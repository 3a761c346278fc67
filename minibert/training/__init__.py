"""Pretraining: the loop (loop.py) and what surrounds it (checkpoints, the lock, DDP and precision
live in minibert/operations/).

    settings.py     every knob of a run (one dataclass; the command line is generated from it)
    run.py          a run from settings to a saved model, step by step
    loop.py         the one training loop, its AdamW (no decay on biases/LayerNorm) and schedule
    metrics.py      OUT/metrics.jsonl
    init_from.py    --init: a new run that starts from a saved model
    resolved.py     the start-up block: each value and the layer it came from
    errors.py, cli.py   one-line errors; the command line
"""
