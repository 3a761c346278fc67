"""Files written by earlier versions still load: every rename in operations/old_files.py, read
back through the file that holds it (the model's config.json, a checkpoint's data order)."""

from __future__ import annotations

import json

import pytest
import torch

import numpy as np

import minibert
from minibert import MaskedLM, ModelConfig
from minibert.data import Masking
from minibert.data.dataset import PretrainingBatches
from minibert.data.examples import Examples
from minibert.operations.checkpoint import Checkpoints
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


@pytest.mark.parametrize("old_name", ["rows", "copies"])
def test_a_checkpoint_whose_data_order_has_an_old_name_resumes_there(tmp_path, old_name):
    """A checkpoint saved when the data order's "examples" was called "rows" or "copies" resumes at its position."""
    examples = Examples(input_ids=np.full((12, 6), 7, dtype=np.int32), token_type_ids=np.zeros((12, 6), dtype=np.uint8),
                        lengths=np.full(12, 6, dtype=np.int32), sentence_label=None)
    masking = Masking(vocab_size=20, mask_id=4, never_masked=[0], never_drawn=[0], mask_prob=0.2, replace_probs=(0.8, 0.1, 0.1),
                      max_span=1, word_starts=None, count="bernoulli", smoothing=0.0)
    serve = lambda: PretrainingBatches(examples, masking, batch_size=4, static_masks=None, seed=3)
    served = serve()
    stream = iter(served)
    for _ in range(4):  # into the second epoch
        next(stream)
    order = served.state_dict()
    old = {(old_name if name == "examples" else name): value for name, value in order.items()}  # as written before the rename
    Checkpoints(tmp_path).save(4, {"step": 4, "ranks": [{"data": [old]}]})
    state, _ = Checkpoints(tmp_path).load()
    resumed = serve()
    resumed.load_state_dict(state["ranks"][0]["data"][0])
    assert resumed.state_dict() == order
    assert torch.equal(next(iter(resumed))["input_ids"], next(stream)["input_ids"])
