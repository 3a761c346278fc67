"""Serving batches: static vs dynamic masks, seeded resumable order, DDP shards, eval, the entry point."""

import random

import numpy as np
import pytest
import torch
from test_data_support import DATASETS, PositionTokenizer, numbered_store

from minibert.corpus.pipeline import build_pretraining_data
from minibert.data import Masking
from minibert.data.dataset import PretrainingBatches
from minibert.data.examples import Examples, build_examples
from minibert.corpus.stored_examples import build_static_masks, load_examples, write_examples

# Every value build_pretraining_data needs: it keeps no defaults of its own for them.
DATA = dict(vocab_size=400, seq_len=32, layout="sop", masking="dynamic", dupe_factor=1, mask_prob=0.15,
            replace_probs=(0.8, 0.1, 0.1), whole_word=False, max_span=1, short_seq_prob=0.1, batch_size=2, seed=0,
            mask_count="bernoulli", max_predictions=None, mask_smoothing=0.0)

SHAPE = [[(d * 7 + s * 3) % 20 + 3 for s in range(12)] for d in range(10)]


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("store")
    store, tokenizer = numbered_store(SHAPE, directory), PositionTokenizer()
    spans = build_examples(store, **CUT)
    masking = Masking.for_tokenizer(tokenizer, mask_prob=0.15, replace_probs=(0.8, 0.1, 0.1), max_span=1, whole_word=False,
                                    count="bernoulli", smoothing=0.0)
    return store, Examples.from_spans(store, spans, tokenizer, 32), tokenizer, masking, directory


CUT = dict(layout="sop", max_length=32, short_seq_prob=0.1, seed=0, specials=(2, 3))


def batches(parts, masking="dynamic", copies=1, **options):
    store, examples, tokenizer, recipe, directory = parts
    static = None
    if masking == "static":  # BERT's copies: the corpus cut `copies` times, each copy masked once
        folder = directory / f"examples-{copies}"
        examples = load_examples(folder) if folder.is_dir() else write_examples(store, tokenizer, range(store.n_documents),
                                                                                 CUT, folder, copies=copies)
        static = build_static_masks(examples, recipe, directory / f"masks-{copies}", seed=0)
    return PretrainingBatches(examples, recipe, static_masks=static, **{"batch_size": 8, "seed": 0, **options})


def sequences(batch):
    """(original ids, served ids) of every sequence in a batch."""
    original = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    return [(tuple(o[m.bool()].tolist()), tuple(i[m.bool()].tolist())) for o, i, m in zip(original, batch["input_ids"], batch["attention_mask"])]


def masks_by_sequence(source, epoch):
    served: dict = {}
    for batch in source.epoch_batches(epoch):
        for original, shown in sequences(batch):
            served.setdefault(original, []).append(shown)
    return {key: sorted(value) for key, value in served.items()}


def test_static_masks_repeat_every_epoch_and_dynamic_masks_do_not(parts):
    static = batches(parts, "static", copies=2, batch_size=1)  # batch_size=1: no row is dropped
    first, second = masks_by_sequence(static, 0), masks_by_sequence(static, 1)
    assert first == second and sum(map(len, first.values())) == static.n_examples
    dynamic = batches(parts, batch_size=1)
    first, second = masks_by_sequence(dynamic, 0), masks_by_sequence(dynamic, 1)
    assert first.keys() == second.keys() and sum(first[k] != second[k] for k in first) > 0.9 * len(first)


def test_order_and_masks_are_seeded(parts):
    take = lambda source, n: [b for b, _ in zip(source, range(n))]
    a, b, c = take(batches(parts, seed=1), 5), take(batches(parts, seed=1), 5), take(batches(parts, seed=2), 5)
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b))
    assert not all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c) if x["input_ids"].shape == y["input_ids"].shape)


@pytest.mark.parametrize("masking", ["static", "dynamic"])
def test_resuming_from_a_state_dict_continues_exactly(parts, masking):
    source = batches(parts, masking)
    stream = iter(source)
    steps = len(source) + 3  # resume from the middle of the second epoch
    for _ in range(steps):
        next(stream)
    state = source.state_dict()
    expected = [next(stream) for _ in range(len(source))]
    resumed = batches(parts, masking)
    resumed.load_state_dict(state)
    assert state["epoch"] == 1 and state["position"] == 3
    for want, got in zip(expected, iter(resumed)):
        assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    with pytest.raises(ValueError, match="cannot resume"):
        batches(parts, masking, seed=5).load_state_dict(state)


def test_ddp_shards_are_disjoint_and_equal(parts):
    shards = [batches(parts, rank=rank, world_size=3) for rank in range(3)]
    rows = [set(s.rows_of_epoch(4).tolist()) for s in shards]
    assert len({len(r) for r in rows}) == 1 and len({len(s) for s in shards}) == 1
    assert not (rows[0] & rows[1] or rows[0] & rows[2] or rows[1] & rows[2])
    assert sum(map(len, rows)) > len(parts[1]) - 3


def test_eval_is_one_fixed_pass_over_every_example(parts):
    evaluation = batches(parts, repeat=False, batch_size=7)
    first, second = list(evaluation), list(evaluation)
    assert len(first) == len(evaluation) == -(-len(parts[1]) // 7) and sum(len(b["input_ids"]) for b in first) == len(parts[1])
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(first, second))


def test_batches_are_padded_long_tensors(parts):
    batch = next(iter(batches(parts)))
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels", "sentence_label"}
    assert all(t.dtype == torch.long for t in batch.values()) and batch["sentence_label"].shape == (8,)
    padding = batch["attention_mask"] == 0
    assert padding.any() and batch["attention_mask"][:, 0].all()
    assert (batch["input_ids"][padding] == 0).all() and (batch["labels"][padding] == -100).all()
    original = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    assert not ((batch["labels"] != -100) & (original < 5)).any()  # never [CLS], [SEP], [PAD] or [MASK]


def test_static_masks_serve_exactly_the_stored_copies(parts):
    """A batch of static copies shows each copy's stored mask: the same ids and labels as
    masking that copy's example alone with the recipe, in the order the copies were built."""
    store, examples, tokenizer, recipe, directory = parts
    static = build_static_masks(examples, recipe, directory / "masks-check", seed=3)
    generator = torch.Generator().manual_seed(3)
    masked, labels = recipe(torch.from_numpy(examples.input_ids.astype(np.int64)), generator)  # one chunk, masked at once
    source = PretrainingBatches(examples, recipe, static_masks=static, batch_size=5, seed=0)
    copies = np.array([1, 0, 2, len(examples) - 1, 4])
    batch = source.batch(0, 0, copies)
    for row, copy in enumerate(copies):
        n = int(examples.lengths[copy])
        assert torch.equal(batch["input_ids"][row, :n], masked[copy, :n])
        assert torch.equal(batch["labels"][row, :n], labels[copy, :n])


def write_corpus(path, n_documents=60, seed=0):
    rng = random.Random(seed)
    words = "data flows from text to tokens and from tokens to masked batches that teach a small model".split()
    documents = ["\n".join(" ".join(rng.choices(words, k=rng.randint(5, 15))).capitalize() + "." for _ in range(10)) for _ in range(n_documents)]
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "layout, masking, dupe, options",
    [("nsp", "static", 2, {}), ("sop", "dynamic", 1, {"max_span": 3, "whole_word": True}), ("full_sentences", "dynamic", 1, {"replace_probs": (0.85, 0.0, 0.15)}),
     ("nsp", "static", 2, {"mask_count": "round", "max_predictions": 3}),  # BERT's count, stored with its copies
     ("full_sentences", "dynamic", 1, {"mask_count": "batch", "mask_smoothing": 0.7})],  # DistilBERT's
)
def test_build_pretraining_data_end_to_end_and_cached(tmp_path, layout, masking, dupe, options):
    corpus, data_dir = write_corpus(tmp_path / "corpus.txt"), tmp_path / "data"
    settings = {**DATA, "data_dir": data_dir, "seq_len": 48, "layout": layout, "masking": masking, "dupe_factor": dupe,
                "batch_size": 4, "eval_fraction": 0.1, **options}
    data = build_pretraining_data(corpus, **settings)
    batch = next(iter(data.train))
    assert batch["input_ids"].shape[0] == 4 and batch["input_ids"].shape[1] <= 48
    assert ("sentence_label" in batch) == (layout != "full_sentences")
    assert (batch["labels"] != -100).any() and int(batch["input_ids"].max()) < data.tokenizer.vocab_size
    assert int((batch["labels"] != -100).sum(1).max()) <= options.get("max_predictions", 48)
    assert data.eval is not None and len(list(data.eval)) == len(data.eval)
    cached = sorted(p.name for p in data_dir.rglob("*"))
    again = build_pretraining_data(corpus, **settings)
    assert sorted(p.name for p in data_dir.rglob("*")) == cached
    assert torch.equal(next(iter(again.train))["input_ids"], batch["input_ids"])


def test_tokenizer_dir_is_filled_then_reused(tmp_path):
    corpus, tokenizer_dir = write_corpus(tmp_path / "corpus.txt"), tmp_path / "checkpoint"
    first = build_pretraining_data(corpus, **DATA, data_dir=tmp_path / "data", tokenizer_dir=tokenizer_dir)
    assert (tokenizer_dir / "tokenizer.model").is_file()
    second = build_pretraining_data(corpus, **{**DATA, "vocab_size": 999}, data_dir=tmp_path / "other", tokenizer_dir=tokenizer_dir)
    assert second.tokenizer.vocab_size == first.tokenizer.vocab_size and not list((tmp_path / "other").glob("spm-*"))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"layout": "mlm"}, "layout='mlm'"),
        ({"masking": "sometimes"}, "masking='sometimes'"),
        ({"masking": "dynamic", "dupe_factor": 10}, "only applies to static"),
        ({"seq_len": 4}, "seq_len=4"),
        ({"mask_prob": -0.1}, "mask_prob"),
        ({"replace_probs": (0.5, 0.5, 0.5)}, "replace_probs"),
        ({"eval_fraction": 1.0}, "eval_fraction"),
        ({"rank": 2, "world_size": 2}, "rank=2"),
        ({"vocab_size": 10}, "vocab_size=10"),
        ({"masking": "static", "dupe_factor": 2, "mask_count": "batch"}, "static masks are drawn before there are batches"),
        ({"mask_count": "round", "max_span": 3}, "--mask-count round counts single tokens"),
    ],
)
def test_bad_settings_fail_before_any_work(tmp_path, settings, message):
    corpus, data_dir = write_corpus(tmp_path / "corpus.txt"), tmp_path / "data"
    with pytest.raises(ValueError, match=message):
        build_pretraining_data(corpus, **{**DATA, **settings}, data_dir=data_dir)
    assert not data_dir.exists()


def test_too_small_corpora_fail_clearly(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n_documents=1)
    with pytest.raises(ValueError, match="too few to hold out.*separate documents with blank lines"):
        build_pretraining_data(corpus, **DATA, data_dir=tmp_path / "data")
    with pytest.raises(ValueError, match="cannot fill one batch"):
        build_pretraining_data(corpus, **{**DATA, "batch_size": 512}, data_dir=tmp_path / "data", eval_fraction=0)


@pytest.mark.skipif(not (DATASETS / "wikitext-2").is_dir(), reason="shared datasets not present")
def test_wikitext_2_validation_split_end_to_end(tmp_path):
    data = build_pretraining_data(DATASETS / "wikitext-2" / "valid.txt", **{**DATA, "vocab_size": 2000, "layout": "full_sentences",
                                  "seq_len": 128, "batch_size": 16}, data_dir=tmp_path, tokenizer_model="bpe")
    assert data.store.n_documents == 60 and len(data.store.tokens) > 200_000
    batch = next(iter(data.train))
    selected = batch["labels"] != -100
    fraction = float(selected.sum() / (batch["attention_mask"].sum() - 2 * len(batch["input_ids"])))  # [CLS], [SEP] aside
    assert 0.08 < fraction < 0.22 and np.all(batch["attention_mask"].sum(1).numpy() <= 128)
