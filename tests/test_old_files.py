"""Files written by earlier versions still load: every rename in operations/old_files.py."""

from __future__ import annotations

import json

import pytest
import torch

import minibert
from minibert import MaskedLM, ModelConfig
from minibert.operations.old_files import RENAMED, upgrade


def test_a_checkpoint_folder_with_an_old_config_name_loads(tmp_path):
    config = ModelConfig(vocab_size=40, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32, max_positions=16,
                         attention_backend="naive")
    model = MaskedLM(config).eval()
    minibert.save_pretrained(model, tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())
    stored["attention"] = stored.pop("attention_backend")  # as written before the field was renamed
    (tmp_path / "config.json").write_text(json.dumps(stored))
    loaded = minibert.from_pretrained(tmp_path, head="mlm")
    assert loaded.config == config
    ids = torch.randint(5, 40, (2, 8))
    assert torch.equal(loaded(ids).logits, model(ids).logits)


@pytest.mark.parametrize("kind", sorted(RENAMED))
def test_every_old_name_reads_as_todays(kind):
    for old, new in RENAMED[kind].items():
        assert upgrade(kind, {old: 1, "other": 2}) == {new: 1, "other": 2}
        assert upgrade(kind, {old: 1, new: 3}) == {new: 3}  # today's name wins when both are there
        assert upgrade(kind, {new: 3}) == {new: 3}
