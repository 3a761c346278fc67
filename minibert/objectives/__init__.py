"""Pretraining objectives, one idea per file. Each is a small module called as

    loss, metrics = objective(model, batch, output)

with the kept model, a batch from `minibert.data` and the kept model's encoder pass over
that batch (None for objectives that set `reads_output = False`). An objective that reads
that pass also says where, `needed_positions(batch)` ([B, T] bool, or None for every
position), so the encoder's last layer computes only those positions.

    mlm.py          masked language modeling: the MLM head, its loss (fused with the decoder), the objective
    sentence.py     NSP (BERT) and SOP (ALBERT): one 2-way head on [CLS]
    rtd.py          replaced token detection (ELECTRA): generator, sampling, the discriminator's loss
    kd.py           distillation from a teacher (DistilBERT)
    pretrainer.py   `Pretrainer`: the kept model and its objectives, summed over one encoder pass
    task_distillation.py   the fine-tuning distillation loss (`train.py finetune --teacher`)

Import from the modules themselves (`from minibert.objectives.mlm import ...`): the MLM head
is part of the task model `minibert.MaskedLM`, so this package does not import them all.
"""
