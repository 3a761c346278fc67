"""Machinery: what keeps a run safe and repeatable, apart from what it computes (operations).

    checkpoint.py   atomic, checksummed checkpoints; state.py their contents without pickle
                    (model, optimizer, RNG, data position: --resume ends bit-identical)
    outdir.py       OUT's lock, and refusing to clobber a checkpoint
    distributed.py  torchrun / DDP: one process per device, gradients averaged in backward
    precision.py    --precision: the autocast context and the fp16 loss scaler
    files.py        atomic writes (temp file, fsync, rename), one JSON-object reader, hashing
    tensor_files.py a checkpoint folder's tensors read and written by name, every name accounted for
    old_files.py    the stored names a file on disk may carry besides today's: every rename
    errors.py       a run that cannot go on (TrainingError) and a warning, each one line

In a single-process fp32 run none of this runs inside a training step (bench/step_path.py).
"""
