"""Machinery: tools around the model: question a checkpoint, look inside it, explore it.

    probe.py           fill-mask and replaced-token detection on a text (`minibert.fill_mask`, `detect_replaced`)
    info.py            what a checkpoint folder holds (`python -m minibert info DIR`)
    attention_maps.py  each layer's attention drawn as heatmaps (`python -m minibert attention`)
    explore/           `python -m minibert explore`: a local page of the run's code acting on text
    commands.py        `python -m minibert COMMAND`: parses the arguments and prints

None of this is needed to train or to read the model: the core (config, model, attention,
heads, objectives, data, tokenizers) never imports it.
"""
