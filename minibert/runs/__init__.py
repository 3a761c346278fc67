"""Machinery: a pretraining run around the chapter's loop, from flags to a saved model.

    cli.py         `python train.py`: the command line, generated from the settings dataclasses
    api.py         minibert.pretrain(...): the same run from Python, each flag a keyword
    run.py         a run from settings to a saved model, step by step
    resolved.py    the start-up block: each value and the layer it came from
    plan.py        --plan: a run's FLOPs and wall time, before it starts
    flops.py       the FLOPs of a training step, counted from the config (the plan, MFU)
    resume.py      --resume: what a checkpoint holds, and the run put back where it was
    phases.py      --stop-at and --continue-from: a recipe in two phases
    init_from.py   --init: a run that starts from a saved model
    levers.py      --compile and --checkpoint-activations, switched on before the loop
    metrics.py     OUT/metrics.jsonl
    report.py      what a run prints about itself, and its checks against the default band
                   (what the loop is handed as its `report`)
    curves.py      training curves drawn from metrics.jsonl
    pictures.py    how every figure is titled and saved (matplotlib, an optional extra)
    tensorboard.py --report-to tensorboard
    errors.py      one-line errors: what the command line says in one line (operations/errors.py: a run that cannot go on)
"""
