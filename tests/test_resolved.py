"""The start-up block: each resolved value under the layer it came from; --print-config prints
it and exits without building anything."""

import os

from minibert.runs.cli import main


def layers(text: str, section: str) -> dict[str, str]:
    """layer -> its values, joined, within one section ('model' or 'settings') of the block."""
    found, current, inside = {}, None, False
    for line in text.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            inside = line.strip() == section
            continue
        if inside and line.startswith("    "):
            head = line[4:15].strip()
            current = head or current
            found[current] = (found.get(current, "") + " " + line[15:].strip()).strip()
    return found


def test_print_config_names_each_values_layer_and_builds_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--variant", "albert", "--print-config", "--num-layers", "4", "--steps", "20"]) == 0
    out = capsys.readouterr().out
    model, settings = layers(out, "model"), layers(out, "settings")
    assert model["flag"] == "num_layers=4"
    assert "share_layers=all" in model["variant"] and "embedding_size=64" in model["variant"]
    assert "hidden_size=128" in model["default"] and "position_encoding=rotary" in model["default"]
    assert "hidden_size=768" not in out and "norm=post" in model["default"]
    assert settings["flag"] == "steps=20"
    assert "whole_word=True" in settings["variant"] and "max_span=3" in settings["variant"]
    assert "mask_prob=0.4" in settings["default"] and "kd_temperature" not in out
    assert os.listdir(tmp_path) == []  # no checkpoints/, no data/


def test_electra_states_its_own_masking_rate(capsys):
    assert main(["--variant", "electra", "--print-config"]) == 0
    settings = layers(capsys.readouterr().out, "settings")
    assert "mask_prob=0.25" in settings["variant"] and "lr=0.0005" in settings["variant"]
    assert "warmup=0.15" in settings["variant"]
    assert "rtd_weight=50" in settings["variant"]  # ELECTRA's weight is its variant's, beside its reason
