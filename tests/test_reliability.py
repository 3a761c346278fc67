"""Reliability (issue 9): exact resume after SIGKILL, nothing clobbered, one run per folder,
NaN handling, and a one-line error with exit status 2 for every bad input."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from minibert.training.loop import Pretrainer
from minibert.runs.cli import main
from minibert.operations.outdir import OutputDir
from minibert.runs.metrics import MetricsLog
from tiny_run import REPO, kill_at_random_moments, run_cli, tiny_args, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


def args_for(corpus, out, *extra, variant="albert", steps=6):
    text, cache = corpus
    return tiny_args(variant, text, cache, out, steps, "--save-every", "2", *extra)


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_one_line_error(capsys, code, fragment):
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("train.py: error:")]
    assert code == 2 and len(err) == 1 and fragment in err[0], err


# --- exact resume ---------------------------------------------------------------------------

@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_is_bit_identical(corpus, tmp_path):
    """A real process, killed with SIGKILL at random moments (mid-step, mid-checkpoint),
    resumed each time: the end state equals an uninterrupted run's, bit for bit."""
    steps = 24
    flags = ["--hidden-dropout", "0.1", "--attention-dropout", "0.1"]  # dropout: the RNG must be restored too
    reference = tmp_path / "reference"
    assert main(args_for(corpus, reference, *flags, variant="electra", steps=steps)) == 0

    killed = tmp_path / "killed"
    command = [sys.executable, str(REPO / "train.py"), *args_for(corpus, killed, *flags, variant="electra", steps=steps)]
    kill_at_random_moments(command, killed / "metrics.jsonl", latest=1.5)
    finished = run_cli(args_for(corpus, killed, *flags, "--resume", variant="electra", steps=steps))
    assert finished.returncode == 0, finished.stderr

    final = f"checkpoints/step-{steps:08d}/tensors.safetensors"
    a, b = load_file(reference / final), load_file(killed / final)
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, different[:5]  # weights, Adam moments, RNG and data positions
    assert (reference / "model.safetensors").read_bytes() == (killed / "model.safetensors").read_bytes()
    steps_logged = [json.loads(line)["step"] for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(set(steps_logged))  # the log reads as one run


# --- nothing overwritten, one run per folder ------------------------------------------------

def test_refuses_to_train_into_a_folder_with_a_checkpoint(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(args_for(corpus, out, steps=2)) == 0
    before = snapshot(out)
    assert_one_line_error(capsys, main(args_for(corpus, out, steps=2)), "--resume")
    assert snapshot(out) == before
    assert main(args_for(corpus, out, "--overwrite", steps=2)) == 0


def test_a_second_run_into_the_same_folder_refuses_and_a_stale_lock_is_taken_over(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    with OutputDir(out):  # another run holds the folder
        assert_one_line_error(capsys, main(args_for(corpus, out, steps=2)), "another training run")
    assert not (out / ".lock").exists()  # released on exit
    (out / ".lock").write_text("999999999\n")  # left by a killed run: nobody holds it
    assert main(args_for(corpus, out, steps=2)) == 0
    assert "stale lock" in capsys.readouterr().err and not (out / ".lock").exists()


# --- numerical faults ---------------------------------------------------------------------------

@pytest.fixture
def nan_from_call(monkeypatch):
    """The model's loss becomes NaN from its Nth forward call on."""
    def install(first_bad_call):
        forward, calls = Pretrainer.forward, []

        def poisoned(self, batch):
            loss, metrics = forward(self, batch)
            if not self.training:  # evaluation
                return loss, metrics
            calls.append(1)
            return (loss * float("nan"), metrics) if len(calls) >= first_bad_call else (loss, metrics)

        monkeypatch.setattr(Pretrainer, "forward", poisoned)
    return install


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(corpus, tmp_path, capsys, nan_from_call):
    nan_from_call(5)  # training calls 1-4 fine (eval calls do not count as training)
    out = tmp_path / "out"
    assert_one_line_error(capsys, main(args_for(corpus, out, steps=6)), "at step 5")
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-00000002", "step-00000004"]
    assert (out / "checkpoints" / "latest").read_text() == "step-00000004"


def test_the_nan_message_s_way_on_works(corpus, tmp_path, capsys, nan_from_call):
    """The error names --resume --skip-nonfinite, and --resume takes it: the run goes on from the
    last good checkpoint, skipping the faulty steps (a changed --lr would be refused)."""
    nan_from_call(5)
    out = tmp_path / "out"
    assert_one_line_error(capsys, main(args_for(corpus, out, steps=6)), "last good checkpoint (step 4). Go on from it "
                                                                     "skipping such steps (--resume --skip-nonfinite)")
    assert main(args_for(corpus, out, "--resume", "--skip-nonfinite", "--log-every", "1", steps=6)) == 0
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 6 and last["skipped_steps"] == 2


def test_skip_nonfinite_skips_and_counts(corpus, tmp_path, nan_from_call):
    nan_from_call(5)
    out = tmp_path / "out"
    assert main(args_for(corpus, out, "--skip-nonfinite", "--log-every", "1", steps=6)) == 0
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 6 and last["skipped_steps"] == 2


# --- the bad-input catalogue -------------------------------------------------------------------

@pytest.fixture(scope="module")
def teacher(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("teacher")
    text, cache = corpus
    assert main(tiny_args("bert", text, cache, out, 2)) == 0
    return out


def bad_data(tmp_path, kind):
    path = tmp_path / f"{kind}.txt"
    path.write_bytes({"empty": b"", "binary": b"some\x00bytes\n", "latin1": "caf\xe9 au lait\n".encode("latin-1")}[kind])
    return path


CATALOGUE = {
    # name: (flags appended to a working tiny command, fragment of the one-line error)
    "missing data": (["--data", "no/such/corpus.txt"], "does not exist"),
    "empty data": (["--data", "{empty}"], "is empty"),
    "binary data": (["--data", "{binary}"], "looks binary"),
    "non-UTF-8 data": (["--data", "{latin1}"], "not valid UTF-8"),
    "unknown variant": (["--variant", "gpt"], "invalid choice: 'gpt'"),
    "malformed flag value": (["--steps", "ten"], "invalid int value: 'ten'"),
    "malformed float": (["--lr", "fast"], "invalid float value: 'fast'"),
    "unknown flag": (["--hidden", "64"], "unrecognized arguments"),
    "hidden not divisible by heads": (["--hidden-size", "30", "--num-heads", "4"], "--hidden-size (30) must be divisible by num_heads"),
    "sequence beyond positions": (["--seq-len", "64", "--max-positions", "32"], "--seq-len 64 exceeds"),
    "zero embedding size": (["--embedding-size", "0"], "--embedding-size must be a positive integer"),
    "segment pairs without segment types": (["--variant", "roberta", "--nsp"], "--type-vocab-size 2"),
    "zero steps": (["--steps", "0"], "--steps must be a positive integer"),
    "negative steps": (["--steps", "-3"], "--steps must be a positive integer"),
    "batch not divisible by accumulation": (["--batch-size", "8", "--grad-accum", "3"], "multiple of 3"),
    "no teacher": (["--variant", "distilbert"], "python train.py --variant bert --out checkpoints/bert"),
    "missing teacher": (["--variant", "distilbert", "--teacher", "no/such/teacher"], "--teacher no/such/teacher"),
    "teacher of unknown type": (["--variant", "distilbert", "--teacher", "{gpt2}"], "'gpt2' is not supported"),
    "teacher with missing tensors": (["--variant", "distilbert", "--teacher", "{hollow}"], "lacks tensor"),
    "teacher vocabulary mismatch": (["--variant", "distilbert", "--teacher", "{mismatch}"], "tokens but its model"),
}


def make_teachers(tmp_path, teacher):
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))
    save_file({"wte.weight": torch.zeros(4, 2)}, gpt2 / "model.safetensors")
    hollow = tmp_path / "hollow"  # a Hugging Face BERT directory whose weights lack most tensors
    hollow.mkdir()
    (hollow / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 30, "hidden_size": 8,
                                                     "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
                                                     "max_position_embeddings": 40, "type_vocab_size": 2, "hidden_act": "gelu"}))
    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(30, 8), "cls.predictions.bias": torch.zeros(30)},
              hollow / "model.safetensors")
    (hollow / "vocab.txt").write_text("\n".join(f"w{i}" for i in range(30)))
    mismatch = tmp_path / "mismatch"
    mismatch.mkdir()
    for name in ("config.json", "model.safetensors"):
        (mismatch / name).write_bytes((teacher / name).read_bytes())
    (mismatch / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(20)]))
    return {"gpt2": gpt2, "hollow": hollow, "mismatch": mismatch}


@pytest.mark.parametrize("case", CATALOGUE)
def test_bad_input_is_one_line_and_exit_status_2(case, corpus, teacher, tmp_path, capsys):
    flags, fragment = CATALOGUE[case]
    paths = {**{kind: bad_data(tmp_path, kind) for kind in ("empty", "binary", "latin1")}, **make_teachers(tmp_path, teacher)}
    flags = [f.format(**paths) for f in flags]
    code = main(args_for(corpus, tmp_path / "out") + flags)
    assert_one_line_error(capsys, code, fragment)


def test_a_corrupted_checkpoint_is_reported_and_resume_falls_back(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(args_for(corpus, out, steps=4)) == 0
    newest = out / "checkpoints" / "step-00000004" / "tensors.safetensors"
    newest.write_bytes(newest.read_bytes()[:-100])  # truncated
    assert main(args_for(corpus, out, "--resume", steps=4)) == 0
    err = capsys.readouterr().err
    assert "step-00000004 is corrupted" in err and "resuming from the newest intact checkpoint, step-00000002" in err
    for path in (out / "checkpoints").glob("step-*/tensors.safetensors"):
        path.write_bytes(b"garbage")
    assert_one_line_error(capsys, main(args_for(corpus, out, "--resume", steps=4)), "no intact checkpoint")


@pytest.mark.slow
def test_a_real_process_exits_2_without_traceback_and_debug_shows_it(corpus, tmp_path):
    for flags in (["--steps", "0"], ["--hidden-size", "30", "--num-heads", "4"]):
        result = run_cli(args_for(corpus, tmp_path / "out") + flags)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    result = run_cli(args_for(corpus, tmp_path / "out") + ["--steps", "0", "--debug"])
    assert "Traceback" in result.stderr


# Workers for a tiny corpus, one document per chunk, each held at work (and saying so) until the
# test presses Ctrl-C: the moment a user would, in the middle of a long corpus build.
HELD_WORKERS = """
import os, sys, time
from minibert.corpus import storage
in_workers, tokenize, busy = storage.in_workers, storage._tokenize_chunk, sys.argv.pop(1)
storage.CHUNK_CHARACTERS = 1
storage.in_workers = lambda function, job, items, workers: in_workers(function, job, items, 2)
def held(tokenizer, chunk):
    open(os.path.join(busy, str(os.getpid())), "w").close()
    time.sleep(60)
    return tokenize(tokenizer, chunk)
storage._tokenize_chunk = held
from minibert.runs.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the workers are forked, so the held tokenizer reaches them")
def test_ctrl_c_during_a_corpus_build_is_one_true_line(tmp_path):
    """Ctrl-C while the corpus is tokenized in worker processes: the one line, no worker's
    traceback, and its advice is the same command (nothing was trained to --resume); nothing
    half-built is left in the cache."""
    corpus, cache, busy = write_corpus(tmp_path / "animals.txt"), tmp_path / "cache", tmp_path / "busy"
    busy.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", HELD_WORKERS, str(busy), *tiny_args("albert", corpus, cache, tmp_path / "out")],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # its own process group, as a terminal's command is
    deadline = time.time() + 120
    while len(list(busy.iterdir())) < 2 and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()[1]  # still building, its workers at work
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: every process of the group gets it
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in err
    assert err.splitlines() == ["train.py: interrupted before the run saved a checkpoint; run the same command again"]
    assert not [p.name for p in cache.iterdir() if not p.name.startswith("spm-")]  # the vocabulary alone is whole


def test_ctrl_c_after_a_checkpoint_says_resume(corpus, tmp_path, monkeypatch, capsys):
    """Once the run has saved a checkpoint, the line after Ctrl-C says --resume."""
    write = MetricsLog.write

    def pressed_at_step_5(log, record):
        if record["step"] >= 5:  # checkpoints at steps 2 and 4 are saved
            raise KeyboardInterrupt
        write(log, record)

    monkeypatch.setattr(MetricsLog, "write", pressed_at_step_5)
    out = tmp_path / "out"
    assert main(args_for(corpus, out)) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "train.py: interrupted; continue with the same command plus --resume"
