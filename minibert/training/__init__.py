"""The chapter's training: the one loop every variant and task runs, and what it is configured by.

    loop.py       the loop and its step (forward, loss, backward, clip, step), the learning-rate
                  schedules, and `Pretrainer`: the objectives of a pretraining run, summed
    optimizer.py  AdamW with no decay on biases and LayerNorm, or LAMB
    lamb.py       LAMB, ALBERT's optimizer for large batches
    evaluate.py   held-out evaluation, with a seed of its own
    settings.py   every setting of a pretraining run, with its default: one dataclass; and
                  `LoopSettings`, what the loop reads of a run

Machinery, not here: what turns settings into a finished run (the command line, the output
folder, checkpoints, plans, reports, curves, TensorBoard) lives in `minibert/runs/`; DDP,
precision and atomic files in `minibert/operations/`. The loop imports none of it: it is
handed what it needs (loop.py's docstring names what provides each).
"""
