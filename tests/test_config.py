import pytest
import torch
from hypothesis import given, settings, strategies as st

from minibert import Encoder, ModelConfig

PUBLISHED = {
    "bert-base": 109_482_240,
    "bert-large": 335_141_888,
    "roberta-base": 124_645_632,
    "albert-base": 11_683_584,
    "albert-large": 17_683_968,
    "albert-xlarge": 58_724_864,
    "distilbert-base": 66_362_880,
    "electra-small": 13_483_008,
    "electra-base": 108_891_648,
}


def count(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_counts_equal_the_published_backbones(name):
    with torch.device("meta"):  # no memory, no init time: only shapes
        assert count(Encoder(ModelConfig.preset(name))) == PUBLISHED[name]


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(hidden_size=100, num_heads=12), "hidden_size"),
        (dict(embedding_size=0), "embedding_size"),
        (dict(num_layers=0), "num_layers"),
        (dict(vocab_size=-3), "vocab_size"),
        (dict(share_layers="some"), "share_layers"),
        (dict(norm="middle"), "norm"),
        (dict(activation="swish2"), "activation"),
        (dict(attention_backend="flash3"), "attention_backend"),
        (dict(hidden_dropout=1.5), "hidden_dropout"),
        (dict(pad_token_id=40000), "pad_token_id"),
        (dict(position_offset=600), "position_offset"),
        (dict(type_vocab_size=-1), "type_vocab_size"),
        (dict(num_heads=2.5), "num_heads"),
    ],
)
def test_invalid_configs_are_rejected_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=f"ModelConfig.{field}"):
        ModelConfig(**changes)


def test_unknown_preset_and_unknown_field_are_clear_errors():
    with pytest.raises(ValueError, match="unknown preset"):
        ModelConfig.preset("gpt2")
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"hidden": 3})


def test_config_round_trips_through_json():
    import json

    config = ModelConfig.preset("albert-base", num_layers=3, attention_backend="naive")
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.integers(10, 300),
    embedding=st.integers(1, 16),
    heads=st.integers(1, 4),
    head_dim=st.integers(4, 8),
    layers=st.integers(1, 3),
)
def test_factorized_embeddings_cost_VE_plus_EH(vocab, embedding, heads, head_dim, layers):
    hidden = heads * head_dim
    embedding = min(embedding, hidden)
    base = dict(vocab_size=vocab, hidden_size=hidden, num_heads=heads, intermediate_size=2 * hidden,
                num_layers=layers, max_positions=16, type_vocab_size=0, pooler=False)
    full = count(Encoder(ModelConfig(**base)).embeddings.word_embeddings)
    enc = Encoder(ModelConfig(**base, embedding_size=embedding))
    factorized = count(enc.embeddings.word_embeddings) + (count(enc.embedding_projection) if enc.embedding_projection else 0)
    assert full == vocab * hidden
    if embedding < hidden:
        assert factorized == vocab * embedding + embedding * hidden + hidden  # + the projection's bias
    else:
        assert factorized == full


def test_embeddings_wider_than_hidden_are_projected_down():
    """ELECTRA's base and large generators: E = 768 or 1024 tables feeding H = 256 layers."""
    config = ModelConfig.preset("electra-small", embedding_size=768, hidden_size=256, num_layers=1)
    with torch.device("meta"):
        encoder = Encoder(config)
    assert encoder.embeddings.word_embeddings.weight.shape == (config.vocab_size, 768)
    assert encoder.embedding_projection.weight.shape == (256, 768)
