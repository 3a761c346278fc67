"""from_pretrained / save_pretrained, with Hugging Face transformers as the oracle.

Every family and head: a small random reference model with odd sizes is saved, loaded by
minibert and compared on a right-padded batch at the real positions; the loaded model is
exported back and must give byte-identical tensors; a freshly randomized minibert model is
exported and must give identical outputs inside transformers.
"""

import inspect
import json
import shutil
import tempfile

import pytest
import torch
from hypothesis import given, settings, strategies as st
from safetensors.torch import load_file, save_file

from minibert import Encoder, MaskedLM, ModelConfig, ReplacedTokenDetector, from_pretrained, save_pretrained
from minibert.interop.huggingface import export_family
from minibert.interop.huggingface.families import FAMILIES

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

SIZES = dict(vocab_size=99, hidden_size=48, num_hidden_layers=3, num_attention_heads=3, intermediate_size=72,
             max_position_embeddings=37, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
DISTILBERT_SIZES = dict(vocab_size=99, dim=48, n_layers=3, n_heads=3, hidden_dim=72, max_position_embeddings=37,
                        dropout=0.0, attention_dropout=0.0)


def reference_cases():
    """name -> (transformers class, its config, minibert head, family the export rule picks)."""
    T = transformers
    roberta = T.RobertaConfig(**{**SIZES, "max_position_embeddings": 41}, type_vocab_size=1, layer_norm_eps=1e-5)
    albert = dict(SIZES, embedding_size=16)
    electra = dict(SIZES, embedding_size=16)
    roformer = dict(SIZES, hidden_size=48, num_attention_heads=4)  # head_dim 12: RoPE rotates pairs
    # E > H, shaped like google/electra-base-generator (E = 768, H = 256, 4 heads, FFN 1024)
    wide_generator = dict(SIZES, embedding_size=48, hidden_size=16, num_attention_heads=4, intermediate_size=64)
    return {
        "bert": (T.BertModel, T.BertConfig(**SIZES), None, "bert"),
        "bert-mlm": (T.BertForMaskedLM, T.BertConfig(**SIZES), "mlm", "bert"),
        # positions start at pad_token_id + 1 = 2
        "roberta": (T.RobertaModel, roberta, None, "roberta"),
        "roberta-mlm": (T.RobertaForMaskedLM, roberta, "mlm", "roberta"),
        # factorized embeddings (E = 16) and one layer shared by all depths
        "albert": (T.AlbertModel, T.AlbertConfig(**albert), None, "albert"),
        "albert-mlm": (T.AlbertForMaskedLM, T.AlbertConfig(**albert), "mlm", "albert"),
        "albert-unshared-mlm": (T.AlbertForMaskedLM, T.AlbertConfig(**albert, num_hidden_groups=3), "mlm", "albert"),
        # no segment embeddings
        "distilbert": (T.DistilBertModel, T.DistilBertConfig(**DISTILBERT_SIZES), None, "distilbert"),
        "distilbert-mlm": (T.DistilBertForMaskedLM, T.DistilBertConfig(**DISTILBERT_SIZES), "mlm", "distilbert"),
        # embedding projection E -> H; generator (MLM) and discriminator (RTD) heads
        "electra-generator": (T.ElectraForMaskedLM, T.ElectraConfig(**electra), "mlm", "electra"),
        "electra-discriminator": (T.ElectraForPreTraining, T.ElectraConfig(**electra), "rtd", "electra"),
        "electra-wide-generator": (T.ElectraForMaskedLM, T.ElectraConfig(**wide_generator), "mlm", "electra"),
        # E == H: no projection, so its tensors are exactly a pooler-less BertModel's
        "electra": (T.ElectraModel, T.ElectraConfig(**SIZES, embedding_size=48), None, "bert"),
        # rotary positions: no position table, queries and keys rotated in attention
        "roformer": (T.RoFormerModel, T.RoFormerConfig(**roformer), None, "roformer"),
        "roformer-mlm": (T.RoFormerForMaskedLM, T.RoFormerConfig(**roformer), "mlm", "roformer"),
        "roformer-factorized-mlm": (T.RoFormerForMaskedLM, T.RoFormerConfig(**roformer, embedding_size=16), "mlm", "roformer"),
        "roformer-wide-mlm": (T.RoFormerForMaskedLM, T.RoFormerConfig(**roformer, embedding_size=64), "mlm", "roformer"),
    }


CASES = reference_cases()


def randomize(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Random weights everywhere (fresh inits have zero biases and identity LayerNorms)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:  # a frozen table that follows from the config (RoFormer's angles)
                continue
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1 + 0.1 * noise if "norm" in name.lower() and name.endswith("weight") else 0.1 * noise)
    return model.eval()


@pytest.fixture(scope="module", params=list(CASES))
def checkpoint(request, tmp_path_factory):
    """(name, reference model, its saved directory)."""
    cls, config, _, _ = CASES[request.param]
    torch.manual_seed(0)
    reference = randomize(cls(config), seed=1)
    directory = tmp_path_factory.mktemp(request.param)
    reference.save_pretrained(directory)
    return request.param, reference, directory


def padded_batch(config, lengths=(9, 4, 1, 7), seed=0):
    """Right-padded ids (real ids never equal the pad id), mask, segments, MLM and RTD labels."""
    g = torch.Generator().manual_seed(seed)
    seq_len = max(lengths)
    mask = (torch.arange(seq_len) < torch.tensor(lengths)[:, None]).long()
    ids = torch.randint(5, config.vocab_size, (len(lengths), seq_len), generator=g).masked_fill(mask == 0, config.pad_token_id)
    segments = torch.randint(0, max(getattr(config, "type_vocab_size", 1), 1), ids.shape, generator=g) * mask
    chosen = (torch.rand(ids.shape, generator=g) < 0.4) & mask.bool()
    chosen[0, 0] = True
    mlm_labels = torch.randint(0, config.vocab_size, ids.shape, generator=g).masked_fill(~chosen, -100)
    rtd_labels = torch.randint(0, 2, ids.shape, generator=g)
    return ids, mask, segments, mlm_labels, rtd_labels


def run_reference(model, head, ids, mask, segments, labels=None):
    kwargs = dict(input_ids=ids, attention_mask=mask, labels=labels)
    if "token_type_ids" in inspect.signature(model.forward).parameters:
        kwargs["token_type_ids"] = segments
    if head is None:
        kwargs.pop("labels")
    else:
        kwargs["output_hidden_states"] = True
    with torch.no_grad():
        out = model(**kwargs)
    hidden = out.last_hidden_state if head is None else out.hidden_states[-1]
    return hidden, getattr(out, "logits", None), getattr(out, "loss", None)


def run_ours(model, ids, mask, segments, labels=None):
    with torch.no_grad():
        out = model(ids, mask, segments) if labels is None else model(ids, mask, segments, labels=labels)
    return out.last_hidden_state, getattr(out, "logits", None), getattr(out, "loss", None)


def assert_relative_close(got, want, what):
    error = ((got - want).abs().max() / want.abs().max()).item()
    assert error < 1e-5, f"{what}: relative error {error:.2e}"


def compare(ours, reference, head):
    """Hidden states, logits and losses agree at the real positions of a padded batch."""
    ids, mask, segments, mlm_labels, rtd_labels = padded_batch(reference.config)
    real = mask.bool()
    hidden, logits, _ = run_reference(reference, head, ids, mask, segments)
    our_hidden, our_logits, _ = run_ours(ours, ids, mask, segments)
    assert_relative_close(our_hidden[real], hidden[real], "hidden states")
    if head is not None:
        assert_relative_close(our_logits[real], logits[real], "logits")
        labels = mlm_labels if head == "mlm" else rtd_labels
        _, _, loss = run_reference(reference, head, ids, mask, segments, labels)
        _, _, our_loss = run_ours(ours, ids, mask, segments, labels)
        assert_relative_close(our_loss, loss, "loss")


# --- the reference -> minibert -> reference round trip -------------------------------------


def test_loaded_model_computes_the_reference_function(checkpoint):
    name, reference, directory = checkpoint
    head = CASES[name][2]
    ours = from_pretrained(directory, head=head)
    assert type(ours) is {None: Encoder, "mlm": MaskedLM, "rtd": ReplacedTokenDetector}[head]
    assert not ours.training
    compare(ours, reference, head)


def test_export_gives_back_byte_identical_tensors(checkpoint, tmp_path):
    name, _, directory = checkpoint
    head, family = CASES[name][2], CASES[name][3]
    save_pretrained(from_pretrained(directory, head=head), tmp_path, format="hf")
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == family
    original, exported = load_file(directory / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert sorted(exported) == sorted(original)
    computed = FAMILIES[family].computed_tensors(from_pretrained(directory).config, prefixed=head is not None)
    for key, tensor in original.items():
        if key in computed:  # RoFormer's table of angles: recomputed in float32, not copied
            assert torch.allclose(exported[key], tensor, atol=1e-5, rtol=0), key
            continue
        assert exported[key].dtype == tensor.dtype and exported[key].numpy().tobytes() == tensor.numpy().tobytes(), key


def test_minibert_export_runs_in_transformers(checkpoint, tmp_path):
    name, _, directory = checkpoint
    head = CASES[name][2]
    ours = randomize(from_pretrained(directory, head=head), seed=2)
    save_pretrained(ours, tmp_path, format="hf")
    architecture = json.loads((tmp_path / "config.json").read_text())["architectures"][0]
    reference = getattr(transformers, architecture).from_pretrained(tmp_path).eval()
    compare(ours, reference, head)


def test_export_rule_maps_each_preset_to_its_own_family():
    expected = {"bert-base": "bert", "roberta-base": "roberta", "albert-base": "albert",
                "distilbert-base": "distilbert", "electra-small": "electra"}
    for preset, family in expected.items():
        assert export_family(ModelConfig.preset(preset), None, None).model_type == family
    assert export_family(ModelConfig.preset("electra-base"), "rtd", None).model_type == "electra"


# --- minibert's own format -------------------------------------------------------------------


def tiny(**changes) -> ModelConfig:
    base = dict(vocab_size=61, hidden_size=24, num_layers=2, num_heads=2, intermediate_size=40, max_positions=29)
    return ModelConfig(**{**base, **changes})


@pytest.mark.parametrize("model_cls, head", [(Encoder, None), (MaskedLM, "mlm"), (ReplacedTokenDetector, "rtd")])
def test_own_format_round_trip(model_cls, head, tmp_path):
    # pre-LN with attention-only sharing: no reference family can hold it, our format can.
    model = randomize(model_cls(tiny(norm="pre", share_layers="attention", embedding_size=8)), seed=3)
    save_pretrained(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]  # no temp files left
    loaded = from_pretrained(tmp_path, head=head)
    assert loaded.config == model.config and not loaded.training
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    if head is not None:
        bare = from_pretrained(tmp_path)  # the encoder of a task checkpoint
        assert all(torch.equal(v, model.encoder.state_dict()[k]) for k, v in bare.state_dict().items())
        other = "rtd" if head == "mlm" else "mlm"
        with pytest.raises(ValueError, match=f"head=None or head='{head}'"):
            from_pretrained(tmp_path, head=other)


@settings(max_examples=20, deadline=None)
@given(
    embedding_size=st.sampled_from([None, 8, 40]),  # E < H, E > H (hidden 24)
    share=st.sampled_from(["none", "all"]),
    type_vocab_size=st.sampled_from([0, 1, 3]),
    offset=st.booleans(),
    pooler=st.booleans(),
    activation=st.sampled_from(["gelu", "gelu_tanh", "relu"]),
    head=st.sampled_from([None, "mlm", "rtd"]),
    positions=st.sampled_from(["learned", "rotary"]),
)
def test_hf_export_then_load_is_the_identity_or_a_clear_error(
    embedding_size, share, type_vocab_size, offset, pooler, activation, head, positions
):
    """Any model either exports to some family and loads back unchanged, or is refused."""
    config = tiny(embedding_size=embedding_size, share_layers=share, type_vocab_size=type_vocab_size,
                  position_offset=2 if offset else 0, pad_token_id=1, pooler=pooler, activation=activation,
                  position_encoding=positions)
    model = randomize({None: Encoder, "mlm": MaskedLM, "rtd": ReplacedTokenDetector}[head](config), seed=4)
    with tempfile.TemporaryDirectory() as directory:
        try:
            save_pretrained(model, directory, format="hf")
        except ValueError as error:
            expected = "train with --position-encoding learned" if positions == "rotary" else "no Hugging Face family holds"
            assert expected in str(error)
            return
        loaded = from_pretrained(directory, head=head)
    # Rotary attention sees only offsets between positions: RoFormer counts from 0, the same function.
    assert loaded.config == (model.config.replace(position_offset=0) if positions == "rotary" else model.config)
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_export_with_a_wordpiece_vocabulary(tmp_path):
    from minibert.tokenizers.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s"])
    save_pretrained(Encoder(tiny()), tmp_path, format="hf", tokenizer=tokenizer)
    assert WordPieceTokenizer.from_file(tmp_path / "vocab.txt").id_to_token == tokenizer.id_to_token
    assert transformers.BertTokenizer.from_pretrained(tmp_path)("hello worlds")["input_ids"] == tokenizer.encode("hello worlds")


# --- clear errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("changes, setting", [
    (dict(share_layers="attention"), "share_layers='attention'"),
    (dict(share_layers="ffn"), "share_layers='ffn'"),
    (dict(norm="pre"), "norm='pre'"),
])
def test_export_refuses_models_without_a_reference_equivalent(changes, setting, tmp_path):
    with pytest.raises(ValueError, match=setting):
        save_pretrained(Encoder(tiny(**changes)), tmp_path, format="hf")


def test_export_to_a_named_family_that_cannot_hold_the_model(tmp_path):
    with pytest.raises(ValueError, match="cannot export as distilbert: type_vocab_size=2"):
        save_pretrained(Encoder(tiny(pooler=False)), tmp_path, format="hf", family="distilbert")
    with pytest.raises(ValueError, match="cannot export as albert: embedding_size=None"):
        save_pretrained(Encoder(tiny()), tmp_path, format="hf", family="albert")
    with pytest.raises(ValueError, match="bert has no 'rtd' head"):
        save_pretrained(ReplacedTokenDetector(tiny()), tmp_path, format="hf", family="bert")


def reference_checkpoint(tmp_path, name):
    """A saved reference checkpoint of CASES[name]; returns (directory, its tensors, its config)."""
    cls, config, _, _ = CASES[name]
    torch.manual_seed(0)
    cls(config).save_pretrained(tmp_path)
    return tmp_path, load_file(tmp_path / "model.safetensors"), json.loads((tmp_path / "config.json").read_text())


def test_unsupported_model_type(tmp_path):
    directory, _, config = reference_checkpoint(tmp_path, "bert")
    (directory / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported"):
        from_pretrained(directory)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.pop("bert.encoder.layer.1.output.dense.bias"), "lacks tensor.*'bert.encoder.layer.1.output.dense.bias'"),
    (lambda t: t.update({"bert.encoder.layer.0.attention.self.rotary.weight": torch.zeros(3)}),
     "unexpected tensor.*'bert.encoder.layer.0.attention.self.rotary.weight'"),
    (lambda t: t.update({"classifier.weight": torch.zeros(2, 48)}), "unexpected tensor.*'classifier.weight'"),
    (lambda t: t.update({"bert.encoder.layer.2.intermediate.dense.weight": torch.zeros(71, 48)}),
     r"'bert.encoder.layer.2.intermediate.dense.weight' has shape \(71, 48\), but .* implies \(72, 48\)"),
    (lambda t: t.update({"bert.encoder.layer.0.attention.self.key.bias": torch.zeros(47)}),
     r"'bert.encoder.layer.0.attention.self.key.bias' has shape \(47,\)"),
])
def test_checkpoint_that_does_not_match_its_config(edit, message, tmp_path):
    directory, tensors, _ = reference_checkpoint(tmp_path, "bert-mlm")
    edit(tensors)
    save_file(tensors, directory / "model.safetensors")
    with pytest.raises(ValueError, match=message):
        from_pretrained(directory, head="mlm")


def test_tolerated_extras_load(tmp_path):
    """Tied decoder copies, recomputed buffers, the NSP head, legacy gamma/beta names."""
    directory, tensors, _ = reference_checkpoint(tmp_path, "bert-mlm")
    expected = from_pretrained(directory, head="mlm").state_dict()
    tensors["cls.predictions.decoder.weight"] = tensors["bert.embeddings.word_embeddings.weight"].clone()
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"].clone()
    tensors["bert.embeddings.position_ids"] = torch.arange(37)[None]
    tensors["cls.seq_relationship.weight"] = torch.zeros(2, 48)
    tensors["bert.embeddings.LayerNorm.gamma"] = tensors.pop("bert.embeddings.LayerNorm.weight")
    save_file(tensors, directory / "model.safetensors")
    loaded = from_pretrained(directory, head="mlm").state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in expected.items())


class NotATensor:
    pass


def test_pickled_weights_load_with_weights_only(tmp_path):
    directory, tensors, _ = reference_checkpoint(tmp_path, "albert-mlm")
    expected = from_pretrained(directory, head="mlm").state_dict()
    (directory / "model.safetensors").unlink()
    torch.save(tensors, directory / "pytorch_model.bin")
    loaded = from_pretrained(directory, head="mlm").state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in expected.items())
    torch.save({**tensors, "extra": NotATensor()}, directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"weights_only=True"):
        from_pretrained(directory, head="mlm")


def test_head_the_checkpoint_does_not_have(tmp_path):
    discriminator, _, _ = reference_checkpoint(tmp_path / "d", "electra-discriminator")
    generator, _, _ = reference_checkpoint(tmp_path / "g", "electra-generator")
    with pytest.raises(ValueError, match="ElectraForPreTraining checkpoint has no masked-LM head"):
        from_pretrained(discriminator, head="mlm")
    with pytest.raises(ValueError, match="ElectraForMaskedLM checkpoint has no replaced-token-detection head"):
        from_pretrained(generator, head="rtd")
    with pytest.raises(ValueError, match="bert checkpoints have no 'rtd' head"):
        from_pretrained(reference_checkpoint(tmp_path / "b", "bert-mlm")[0], head="rtd")
    with pytest.raises(ValueError, match="head must be None, 'mlm' or 'rtd'"):
        from_pretrained(generator, head="nsp")


@pytest.mark.parametrize("name, changes, message", [
    ("albert-mlm", {"num_hidden_groups": 2}, "num_hidden_groups=2 with 3 layers is not supported"),
    ("albert-mlm", {"inner_group_num": 2}, "inner_group_num=2 is not supported"),
    ("albert-mlm", {"embedding_size": 48}, "no projection when embedding_size == hidden_size"),
    ("distilbert-mlm", {"sinusoidal_pos_embds": True}, "sinusoidal_pos_embds=True is not supported"),
    ("bert-mlm", {"hidden_act": "quick_gelu"}, "activation 'quick_gelu' has no minibert equivalent"),
    ("bert-mlm", {"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'"),
    ("bert-mlm", {"tie_word_embeddings": False}, "tie_word_embeddings is false"),
    ("roberta-mlm", {"hidden_act": "relu"}, "activation='relu', but roberta needs activation='gelu'"),
    ("bert-mlm", {"num_hidden_layers": None}, "config.json lacks num_hidden_layers"),
])
def test_config_minibert_cannot_compute(name, changes, message, tmp_path):
    directory, _, config = reference_checkpoint(tmp_path, name)
    (directory / "config.json").write_text(json.dumps({**config, **changes}))
    with pytest.raises(ValueError, match=message):
        from_pretrained(directory, head="mlm")


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint directory"):
        from_pretrained(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        from_pretrained(tmp_path)
    directory, _, _ = reference_checkpoint(tmp_path, "bert")
    shutil.move(directory / "model.safetensors", tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match="neither model.safetensors nor pytorch_model.bin"):
        from_pretrained(directory)


def test_roformer_table_of_angles_is_checked_not_trusted(tmp_path):
    """The table RoFormer stores must be RoPE's: minibert computes its angles and cannot use others."""
    directory, tensors, _ = reference_checkpoint(tmp_path, "roformer-mlm")
    name = "roformer.encoder.embed_positions.weight"
    from_pretrained(directory, head="mlm")  # the table transformers wrote loads
    tensors[name] = tensors[name].flip(0).contiguous()
    save_file(tensors, directory / "model.safetensors")
    with pytest.raises(ValueError, match=f"tensor '{name}' is not the one its config implies"):
        from_pretrained(directory, head="mlm")


@pytest.mark.parametrize("model, message", [
    (ReplacedTokenDetector(tiny(position_encoding="rotary")), "roformer has no 'rtd' head"),
    (MaskedLM(tiny(position_encoding="rotary", share_layers="all")), "roformer does not share layers"),
    (MaskedLM(tiny(position_encoding="rotary", type_vocab_size=0)), "roformer has segment embeddings"),
])
def test_rotary_models_roformer_cannot_hold_name_the_fix(model, message, tmp_path):
    with pytest.raises(ValueError, match=f"rotary positions export only as roformer, and .*{message}.*; train with "
                                         f"--position-encoding learned"):
        save_pretrained(model, tmp_path, format="hf")
    assert not any(tmp_path.iterdir())  # refused before anything is written
