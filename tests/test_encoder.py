import dataclasses

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from minibert import Encoder, MaskedLM, ModelConfig, ReplacedTokenDetector, SequenceClassifier


@pytest.fixture(autouse=True)
def unpad_whenever_asked(monkeypatch):
    """unpad=True runs the unpadded path on any padding here (the encoder's own rule unpads only
    batches with at least Encoder.UNPAD_FROM padding), so that both paths are compared on every batch."""
    monkeypatch.setattr(Encoder, "UNPAD_FROM", 0.0)


def tiny(**changes) -> ModelConfig:
    base = dict(vocab_size=97, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48,
                max_positions=40, hidden_dropout=0.0, attention_dropout=0.0)
    return ModelConfig(**{**base, **changes})


def batch_with_lengths(lengths, seq_len, vocab=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (len(lengths), seq_len), generator=g)
    mask = torch.zeros(len(lengths), seq_len, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    ids = ids.masked_fill(mask == 0, 0)
    types = torch.randint(0, 2, ids.shape, generator=g) * mask
    return ids, mask, types


def clone_with(model_cls, config, source, **cls_args):
    other = model_cls(config, **cls_args)
    other.load_state_dict(source.state_dict())
    return other.eval()


lengths_strategy = st.lists(st.integers(0, 24), min_size=1, max_size=4)


@settings(max_examples=30, deadline=None)
@given(lengths=lengths_strategy, extra=st.integers(0, 6), norm=st.sampled_from(["post", "pre"]),
       share=st.sampled_from(["none", "all", "attention", "ffn"]), heads=st.sampled_from([1, 2, 4]),
       positions=st.sampled_from(["learned", "rotary"]))
def test_backends_and_unpadding_agree(lengths, extra, norm, share, heads, positions):
    """naive == sdpa, packed == padded, on any lengths, masks, sharing and position encodings."""
    seq_len = max(max(lengths), 1) + extra
    torch.manual_seed(0)
    reference = Encoder(tiny(norm=norm, share_layers=share, num_heads=heads, attention_backend="naive", unpad=False,
                             position_encoding=positions)).eval()
    ids, mask, types = batch_with_lengths(lengths, seq_len)
    expected = reference(ids, mask, types).last_hidden_state
    real = mask.bool()
    for attention in ("naive", "sdpa"):
        for unpad in (False, True):
            config = reference.config.replace(attention_backend=attention, unpad=unpad)
            got = clone_with(Encoder, config, reference)(ids, mask, types).last_hidden_state
            assert torch.isfinite(got).all()
            torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


@settings(max_examples=20, deadline=None)
@given(lengths=lengths_strategy, extra=st.integers(1, 8), attention=st.sampled_from(["naive", "sdpa"]),
       unpad=st.booleans())
def test_trailing_padding_changes_nothing_at_real_positions(lengths, extra, attention, unpad):
    torch.manual_seed(1)
    model = Encoder(tiny(attention_backend=attention, unpad=unpad)).eval()
    seq_len = max(max(lengths), 1)
    ids, mask, types = batch_with_lengths(lengths, seq_len)
    padded = [F.pad(t, (0, extra)) for t in (ids, mask, types)]
    short = model(ids, mask, types)
    long = model(*padded)
    torch.testing.assert_close(long.last_hidden_state[:, :seq_len][mask.bool()], short.last_hidden_state[mask.bool()],
                               atol=1e-5, rtol=1e-5)
    nonempty = mask.any(dim=1)  # an empty sequence has no first token to pool
    torch.testing.assert_close(long.pooler_output[nonempty], short.pooler_output[nonempty], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("attention", ["naive", "sdpa"])
@pytest.mark.parametrize("unpad", [False, True])
def test_padding_never_produces_nan_even_for_fully_masked_rows(dtype, attention, unpad):
    model = Encoder(tiny(attention_backend=attention, unpad=unpad)).to(dtype).eval()
    ids, mask, types = batch_with_lengths([0, 3, 9, 0], 9)
    out = model(ids, mask, types)
    assert torch.isfinite(out.last_hidden_state).all()
    assert torch.isfinite(out.pooler_output).all()


SUBLAYER_PARAMETERS = {"attention": 4 * (32 * 32 + 32) + 2 * 32, "ffn": 2 * 32 * 48 + 48 + 32 + 2 * 32}  # + LayerNorm


@settings(max_examples=10, deadline=None)
@given(layers=st.integers(1, 6), share=st.sampled_from(["none", "all", "attention", "ffn"]))
def test_parameters_grow_with_depth_only_for_what_is_not_shared(layers, share):
    """ALBERT's claim in numbers: a shared sublayer costs its parameters once, at any depth."""
    count = lambda n: sum(p.numel() for p in Encoder(tiny(share_layers=share, num_layers=n)).parameters())
    per_layer = sum(size for name, size in SUBLAYER_PARAMETERS.items() if share not in ("all", name))
    assert count(layers) - count(1) == (layers - 1) * per_layer


SHARED = {"none": (), "all": ("attention", "feed_forward"), "attention": ("attention",), "ffn": ("feed_forward",)}


def module_at_depth(config: ModelConfig) -> dict[str, list[int]]:
    """What `share_layers` asks for, independent of the model: for each kind of sublayer, the
    index of the module applied at each depth — 0 everywhere where shared, its own otherwise."""
    return {kind: [0 if kind in SHARED[config.share_layers] else depth for depth in range(config.num_layers)]
            for kind in ("attention", "feed_forward")}


def planned_modules_applied(encoder: Encoder) -> dict[str, list[int]]:
    """Check that `encoder` holds the modules `share_layers` asks for and applies the planned
    one at each depth (through `Encoder.layer`); return the plan."""
    plan, share, depths = module_at_depth(encoder.config), encoder.config.share_layers, encoder.config.num_layers
    for slot, (kind, indices) in enumerate(plan.items()):
        modules = getattr(encoder, kind)
        assert len(modules) == len(set(indices)), f"share_layers={share!r}: {kind} holds {len(modules)} modules"
        applied = [next((i for i, module in enumerate(modules) if module is encoder.layer(depth)[slot]), None)
                   for depth in range(depths)]
        assert applied == indices, f"share_layers={share!r}: {kind} modules applied at depths 0..{depths - 1}"
    return plan


def unshared_twin(model: MaskedLM, plan: dict[str, list[int]]) -> MaskedLM:
    """The same network with every depth's sublayers as separate copies of the weights that
    `plan` says are applied there."""
    twin = MaskedLM(dataclasses.replace(model.config, share_layers="none"))
    twin.load_state_dict(model.state_dict(), strict=False)  # embeddings, head; sublayers below
    for kind, indices in plan.items():
        for depth, index in enumerate(indices):
            getattr(twin.encoder, kind)[depth].load_state_dict(getattr(model.encoder, kind)[index].state_dict())
    return twin


@pytest.mark.parametrize("share", list(SHARED))
@settings(max_examples=3, deadline=None)
@given(layers=st.integers(2, 4), seed=st.integers(0, 2**16))
def test_a_shared_sublayer_learns_from_every_depth(share, layers, seed):
    """Sharing, structurally and behaviourally, against the map `share_layers` asks for (not
    one read off the model, which a model with separate copies would satisfy): the encoder
    holds one module per shared kind and one per depth otherwise, and applies the planned one
    at each depth; it computes what the unshared twin holding the planned weights at every
    depth computes; and each module's gradient is the SUM of the twin's gradients at the
    depths that apply it (backpropagation through reuse). A model that kept separate copies
    where sharing was asked fails the first check, and would get one depth's gradient only."""
    torch.manual_seed(seed)
    model = MaskedLM(tiny(share_layers=share, num_layers=layers))
    plan = planned_modules_applied(model.encoder)
    twin = unshared_twin(model, plan)
    planned_modules_applied(twin.encoder)  # the reference itself: one module per depth, each at its own
    ids, mask, types = batch_with_lengths([9, 6], 9, seed=seed)
    labels = torch.where(mask.bool(), ids, -100)
    shared_loss, twin_loss = model(ids, mask, types, labels=labels).loss, twin(ids, mask, types, labels=labels).loss
    torch.testing.assert_close(shared_loss, twin_loss)
    shared_loss.backward()
    twin_loss.backward()
    for kind, indices in plan.items():
        for index in set(indices):
            depths = [depth for depth, used in enumerate(indices) if used == index]
            for name, param in getattr(model.encoder, kind)[index].named_parameters():
                summed = sum(getattr(twin.encoder, kind)[d].get_parameter(name).grad for d in depths)
                torch.testing.assert_close(param.grad, summed, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("share", ["all", "attention", "ffn"])
def test_perturbing_the_shared_weight_at_the_last_depth_moves_the_first(share):
    """Changing the weights reached through the LAST depth changes what the FIRST depth
    computes — only possible when both depths use one tensor."""
    torch.manual_seed(0)
    encoder = Encoder(tiny(share_layers=share, num_layers=3)).eval()
    ids, mask, types = batch_with_lengths([8], 8)
    kind = 0 if share in ("all", "attention") else 1
    first_outputs = []
    hook = encoder.layer(0)[kind].register_forward_hook(lambda module, args, output: first_outputs.append(output.clone()))
    with torch.no_grad():
        encoder(ids, mask, types)
        weight = encoder.layer(2)[kind].fn.get_parameter("qkv.weight" if kind == 0 else "up.weight")
        weight.add_(0.5 * torch.randn_like(weight))  # random: a constant shift would vanish on LayerNorm'd rows
        encoder(ids, mask, types)
    hook.remove()
    per_forward = len(first_outputs) // 2  # the hook fires at every depth that applies the module
    assert (first_outputs[0] - first_outputs[per_forward]).abs().max() > 1e-2


@settings(max_examples=15, deadline=None)
@given(lengths=lengths_strategy, rate=st.floats(0.05, 0.9), embedding=st.sampled_from([None, 8]))
def test_sparse_mlm_loss_equals_the_full_projection_loss(lengths, rate, embedding):
    torch.manual_seed(2)
    model = MaskedLM(tiny(embedding_size=embedding)).eval()
    seq_len = max(max(lengths), 1)
    ids, mask, types = batch_with_lengths(lengths, seq_len)
    g = torch.Generator().manual_seed(3)
    labels = torch.where((torch.rand(ids.shape, generator=g) < rate) & mask.bool(), ids, -100)
    sparse = model(ids, mask, types, labels=labels)
    full_logits = model(ids, mask, types).logits
    assert full_logits.shape == (*ids.shape, 97)
    if (labels != -100).any():
        expected = F.cross_entropy(full_logits.reshape(-1, 97), labels.reshape(-1), ignore_index=-100)
        torch.testing.assert_close(sparse.loss, expected, atol=1e-5, rtol=1e-5)
        assert sparse.masked_logits.shape == ((labels != -100).sum(), 97) and sparse.logits is None
    else:
        assert sparse.loss == 0


def test_mlm_decoder_is_tied_to_the_word_embeddings():
    model = MaskedLM(tiny())
    names = [n for n, _ in model.named_parameters()]
    assert not any("decoder" in n for n in names)
    with torch.no_grad():
        model.encoder.embeddings.word_embeddings.weight[7] += 1.0
    ids = torch.tensor([[5, 6, 8]])
    out = model(ids).logits
    assert out.shape == (1, 3, 97)


def test_rtd_loss_ignores_padding_and_classifier_runs():
    torch.manual_seed(0)
    model = ReplacedTokenDetector(tiny(pooler=False)).eval()
    ids, mask, types = batch_with_lengths([6, 3], 6)
    labels = torch.randint(0, 2, ids.shape)
    out = model(ids, mask, types, labels=labels)
    real = mask.bool()
    expected = F.binary_cross_entropy_with_logits(out.logits[real], labels[real].float())
    torch.testing.assert_close(out.loss, expected)
    assert out.logits.shape == ids.shape
    clf = SequenceClassifier(tiny(), num_labels=3).eval()
    out = clf(ids, mask, types, labels=torch.tensor([0, 2]))
    assert out.logits.shape == (2, 3) and torch.isfinite(out.loss)


def test_too_long_sequence_is_a_clear_error():
    model = Encoder(tiny())
    with pytest.raises(ValueError, match="exceeds the 40 positions"):
        model(torch.zeros(1, 41, dtype=torch.long))


@settings(max_examples=15, deadline=None)
@given(length=st.integers(1, 20), shift=st.integers(1, 15), attention=st.sampled_from(["naive", "sdpa"]))
def test_rotary_attention_sees_only_relative_offsets(length, shift, attention):
    """RoPE: moving every position by the same amount changes no output — scores depend on
    i - j alone — while with learned positions it does; and there is no position table."""
    torch.manual_seed(0)
    config = tiny(position_encoding="rotary", attention_backend=attention, max_positions=40)
    model = Encoder(config).eval()
    assert model.embeddings.position_embeddings is None
    shifted = clone_with(Encoder, config.replace(position_offset=shift), model)
    ids = torch.randint(5, 97, (2, length))
    torch.testing.assert_close(shifted(ids).last_hidden_state, model(ids).last_hidden_state, atol=1e-5, rtol=1e-5)
    learned = Encoder(tiny(attention_backend=attention, max_positions=40)).eval()
    moved = clone_with(Encoder, learned.config.replace(position_offset=shift), learned)
    assert not torch.allclose(moved(ids).last_hidden_state, learned(ids).last_hidden_state, atol=1e-4)


def test_rotary_needs_an_even_head_size():
    with pytest.raises(ValueError, match="head size 5 .* is odd"):
        tiny(hidden_size=10, num_heads=2, position_encoding="rotary")


def test_roberta_style_position_offset_shifts_positions():
    config = tiny(position_offset=2, pad_token_id=1, max_positions=42, type_vocab_size=1)
    model = Encoder(config).eval()
    ids = torch.randint(5, 97, (1, 40))
    assert model(ids).last_hidden_state.shape == (1, 40, 32)
    with pytest.raises(ValueError, match="exceeds the 40 positions"):
        model(torch.randint(5, 97, (1, 41)))


@settings(max_examples=30, deadline=None)
@given(lengths=lengths_strategy, extra=st.integers(0, 4), rate=st.floats(0.0, 1.0), norm=st.sampled_from(["post", "pre"]),
       share=st.sampled_from(["none", "all"]), attention=st.sampled_from(["naive", "sdpa"]), unpad=st.booleans(),
       pooler=st.booleans(), full=st.booleans(), seed=st.integers(0, 2**16))
def test_needed_positions_are_computed_exactly(lengths, extra, rate, norm, share, attention, unpad, pooler, full, seed):
    """needed: the last layer runs at the needed positions only — the same hidden states (and
    gradients) there as the full pass, zeros elsewhere."""
    seq_len = max(max(lengths), 1) + extra
    if full:
        lengths = [seq_len] * len(lengths)
    torch.manual_seed(0)
    config = tiny(norm=norm, share_layers=share, attention_backend=attention, unpad=unpad, pooler=pooler, num_layers=3)
    full_model = Encoder(config).train()  # train mode: dropout is 0, but the backward runs
    fast_model = clone_with(Encoder, config, full_model).train()
    ids, mask, types = batch_with_lengths(lengths, seq_len)
    g = torch.Generator().manual_seed(seed)
    needed = torch.rand(ids.shape, generator=g) < rate
    weights = torch.randn(*ids.shape, config.hidden_size, generator=g)

    expected = full_model(ids, mask, types)
    got = fast_model(ids, mask, types, needed=needed)
    read = needed & mask.bool()
    torch.testing.assert_close(got.last_hidden_state[read], expected.last_hidden_state[read], atol=1e-5, rtol=1e-5)
    dropped = ~needed
    if pooler:
        dropped[:, 0] = False  # the pooler's input is always computed
    assert got.last_hidden_state.shape == expected.last_hidden_state.shape and not got.last_hidden_state[dropped].any()
    if pooler:
        torch.testing.assert_close(got.pooler_output, expected.pooler_output, atol=1e-5, rtol=1e-5)

    def loss(out):
        value = (out.last_hidden_state[read] * weights[read]).sum()
        return value + out.pooler_output.sum() if pooler else value
    loss(expected).backward()
    loss(got).backward()
    for (name, a), b in zip(full_model.named_parameters(), fast_model.parameters()):
        if a.grad is None:
            assert b.grad is None or not b.grad.any(), name
        else:
            torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_masked_lm_with_labels_computes_the_last_layer_at_labeled_positions_only():
    torch.manual_seed(0)
    model = MaskedLM(tiny(pooler=False)).eval()
    ids, mask, types = batch_with_lengths([9, 6], 10)
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 4] = ids[0, 2], ids[1, 4]
    out = model(ids, mask, types, labels=labels)
    full = model(ids, mask, types)
    labelled = labels != -100
    torch.testing.assert_close(out.last_hidden_state[labelled], full.last_hidden_state[labelled])
    assert not out.last_hidden_state[~labelled].any()
    torch.testing.assert_close(out.masked_logits, full.logits[labelled])
    expected = F.cross_entropy(full.logits[labelled], labels[labelled])
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("pooler", [True, False])
def test_classifier_with_labels_gives_the_full_pass_logits_loss_and_gradients(pooler):
    """With labels only position 0 reaches the last layer's FFN: same logits, loss, gradients."""
    torch.manual_seed(0)
    config = tiny(pooler=pooler, num_layers=2)
    full = SequenceClassifier(config, num_labels=3).train()  # dropout is 0: train mode is exact
    fast = clone_with(SequenceClassifier, config, full, num_labels=3).train()
    ids, mask, types = batch_with_lengths([7, 4, 9], 9)
    labels = torch.tensor([0, 2, 1])
    out = fast(ids, mask, types, labels=labels)
    logits = full(ids, mask, types).logits
    torch.testing.assert_close(out.logits, logits)
    expected = F.cross_entropy(logits, labels)
    torch.testing.assert_close(out.loss, expected)
    assert not out.last_hidden_state[:, 1:].any()
    expected.backward()
    out.loss.backward()
    for (name, a), b in zip(full.named_parameters(), fast.parameters()):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_rotary_rotation_equals_roformers():
    """Our RoPE pairs dimensions (2i, 2i+1) with RoFormer's frequencies: the reference
    library's RoFormer rotation is the oracle."""
    roformer = pytest.importorskip("transformers.models.roformer.modeling_roformer")
    from minibert.attention import Rotary, rotate

    head_dim, length = 16, 9
    table = roformer.RoFormerSinusoidalPositionalEmbedding(64, head_dim)
    table.weight.data = table.create_weight()
    q, k = torch.randn(2, 3, length, head_dim), torch.randn(2, 3, length, head_dim)  # [B, heads, T, d]
    want_q, want_k = roformer.RoFormerSelfAttention.apply_rotary_position_embeddings(table((2, length))[None, None], q, k)
    cos, sin = (t[:, 0] for t in Rotary(head_dim)(torch.arange(length)))  # [T, 1, 1, d] -> [T, 1, d]: over heads
    for got, want in ((q, want_q), (k, want_k)):
        torch.testing.assert_close(rotate(got.transpose(1, 2), cos, sin).transpose(1, 2), want, atol=1e-6, rtol=1e-6)


def test_a_rotary_model_saves_and_loads_with_identical_outputs(tmp_path):
    import minibert

    model = MaskedLM(tiny(position_encoding="rotary")).eval()
    minibert.save_pretrained(model, tmp_path)
    loaded = minibert.from_pretrained(tmp_path, head="mlm")
    ids = torch.randint(5, 97, (2, 12))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    minibert.save_pretrained(model, tmp_path / "hf", format="hf")  # as RoFormer: BERT with rotary positions
    torch.testing.assert_close(minibert.from_pretrained(tmp_path / "hf", head="mlm")(ids).logits, model(ids).logits)
