"""How a fine-tune runs: pretraining's run tools for the one fine-tuning job (job.py).

    steps.py        the loop's steps: a new order of the rows each epoch, split over processes and
                    --grad-accum; OUT held by one run; checkpoints, --resume, torchrun, --compile
    evaluations.py  dev scored every --eval-every steps, the best model kept, --patience

Machinery: none of it changes what a step computes.
"""
