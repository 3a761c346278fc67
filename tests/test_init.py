"""--init: pretraining that starts from a saved model (minibert's own or a Hugging Face
directory with its tokenizer), ELECTRA's --init-generator, a second phase at another
--seq-len, and the one-line errors when a checkpoint and the flags cannot go together."""

import json
import math
import shutil

import pytest
import torch

from minibert import MaskedLM, ModelConfig, from_pretrained, save_pretrained
from minibert.heads import IGNORE_INDEX
from minibert.runs.cli import main
from minibert.operations.distributed import Distributed
from minibert.runs.run import build_batches
from minibert.training.settings import Settings
from tiny_run import strip_model_flags, tiny_args, write_corpus

# A tiny phase 1 with a learned position table longer than its --seq-len, so that a second
# phase can use more positions (BERT trained 90% of its steps at 128 of its 512 positions).
PHASE1 = ["--position-encoding", "learned", "--max-positions", "64"]
WORDS = ("the cat dog bird fish horse cow sheep goat mouse lion eats sees likes chases finds hears follows watches "
         "small big red green quick slow happy sad near garden house field river forest barn hill road").split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


def run(variant, corpus, out, steps, *extra, model=True) -> int:
    """`python train.py` in this process: a tiny run, plus `extra`. An --init run (`model`
    False) leaves out the tiny architecture flags: it takes the checkpoint's."""
    text, cache = corpus
    args = tiny_args(variant, text, cache, out, steps)
    return main([*(args if model else strip_model_flags(args)), *extra])


def records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def bert_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("phase1")
    assert run("bert", corpus, out, 20, *PHASE1) == 0
    return out


def scored_by(model, out, forward) -> dict[str, float]:
    """Held-out MLM loss and accuracy of `model` on the batches the run in `out` evaluated on,
    rebuilt from its run.json; `forward(model, batch)` returns logits at the labeled positions."""
    settings = Settings(**json.loads((out / "run.json").read_text())["settings"])
    tokenizer_dir = settings.init or out
    _, eval_batches, _, _ = build_batches(settings, Distributed(), tokenizer_dir, 8000)
    losses, accuracies = [], []
    with torch.no_grad():
        for _, batch in zip(range(settings.eval_batches), eval_batches):
            targets = batch["labels"][batch["labels"] != IGNORE_INDEX]
            logits = forward(model.eval(), batch)
            losses.append(float(torch.nn.functional.cross_entropy(logits.float(), targets)))
            accuracies.append(float((logits.argmax(-1) == targets).float().mean()))
    return {"eval_mlm_loss": sum(losses) / len(losses), "eval_mlm_accuracy": sum(accuracies) / len(accuracies)}


def ours(model, batch):
    return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"]).masked_logits


def assert_step0_is(out, expected: dict[str, float]):
    first = records(out)[0]
    assert first["step"] == 0
    for name, value in expected.items():
        assert first[name] == pytest.approx(value, rel=1e-5, abs=1e-6), name


# --- step 0 is the loaded model ---------------------------------------------------------------

def test_step0_scores_what_the_loaded_minibert_checkpoint_scores(bert_run, corpus, tmp_path, capsys):
    out = tmp_path / "continued"
    assert run("bert", corpus, out, 2, "--init", str(bert_run), model=False) == 0
    logged = capsys.readouterr().out
    assert f"starting from {bert_run}" in logged and "freshly initialised: NSP head" in logged
    loaded = from_pretrained(bert_run, head="mlm")
    expected = scored_by(loaded, out, ours)
    assert_step0_is(out, expected)
    assert expected["eval_mlm_loss"] < math.log(loaded.config.vocab_size) - 0.5  # trained: a fresh model would not score this
    assert json.loads((out / "run.json").read_text())["config"] == loaded.config.to_dict()
    assert (out / "tokenizer.model").read_bytes() == (bert_run / "tokenizer.model").read_bytes()
    assert from_pretrained(out, head="mlm").config == loaded.config


def test_step0_scores_what_a_hugging_face_checkpoint_scores(corpus, tmp_path, capsys):
    """A random BertForMaskedLM saved with its WordPiece vocab.txt; transformers is the oracle."""
    transformers = pytest.importorskip("transformers")
    from minibert.tokenizers.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS])
    config = transformers.BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    reference = transformers.BertForMaskedLM(config).eval()
    with torch.no_grad():  # a model that knows one thing — "the" is frequent — so that accuracy is not ~0
        reference.cls.predictions.bias[tokenizer.token_to_id["the"]] = 4.0
    hf = tmp_path / "hf"
    reference.save_pretrained(hf)
    tokenizer.save(hf)

    out = tmp_path / "continued"
    assert run("bert", corpus, out, 2, "--init", str(hf), model=False) == 0
    assert f"starting from {hf}" in capsys.readouterr().out
    expected = scored_by(reference, out, reference_logits)
    assert expected["eval_mlm_accuracy"] > 0.05
    assert_step0_is(out, expected)
    assert (out / "vocab.txt").read_text() == (hf / "vocab.txt").read_text()  # the run keeps the vocabulary it read


def test_step0_scores_what_a_hugging_face_checkpoint_with_sentencepiece_scores(bert_run, corpus, tmp_path):
    """A minibert model exported in Hugging Face's format with its tokenizer.model beside it."""
    transformers = pytest.importorskip("transformers")
    from minibert.tokenizers import load_tokenizer

    hf = save_pretrained(from_pretrained(bert_run, head="mlm"), tmp_path / "hf", format="hf", tokenizer=load_tokenizer(bert_run))
    out = tmp_path / "continued"
    assert run("bert", corpus, out, 1, "--init", str(hf), model=False) == 0
    reference = transformers.BertForMaskedLM.from_pretrained(hf).eval()
    assert_step0_is(out, scored_by(reference, out, reference_logits))


def reference_logits(model, batch):
    """A transformers masked-LM's logits at the labeled positions."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"]).logits
    return logits[batch["labels"] != IGNORE_INDEX]


# --- ELECTRA ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def electra_run(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("electra")
    assert run("electra", corpus, out, 10) == 0
    return out


def test_electra_continues_discriminator_and_generator(electra_run, corpus, tmp_path, capsys):
    """With the same data settings, step 0 of the continued run IS the first run's last
    evaluation: the same batches, the same seeded samples, the same two models."""
    out = tmp_path / "continued"
    assert run("electra", corpus, out, 2, "--init", str(electra_run), "--init-generator", str(electra_run / "generator"),
               model=False) == 0
    assert "nothing starts fresh" in capsys.readouterr().out
    last = records(electra_run)[-1]
    assert_step0_is(out, {name: value for name, value in last.items() if name.startswith("eval_")})
    generator = from_pretrained(electra_run / "generator", head="mlm")
    assert_step0_is(out, scored_by(generator, out, ours))


def test_electra_without_a_generator_builds_a_fresh_one_at_the_fraction(electra_run, corpus, tmp_path, capsys):
    out = tmp_path / "continued"
    assert run("electra", corpus, out, 2, "--init", str(electra_run), "--generator-fraction", "0.5", model=False) == 0
    assert "freshly initialised: ELECTRA generator" in capsys.readouterr().out
    discriminator = json.loads((electra_run / "config.json").read_text())
    generator = json.loads((out / "generator" / "config.json").read_text())
    assert generator["hidden_size"] == discriminator["hidden_size"] // 2
    assert generator["embedding_size"] == (discriminator["embedding_size"] or discriminator["hidden_size"])


def test_electra_from_an_mlm_checkpoint_starts_a_fresh_detection_head(bert_run, corpus, tmp_path, capsys):
    out = tmp_path / "electra"
    assert run("electra", corpus, out, 1, "--init", str(bert_run), model=False) == 0
    assert "freshly initialised: replaced-token-detection head, ELECTRA generator" in capsys.readouterr().out
    loaded, kept = from_pretrained(bert_run), from_pretrained(out)
    assert kept.config.hidden_size == loaded.config.hidden_size and kept.config.share_layers == "none"


# --- two phases -------------------------------------------------------------------------------

def test_second_phase_at_a_longer_seq_len_and_another_batch_size(bert_run, corpus, tmp_path):
    out = tmp_path / "phase2"
    assert run("bert", corpus, out, 2, "--init", str(bert_run), "--seq-len", "64", "--batch-size", "4", model=False) == 0
    saved = json.loads((out / "run.json").read_text())
    assert saved["settings"]["seq_len"] == 64 and saved["settings"]["batch_size"] == 4
    assert saved["config"] == json.loads((bert_run / "run.json").read_text())["config"]


def test_rotary_models_take_any_seq_len(electra_run, corpus, tmp_path):
    """Rotary positions have no table, so a longer second phase needs no planning."""
    out = tmp_path / "phase2"
    assert run("electra", corpus, out, 1, "--init", str(electra_run), "--init-generator", str(electra_run / "generator"),
               "--seq-len", "48", model=False) == 0
    for directory in (out, out / "generator"):
        assert json.loads((directory / "config.json").read_text())["max_positions"] == 48


# --- one-line errors ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def albert_checkpoint(bert_run, tmp_path_factory):
    """ALBERT weights (one shared layer, factorized embeddings) beside bert_run's tokenizer."""
    vocab = from_pretrained(bert_run).config.vocab_size
    directory = tmp_path_factory.mktemp("albert")
    config = ModelConfig(vocab_size=vocab, hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2,
                         embedding_size=16, share_layers="all", max_positions=64)
    save_pretrained(MaskedLM(config), directory)
    shutil.copy(bert_run / "tokenizer.model", directory)
    return directory


@pytest.mark.parametrize("variant, extra, message", [
    ("bert", ["--init", "{missing}"], "--init {missing} is not a directory"),
    ("bert", ["--init", "{albert}"], "holds an ALBERT-style model"),
    ("albert", ["--init", "{bert}"], "continue it with --variant bert or roberta"),
    ("bert", ["--init", "{bert}", "--hidden-size", "64"], "--hidden-size 64 (it has 32)"),
    ("bert", ["--init", "{bert}", "--seq-len", "128"], "--seq-len 128 exceeds the 64 positions"),
    ("bert", ["--init", "{bert}", "--out", "{bert}"], "lies in --out"),
    ("bert", ["--init", "{bert}", "--init-generator", "{bert}"], "--init-generator is ELECTRA's"),
    ("electra", ["--init-generator", "{bert}"], "pass the discriminator with --init too"),
    ("electra", ["--init", "{bert}", "--init-generator", "{albert}"], "its embeddings differ from the discriminator's"),
    ("electra", ["--init", "{electra}", "--init-generator", "{electra}"], "--init-generator {electra}: it has no masked-LM head"),
    ("distilbert", ["--init", "{bert}", "--teacher", "{bert}"], "use --variant roberta --init"),
])
def test_checkpoints_that_cannot_fit_are_one_line_errors(variant, extra, message, bert_run, albert_checkpoint, electra_run,
                                                         corpus, tmp_path, capsys):
    paths = {"missing": tmp_path / "nowhere", "albert": albert_checkpoint, "bert": bert_run, "electra": electra_run}
    extra = [arg.format(**paths) for arg in extra]
    before = sorted(p.name for p in bert_run.iterdir())
    assert run(variant, corpus, tmp_path / "out", 1, *extra, model=False) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("train.py: error: ")
    assert message.format(**paths) in err
    assert sorted(p.name for p in bert_run.iterdir()) == before  # nothing on disk lost


def test_resume_of_an_init_run_continues_its_checkpoint(bert_run, corpus, tmp_path, capsys):
    """An --init run that was interrupted continues with the same command plus --resume: the
    checkpoint in --out wins over --init's weights, and the settings check still applies."""
    out = tmp_path / "continued"
    args = ["--init", str(bert_run), "--save-every", "2", "--keep", "10"]
    assert run("bert", corpus, out, 4, *args, model=False) == 0
    shutil.rmtree(out / "checkpoints" / "step-00000004")  # as if killed after step 2
    (out / "checkpoints" / "latest").write_text("step-00000002\n")
    capsys.readouterr()
    assert run("bert", corpus, out, 4, *args, "--resume", model=False) == 0
    logged = capsys.readouterr().out
    assert "resuming bert from" in logged and "starting from" not in logged
    assert run("bert", corpus, out, 4, *args, "--resume", "--seq-len", "64", model=False) == 2
    assert "--seq-len 32 -> 64" in capsys.readouterr().err
