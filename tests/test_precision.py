"""--precision (autocast formats and fp16 loss scaling) and --device mps, on a CPU-only machine.

fp16 needs a CUDA GPU in a real run, but torch's GradScaler also works on CPU tensors, so the
training step's handling of scaled gradients (unscale before clipping, an overflow skipped by the
scaler and not reported as a NaN fault) is tested here with a Precision built directly.
"""

import json

import pytest
import torch

from minibert.runs.cli import main
from minibert.operations.distributed import Distributed
from minibert.training.loop import Logbook, NonFiniteLoss, NonfiniteCheck, Progress, train_step
from minibert.operations.precision import Precision, resolve
from minibert.training.settings import Settings
from tiny_run import tiny_args, write_corpus

CPU = torch.device("cpu")
MPS_MISSING = not torch.backends.mps.is_available()


# --- choosing the format ------------------------------------------------------------------------


def test_auto_is_fp32_on_the_cpu_and_bf16_or_fp32_on_cuda(monkeypatch):
    assert resolve("auto", CPU) == "fp32" and resolve("bf16", CPU) == "bf16" and resolve("fp32", CPU) == "fp32"
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve("auto", cuda) == "bf16" and resolve("fp16", cuda) == "fp16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    assert resolve("auto", cuda) == "fp32"
    with pytest.raises(ValueError, match="Tesla T4.*use --precision fp16"):
        resolve("bf16", cuda)


def test_fp16_off_cuda_and_unknown_names_name_the_fix():
    with pytest.raises(ValueError, match="needs a CUDA GPU.*use --precision bf16 or fp32"):
        resolve("fp16", CPU)
    with pytest.raises(ValueError, match="must be one of auto, bf16, fp16, fp32"):
        resolve("fp8", CPU)


def test_autocast_dtype_and_scaler_per_format():
    x = torch.randn(2, 4)
    layer = torch.nn.Linear(4, 4)
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        amp = Precision.of(name, CPU)
        for _ in range(2):  # one context per run, entered at every step
            with amp.autocast:
                assert layer(x).dtype == dtype
        assert not amp.scales and not amp.scaler.is_enabled()
    assert Precision("fp16", CPU).scales  # built directly: resolve() refuses fp16 on a CPU


# --- the training step with loss scaling --------------------------------------------------------


class Toy(torch.nn.Module):
    """A Pretrainer's interface: batch -> (loss, metrics); the loss is w . x."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, batch):
        return (self.w * batch["x"]).sum(), {}


def step(amp, x, clip=1.0, skip_nonfinite=False):
    """One train_step of a Toy on input `x`, the run's step 7 next: (its metrics, the weights after it,
    its NaN/Inf check)."""
    model = Toy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    settings, dist = Settings(clip=clip, skip_nonfinite=skip_nonfinite), Distributed()
    nonfinite = NonfiniteCheck(Progress(step=6), settings, dist, amp, resumable=False)
    batch = {"x": x, "attention_mask": torch.ones(1, 4)}
    metrics = train_step(model, optimizer, [iter([batch])], 0.1, settings, dist, amp, nonfinite)
    return metrics, model.w.detach(), nonfinite


def test_fp16_gradients_are_unscaled_before_clipping():
    amp = Precision("fp16", CPU)
    metrics, w, _ = step(amp, torch.tensor([3.0, 4.0, 0.0, 0.0]))  # gradient norm 5, scaled by 65536
    assert float(metrics["grad_norm"]) == pytest.approx(5.0)  # the true norm, not 5 * scale
    torch.testing.assert_close(w, torch.tensor([1 - 0.1 * 0.6, 1 - 0.1 * 0.8, 1.0, 1.0]))  # clipped to norm 1
    assert float(metrics["loss_scale"]) == 65536.0


def test_fp16_overflow_is_skipped_by_the_scaler_not_reported_as_nan():
    amp = Precision("fp16", CPU)
    overflowed, w, _ = step(amp, torch.tensor([1e35, 0.0, 0.0, 0.0]))  # finite loss, scaled gradient overflows
    assert overflowed == {}  # the step goes on (not a NaN fault), with nothing to average into the log
    assert torch.equal(w, torch.ones(4))  # no update
    assert amp.scaler.get_scale() == 32768.0  # the scaler backed off


def test_the_fp16_loss_scale_is_saved_with_a_checkpoint_and_restored(tmp_path):
    """A resumed fp16 run continues with the loss scale it had found, not the initial 65536."""
    from minibert.operations.checkpoint import Checkpoints
    from minibert.operations.state import rng_state
    from minibert.runs.resume import restore, training_state

    amp = Precision("fp16", CPU)  # built directly: resolve() refuses fp16 on a CPU
    for _ in range(2):  # two overflows: 65536 -> 32768 -> 16384
        step(amp, torch.tensor([1e35, 0.0, 0.0, 0.0]))
    model = Toy()
    state = training_state(Progress(step=2), model, torch.optim.SGD(model.parameters(), lr=0.1), amp,
                           ranks=[{"rng": rng_state(), "data": []}])
    Checkpoints(tmp_path).save(2, state)
    saved, _ = Checkpoints(tmp_path).load()
    resumed = Precision("fp16", CPU)
    assert resumed.scaler.get_scale() == 65536.0
    fresh = Toy()
    restore(saved, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1), resumed, shards=[], dist=Distributed())
    assert resumed.scaler.get_scale() == amp.scaler.get_scale() == 16384.0
    assert resumed.scaler.state_dict() == amp.scaler.state_dict()
    fp32 = Precision.of("fp32", CPU)  # other formats save no scaler state, and resume as before
    assert training_state(Progress(), model, torch.optim.SGD(model.parameters(), lr=0.1), fp32, [])["scaler"] == {}


def test_a_nonfinite_loss_is_a_fault_in_every_format():
    """fp16 decides at once (the scaler must, before its update); fp32 keeps the step's NaN/Inf
    flags on the device, and the next look names the step (`train` looks before any record or
    checkpoint: tests/test_training.py, tests/test_reliability.py)."""
    with pytest.raises(NonFiniteLoss, match="at step 7"):  # at once, before the update
        step(Precision("fp16", CPU), torch.tensor([float("inf"), 0.0, 0.0, 0.0]))
    faulty, w, nonfinite = step(Precision("fp16", CPU), torch.tensor([float("inf"), 0.0, 0.0, 0.0]), skip_nonfinite=True)
    assert faulty is None and torch.equal(w, torch.ones(4))  # skipped: no update, and counted
    assert nonfinite.progress.skipped_steps == 1
    for x, clip in ((torch.tensor([float("inf"), 0.0, 0.0, 0.0]), 1.0),
                    (torch.tensor([1e35, 1e35, 0.0, 0.0]), 0)):  # an infinite loss; an infinite gradient norm
        metrics, _, nonfinite = step(Precision.of("fp32", CPU), x, clip=clip)
        assert metrics is not None  # the update was taken: nothing was read back
        nonfinite.progress.step = 7  # the loop counts the step taken
        with pytest.raises(NonFiniteLoss, match="at step 7"):
            nonfinite.stop_if_any()
    _, _, nonfinite = step(Precision.of("fp32", CPU), torch.tensor([1.0, 2.0, 0.0, 0.0]))
    nonfinite.progress.step = 7
    nonfinite.stop_if_any()
    assert nonfinite.kept == []


def test_the_logbook_averages_the_steps_that_log_and_counts_every_token(tmp_path):
    """Skipped steps (None) and fp16 overflows ({}) add nothing to the means; every batch read adds its tokens."""
    from minibert.runs.metrics import MetricsLog

    logbook = Logbook(MetricsLog(tmp_path / "metrics.jsonl"), Distributed(), evaluation=None)
    for mask in (torch.ones(2, 3), torch.tensor([[1, 1, 0]])):
        logbook.count_tokens({"attention_mask": mask})
    for metrics in ({"loss": torch.tensor(1.0)}, None, {}, {"loss": torch.tensor(3.0)}):
        logbook.add(metrics)
    assert logbook.tokens == 8 and logbook.means()["loss"] == 2.0
    assert "loss" not in logbook.means() and logbook.tokens == 0  # each record starts the next one afresh


# --- the command line ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


@pytest.mark.parametrize("fmt", ["bf16", "fp32"])
def test_pretraining_runs_in_bf16_and_fp32_on_the_cpu(fmt, corpus, tmp_path):
    out = tmp_path / fmt
    assert main(tiny_args("electra", *corpus, out, 10, "--precision", fmt, "--lr", "3e-3")) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "loss" in r]
    assert trained[-1]["step"] == 10 and all(torch.isfinite(torch.tensor(r["loss"])) for r in trained)
    assert json.loads((out / "run.json").read_text())["settings"]["precision"] == fmt


def test_a_run_from_before_precision_existed_resumes_as_auto(tmp_path):
    from minibert.runs.resume import check_same_run

    record = {"settings": Settings().to_dict(), "config": {}}
    older = {"settings": {k: v for k, v in record["settings"].items() if k != "precision"}, "config": {}}
    (tmp_path / "run.json").write_text(json.dumps(older))
    check_same_run(tmp_path / "run.json", record)
    with pytest.raises(ValueError, match="--precision 'auto' -> 'bf16'"):
        check_same_run(tmp_path / "run.json", {**record, "settings": Settings(precision="bf16").to_dict()})


@pytest.mark.parametrize("flags, needle", [
    (["--precision", "fp16"], "--precision fp16 needs a CUDA GPU"),
    (["--device", "mps"], "--device mps was asked for but"),
])
def test_a_device_or_format_this_machine_lacks_is_one_line(flags, needle, corpus, tmp_path, capsys):
    if flags[0] == "--device" and not MPS_MISSING:
        pytest.skip("this machine has MPS")
    assert main(tiny_args("bert", *corpus, tmp_path / "out", 2, "--device", "cpu", *flags)) == 2
    error = capsys.readouterr().err.strip()
    assert needle in error and "use --" in error and "\n" not in error


@pytest.mark.skipif(not MPS_MISSING, reason="this machine has MPS")
def test_finetune_on_a_missing_mps_is_one_line(tmp_path, capsys):
    from minibert.finetune import main as finetune

    assert finetune(["--init", "x", "--train", "x", "--dev", "x", "--out", str(tmp_path), "--device", "mps"]) == 2
    error = capsys.readouterr().err
    assert "--device mps was asked for but" in error and "use --device cpu" in error and error.count("\n") == 1


@pytest.mark.skipif(MPS_MISSING, reason="no MPS (Apple GPU) here")
def test_mps_trains_where_torch_has_it(corpus, tmp_path):
    assert main(tiny_args("bert", *corpus, tmp_path / "out", 4, "--device", "mps")) == 0


def test_help_lists_the_precisions(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--precision {auto,bf16,fp16,fp32}" in text and "{auto,cpu,cuda,mps}" in text
