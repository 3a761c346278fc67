"""Tools around the model: question a checkpoint, look inside it, count its cost.

    probe.py           fill-mask and replaced-token detection on a text (`minibert.fill_mask`, `detect_replaced`)
    info.py            what a checkpoint folder holds (`python -m minibert info DIR`)
    attention_maps.py  each layer's attention drawn as heatmaps (`python -m minibert attention`)
    pictures.py        how every figure is titled and saved (matplotlib, an optional extra)
    flops.py           the FLOPs of a training step, counted from the config (MFU, the cost line)
    commands.py        `python -m minibert COMMAND`: parses the arguments and prints

None of this is needed to train or to read the model: the core (config, model, attention,
heads, objectives, data, tokenizers) never imports it.
"""
