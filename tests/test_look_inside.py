"""Looking inside: every layer's hidden states and attention probabilities, as transformers
gives them, and `python -m minibert attention` drawing them."""

import sys

import pytest
import torch

from minibert import Encoder, ModelConfig, from_pretrained
from minibert.__main__ import main

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the cat dog sat on mat a ran big small house . , ##s".split()]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A random transformers BertModel with a tiny WordPiece vocabulary, saved as transformers saves it."""
    config = transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                     intermediate_size=48, max_position_embeddings=32, initializer_range=0.3,
                                     attn_implementation="eager")
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hf_bert")
    transformers.BertModel(config, add_pooling_layer=True).eval().save_pretrained(directory)
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    return directory


def padded_ids():
    ids = torch.tensor([[2, 5, 6, 8, 9, 5, 10, 16, 3], [2, 7, 13, 3, 0, 0, 0, 0, 0]])
    return ids, (ids != 0).long()


def test_hidden_states_and_attentions_equal_transformers(hf_dir):
    ids, mask = padded_ids()
    theirs = transformers.BertModel.from_pretrained(hf_dir, attn_implementation="eager").eval()
    ours = from_pretrained(hf_dir)
    with torch.no_grad():
        expected = theirs(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
        got = ours(ids, mask, output_hidden_states=True, output_attentions=True)
    real = mask.bool()
    assert len(got.hidden_states) == 4 and len(got.attentions) == 3
    for mine, reference in zip(got.hidden_states, expected.hidden_states):
        torch.testing.assert_close(mine[real], reference[real], atol=1e-5, rtol=1e-5)
    for mine, reference in zip(got.attentions, expected.attentions):
        keys = real[:, None, None, :].expand_as(mine)
        queries = real[:, None, :, None].expand_as(mine)
        torch.testing.assert_close(mine[queries & keys], reference[queries & keys], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("share", ["none", "all"])
def test_attentions_are_probabilities_over_the_real_keys_and_hidden_states_end_at_the_output(share):
    config = ModelConfig(vocab_size=20, hidden_size=16, num_layers=3, num_heads=2, intermediate_size=24, max_positions=16,
                         share_layers=share, position_encoding="rotary", norm="pre", hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = Encoder(config).eval()
    ids, mask = padded_ids()
    with torch.no_grad():
        plain = model(ids, mask)
        out = model(ids, mask, output_hidden_states=True, output_attentions=True)
    real = mask.bool()  # padding positions: zero unpadded, computed (and never read) on the grid
    torch.testing.assert_close(out.last_hidden_state[real], plain.last_hidden_state[real], atol=1e-6, rtol=1e-5)
    assert plain.hidden_states is None and plain.attentions is None
    for probs in out.attentions:  # [B, heads, T, T]
        assert probs.shape == (2, 2, 9, 9)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2, 2, 9))
        assert not probs[1, :, :, 4:].any()  # nobody attends to padding
    # the last entry is the last layer's output, before the pre-LN's final LayerNorm
    torch.testing.assert_close(model.final_norm(out.hidden_states[-1]), out.last_hidden_state)


def test_looking_inside_is_the_plain_forward_keeping_what_each_layer_passes_on():
    config = ModelConfig(vocab_size=20, hidden_size=16, num_layers=3, num_heads=2, intermediate_size=24, max_positions=16,
                         hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = Encoder(config).eval()
    ids = padded_ids()[0][:1]  # no padding: the plain call runs on the padded grid too
    with torch.no_grad():
        plain = model(ids)
        out = model(ids, needed=ids == 5, output_hidden_states=True)  # looking inside computes every position
        embedded = model.embeddings(ids, torch.arange(ids.shape[1]), torch.zeros_like(ids))
    assert len(out.hidden_states) == 4 and out.attentions is None
    assert torch.equal(out.hidden_states[0], embedded)
    assert torch.equal(out.hidden_states[-1], plain.last_hidden_state)  # post-LN: no final LayerNorm
    assert torch.equal(out.last_hidden_state, plain.last_hidden_state)
    assert torch.equal(out.pooler_output, plain.pooler_output)


def test_the_attention_command_draws_one_picture_per_call(hf_dir, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "attention.png"
    assert main(["attention", str(hf_dir), "the cat sat on the mat", "--layer", "1", "--out", str(picture)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["attention", str(hf_dir), "the cat", "--head", "9", "--out", str(picture)]) == 2
    assert "--head 9 does not exist: the model has 4 heads" in capsys.readouterr().err


def test_without_matplotlib_the_command_says_what_to_install(hf_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    assert main(["attention", str(hf_dir), "the cat", "--out", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install matplotlib" in err
