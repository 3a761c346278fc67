"""The chapter's training: the one loop every variant and task runs, and what it is configured by.

    loop.py       the loop and its step (forward, loss, backward, clip, step), AdamW with no
                  decay on biases and LayerNorm, the learning-rate schedules, evaluation
    lamb.py       LAMB, ALBERT's optimizer for large batches
    settings.py   every setting of a pretraining run, with its default: one dataclass

Machinery, not here: what turns settings into a finished run (the command line, the output
folder, checkpoints, plans, reports, curves, TensorBoard) lives in `minibert/runs/`; DDP,
precision and atomic files in `minibert/operations/`.
"""
