"""The training loop and what surrounds it: schedule, optimizer groups, state without pickle,
checkpoints, and an end-to-end run of every variant whose loss falls."""

import json
import random
import re
import shutil

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import minibert
from minibert import MaskedLM, ModelConfig
from minibert.operations.checkpoint import Checkpoints
from minibert.runs.cli import main, parse
from minibert.operations.errors import TrainingError
from minibert.runs.report import BehindWarning
from minibert.runs.metrics import MetricsLog
from minibert.training.loop import learning_rate
from minibert.training.optimizer import build_optimizer
from minibert.training.settings import Settings
from minibert.operations.state import decode, encode, rng_state, set_rng_state
from minibert.variants import VARIANTS
from safetensors.torch import load_file
from tiny_run import tiny_args, write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


# --- schedule and optimizer ------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(steps=st.integers(1, 500), warmup=st.floats(0.0, 1.0))
def test_schedule_warms_up_linearly_then_decays_to_zero(steps, warmup):
    lrs = [learning_rate(step, steps, peak=1.0, warmup=warmup) for step in range(steps + 1)]
    peak = max(range(steps + 1), key=lambda i: lrs[i])
    assert all(a <= b + 1e-12 for a, b in zip(lrs[:peak], lrs[1:peak + 1]))  # rises
    assert all(a >= b - 1e-12 for a, b in zip(lrs[peak:], lrs[peak + 1:]))  # then falls
    assert max(lrs) <= 1.0 + 1e-12 and lrs[-1] == 0.0 and lrs[0] > 0


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("90", 90), ("5m", 300), ("2.5m", 150), ("1h30m", 5400), ("1H", 3600)])
def test_budget_durations(text, seconds):
    assert Settings(budget=text).budget_seconds == seconds


@pytest.mark.parametrize("text", ["", "m", "5x", "0s", "-1m", "5m3h"])
def test_a_bad_budget_is_refused_with_the_expected_spelling(text):
    with pytest.raises(ValueError, match="write it like 90s, 5m or 1h30m"):
        Settings(budget=text).check()


def test_plateau_warning_fires_once_late_in_the_run_and_only_at_the_plateau(capsys):
    warning = BehindWarning({"baseline_unigram_accuracy": 0.06, "baseline_neighbour_accuracy": 0.22})
    warning.check({"step": 100, "eval_mlm_accuracy": 0.06}, fraction=0.3)  # early: too soon to tell
    warning.check({"step": 200, "eval_mlm_accuracy": 0.20}, fraction=0.6)  # left the plateau
    assert capsys.readouterr().err == ""
    warning.check({"step": 300, "eval_mlm_accuracy": 0.07}, fraction=0.7)
    warning.check({"step": 400, "eval_mlm_accuracy": 0.07}, fraction=0.8)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "unigram plateau" in err and "0.070" in err and "0.060" in err


def test_no_weight_decay_on_biases_and_layernorm():
    model = MaskedLM(ModelConfig(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32))
    decay, no_decay = build_optimizer(model, lr=1e-3, weight_decay=0.1).param_groups
    norms = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)}
    biases = {id(p) for n, p in model.named_parameters() if n.endswith("bias")}
    assert {id(p) for p in no_decay["params"]} == norms | biases and no_decay["weight_decay"] == 0.0
    assert decay["weight_decay"] == 0.1 and id(model.embedding_table) in {id(p) for p in decay["params"]}


def test_lr_factors_scale_the_schedules_lr_at_each_update_without_compounding():
    """Fine-tuning's layer-wise factors are the optimizer's (a hook before each update): the loop
    sets every group to the schedule's lr, and each update runs at that times the group's factor."""
    model = torch.nn.Linear(2, 2)
    optimizer = build_optimizer(model, lr=1.0, weight_decay=0.0, lr_scales={"weight": 0.5, "bias": 0.25})
    for lr in (1.0, 1.0, 0.1):
        for group in optimizer.param_groups:
            group["lr"] = lr  # what train_step does
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        assert sorted(group["lr"] for group in optimizer.param_groups if group["params"]) == [0.25 * lr, 0.5 * lr]


# --- state without pickle ------------------------------------------------------------------

def test_state_round_trips_through_json_and_tensors():
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(2))])
    for p in opt.param_groups[0]["params"]:
        p.grad = torch.randn_like(p)
    opt.step()
    value = {"optimizer": opt.state_dict(), "tuple": (1, 2.5, "x"), "array": np.arange(4, dtype=np.uint32), "none": None}
    tensors = {}
    back = decode(json.loads(json.dumps(encode(value, tensors))), tensors)
    assert back["tuple"] == (1, 2.5, "x") and back["array"].dtype == np.uint32 and back["none"] is None
    assert set(back["optimizer"]["state"]) == {0, 1}
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    with pytest.raises(TypeError, match="pickle"):
        encode({"f": lambda: 0}, {})


def test_rng_state_replays_every_generator():
    saved_tensors = {}
    saved = json.loads(json.dumps(encode(rng_state(), saved_tensors)))
    first = (random.random(), np.random.rand(), torch.rand(3))
    set_rng_state(decode(saved, saved_tensors))
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert first[:2] == again[:2] and torch.equal(first[2], again[2])


# --- checkpoints --------------------------------------------------------------------------

def test_checkpoints_keep_the_last_k_and_point_at_the_newest(tmp_path):
    checkpoints = Checkpoints(tmp_path, keep=2)
    for step in (1, 2, 3):
        checkpoints.save(step, {"step": step, "w": torch.full((2,), float(step))})
    assert [p.name for p in checkpoints.steps()] == ["step-00000003", "step-00000002"]
    assert (tmp_path / "latest").read_text() == "step-00000003"
    state, path = checkpoints.load()
    assert state["step"] == 3 and torch.equal(state["w"], torch.full((2,), 3.0))


def test_a_corrupted_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, capsys):
    checkpoints = Checkpoints(tmp_path, keep=3)
    for step in (1, 2):
        checkpoints.save(step, {"step": step, "w": torch.zeros(64)})
    tensors = tmp_path / "step-00000002" / "tensors.safetensors"
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit of one weight
    tensors.write_bytes(bytes(data))
    state, path = checkpoints.load()
    assert state["step"] == 1 and "corrupted" in capsys.readouterr().err
    (tmp_path / "step-00000001" / "state.json").write_text("{")  # truncated
    with pytest.raises(TrainingError, match="no intact checkpoint"):
        checkpoints.load()


def test_metrics_log_drops_lines_after_the_resumed_step(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step in (5, 10, 15):
        log.write({"step": step, "loss": 1.0})
    with open(log.path, "a") as f:
        f.write('{"step": 2')  # cut short by a crash
    log.keep_until(10)
    assert [json.loads(line)["step"] for line in log.path.read_text().splitlines()] == [5, 10]


# --- the command line -------------------------------------------------------------------------

def test_cli_maps_flags_onto_settings_and_model_overrides():
    settings_, overrides, run = parse(["--variant", "bert", "--no-nsp", "--hidden-size", "64", "--embedding-size", "none",
                                       "--no-pooler", "--replace-probs", "0.85", "0", "0.15", "--resume"])
    assert settings_.variant == "bert" and settings_.layout == "full_sentences" and settings_.masking == "static"
    assert overrides == {"hidden_size": 64, "embedding_size": None, "pooler": False}
    assert settings_.replace_probs == [0.85, 0.0, 0.15] and run["resume"]
    assert parse([])[0].variant == "albert"


def test_help_documents_every_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for field in ("--hidden-size", "--share-layers", "--layout", "--teacher", "--rtd-weight", "--kd-temperature",
                  "--grad-accum", "--save-every", "--resume", "--nsp", "--sop", "--masking"):
        assert field in text
    assert re.search(r"default:\s+full_sentences;\s+bert:\s+nsp,\s+albert:\s+sop", text)  # per-variant defaults


# --- end to end ---------------------------------------------------------------------------

def test_a_budget_run_ends_at_its_deadline_and_resume_keeps_the_remaining_budget(corpus, tmp_path):
    """--budget: the schedule decays to ~0 at the deadline; a run resumed from an early
    checkpoint trains only for what was left of the budget, not for a new one."""
    text, cache = corpus
    out = tmp_path / "budget"
    args = tiny_args("roberta", text, cache, out, 1, "--budget", "3s", "--save-every", "5", "--keep", "1000",
                     "--log-every", "1", "--eval-every", "1000", "--lr", "1e-3")
    assert main(args) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    last = records[-1]
    assert 3.0 <= last["elapsed_s"] < 6.0 and last["step"] > 5
    # stretched to end at the deadline: each step's lr is 1e-3 × the share of the 3 s left when
    # it began (the previous step's elapsed time; no warm-up step in 3 s), whatever a step or a save took
    for before, after in zip(records, records[1:]):
        assert after["step"] == before["step"] + 1
        assert after["lr"] == pytest.approx(1e-3 * (3.0 - before["elapsed_s"]) / 3.0, abs=1e-5)
    assert last["lr"] < 0.5 * records[1]["lr"]  # decayed towards 0
    assert [r["elapsed_s"] for r in records] == sorted(r["elapsed_s"] for r in records)

    checkpoints = sorted((out / "checkpoints").glob("step-*"))
    early = checkpoints[0]
    early_elapsed = json.loads((early / "state.json").read_text())["elapsed"]
    for later in checkpoints[1:]:  # as if the run had been killed after its first checkpoint
        shutil.rmtree(later)
    (out / "checkpoints" / "latest").write_text(early.name + "\n")
    assert main(args + ["--resume"]) == 0
    resumed = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert resumed[0]["elapsed_s"] == 0.0 and 3.0 <= resumed[-1]["elapsed_s"] < 6.0
    assert any(r["elapsed_s"] > early_elapsed for r in resumed)


def test_held_out_accuracy_is_logged_beside_both_baselines(corpus, tmp_path):
    records = run_variant("roberta", corpus, tmp_path / "roberta", steps=2)
    first = records[0]
    assert first["step"] == 0
    assert 0.0 < first["baseline_unigram_accuracy"] < first["baseline_neighbour_accuracy"] <= 1.0
    assert all("baseline_unigram_accuracy" not in r for r in records[1:])  # once per run

def run_variant(variant, corpus, out, *extra, steps=30):
    """A 30-step run of a tiny model. BERT's 15% masking: in 30 steps a tiny distilled student
    learns too little at the default 40% for its loss to fall measurably."""
    text, cache = corpus
    assert main(tiny_args(variant, text, cache, out, steps, "--mask-prob", "0.15", *extra)) == 0
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def bert_teacher(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("bert")
    return out, run_variant("bert", corpus, out, "--lr", "3e-3")


@pytest.mark.parametrize("variant", ["bert", "roberta", "albert", "distilbert", "electra"])
def test_every_variant_learns_and_leaves_a_loadable_model(variant, corpus, bert_teacher, tmp_path):
    if variant == "bert":
        out, records = bert_teacher
    else:
        out = tmp_path / variant
        extra = ["--teacher", str(bert_teacher[0])] if variant == "distilbert" else []
        records = run_variant(variant, corpus, out, "--lr", "3e-3", *extra)
    trained = [r for r in records if "loss" in r]
    assert records[0]["step"] == 0 and "eval_mlm_accuracy" in records[0]  # evaluated before training
    assert trained[-1]["step"] == 30 and trained[-1]["loss"] < 0.9 * trained[0]["loss"]
    assert records[-1]["eval_loss"] < records[0]["eval_loss"]  # and held out, from the untrained model at step 0
    assert {"lr", "tokens_per_s", "eval_loss", "eval_mlm_accuracy"} <= set(records[-1])
    head = VARIANTS[variant].head
    model = minibert.from_pretrained(out, head=head)
    assert type(model).__name__ == ("ReplacedTokenDetector" if head == "rtd" else "MaskedLM")
    saved = load_file(out / "checkpoints" / "step-00000030" / "tensors.safetensors")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved[f"state.model.model.{name}"]), name
    assert (out / ("tokenizer.model")).is_file()


def test_a_run_saved_before_the_attention_backend_rename_still_resumes(tmp_path):
    from minibert.config import ModelConfig
    from minibert.runs.resume import check_same_run

    config = ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    record = {"settings": Settings().to_dict(), "config": config.to_dict()}
    older = {**record, "config": {("attention" if k == "attention_backend" else k): v for k, v in config.to_dict().items()}}
    (tmp_path / "run.json").write_text(json.dumps(older))
    check_same_run(tmp_path / "run.json", record)
    with pytest.raises(ValueError, match="--attention-backend 'auto' -> 'naive'"):
        check_same_run(tmp_path / "run.json", {**record, "config": config.replace(attention_backend="naive").to_dict()})


def test_a_run_saved_when_every_variant_held_rtd_weight_50_still_resumes(tmp_path):
    """rtd_weight was 50 for every variant before only electra's entry set it: a run.json of
    then resumes, and electra's own weight still counts."""
    from minibert.config import ModelConfig
    from minibert.runs.resume import check_same_run
    from minibert.variants import VARIANTS

    config = ModelConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    for name in ("albert", "electra"):
        record = {"settings": VARIANTS[name].default_settings().to_dict(), "config": config.to_dict()}
        (tmp_path / "run.json").write_text(json.dumps({**record, "settings": {**record["settings"], "rtd_weight": 50.0}}))
        check_same_run(tmp_path / "run.json", record)
    with pytest.raises(ValueError, match="--rtd-weight 50.0 -> 1.0"):
        check_same_run(tmp_path / "run.json", {**record, "settings": {**record["settings"], "rtd_weight": 1.0}})
