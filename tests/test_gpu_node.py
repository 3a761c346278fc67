"""The GPU-node run (docs/scale.md): the schedules and LAMB, --compile and
--checkpoint-activations (same losses and gradients), no needless host reads in the loop,
TensorBoard, and the recipes with their plans."""

from __future__ import annotations

import importlib.machinery
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from minibert.attention import Sequences
from minibert.config import ModelConfig
from minibert.heads import IGNORE_INDEX, MaskedLM
from minibert.operations.distributed import Distributed
from minibert.operations.precision import Precision
from minibert.runs.cli import main
from minibert.training.lamb import Lamb
from minibert.runs.levers import use_levers
from minibert.training.loop import Progress, learning_rate, train
from minibert.training.settings import LoopSettings
from minibert.training.optimizer import build_optimizer
from minibert.runs.metrics import MetricsLog
from tiny_run import REPO, tiny_args, write_corpus

RECIPES = sorted((REPO / "recipes").glob("*.txt"))
TINY = ModelConfig(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32, max_positions=16,
                   hidden_dropout=0.0, attention_dropout=0.0)


# --- schedules and optimizers -------------------------------------------------------------------

def lrs(schedule, steps=100, **options):
    return [learning_rate(s, steps, peak=1.0, warmup=0.1, schedule=schedule, **options) for s in range(steps + 1)]


def test_each_schedule_warms_up_then_falls_to_its_floor():
    linear, cosine, wsd = lrs("linear"), lrs("cosine"), lrs("wsd", wsd_decay=0.2)
    for curve in (linear, cosine, wsd):
        assert curve[:10] == pytest.approx([(s + 1) / 10 for s in range(10)]) and curve[10] == pytest.approx(1.0)
        assert all(a >= b - 1e-12 for a, b in zip(curve[10:], curve[11:])) and curve[-1] == 0.0
    assert linear[55] == pytest.approx(0.5) and cosine[55] == pytest.approx(0.5)  # both halfway at the middle
    assert cosine[20] > linear[20] and cosine[90] < linear[90]  # slow, fast, slow
    assert wsd[10:80] == [1.0] * 70 and wsd[90] == pytest.approx(0.5)  # stable, then the last 20% decays
    floored = lrs("cosine", min_lr=0.1)
    assert floored[-1] == pytest.approx(0.1) and min(floored[10:]) == pytest.approx(0.1)


def test_lamb_follows_its_paper_s_update_rule():
    torch.manual_seed(0)
    x, g = torch.randn(4, 3), torch.randn(4, 3)
    parameter = nn.Parameter(x.clone())
    optimizer = Lamb([parameter], lr=0.1, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01)
    parameter.grad = g.clone()
    optimizer.step()
    m, v = 0.1 * g, 0.01 * g * g  # first step: (1 - β) g, (1 - β2) g²
    r = (m / 0.1) / ((v / 0.01).sqrt() + 1e-6)  # bias-corrected
    u = r + 0.01 * x
    assert torch.allclose(parameter.detach(), x - 0.1 * (x.norm() / u.norm()) * u, atol=1e-6)
    zero = nn.Parameter(torch.zeros(3))  # a zero weight: trust ratio 1
    zero.grad = torch.ones(3)
    Lamb([zero], lr=0.1, eps=0.0).step()
    assert torch.allclose(zero.detach(), torch.full((3,), -0.1))


def test_optimizer_flags_reach_the_optimizer():
    model = nn.Linear(3, 3)
    adamw = build_optimizer(model, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.98), eps=1e-8)
    assert isinstance(adamw, torch.optim.AdamW) and adamw.defaults["betas"] == (0.9, 0.98) and adamw.defaults["eps"] == 1e-8
    assert isinstance(build_optimizer(model, lr=1e-3, weight_decay=0.1, optimizer="lamb"), Lamb)


# --- the levers: same losses and gradients --------------------------------------------------------

def tiny_batch(seed=0, length=12):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50, (4, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length - 3:] = 0
    labels = torch.where(torch.rand(ids.shape, generator=generator) < 0.3, ids, IGNORE_INDEX)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def loss_and_grads(model, batch):
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_checkpointed_activations_give_the_same_losses_and_gradients():
    torch.manual_seed(0)
    plain = MaskedLM(TINY.replace(hidden_dropout=0.1))  # dropout too: the recomputation replays its masks
    checkpointed = MaskedLM(TINY.replace(hidden_dropout=0.1))
    checkpointed.load_state_dict(plain.state_dict())
    use_levers(checkpointed, checkpoint_activations=True)
    for seed in range(2):
        torch.manual_seed(seed)
        loss, grads = loss_and_grads(plain, tiny_batch(seed))
        torch.manual_seed(seed)
        loss_c, grads_c = loss_and_grads(checkpointed, tiny_batch(seed))
        assert torch.equal(loss, loss_c) and len(grads) == len(grads_c) and all(torch.allclose(a, b, atol=1e-7) for a, b in zip(grads, grads_c))


@pytest.mark.slow  # compiling takes 20-80 s on a busy 2-core CPU
def test_compiled_layers_give_the_same_losses_without_graph_breaks_and_few_compiles():
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    config = TINY.replace(num_layers=1)
    plain, compiled = MaskedLM(config), MaskedLM(config)
    compiled.load_state_dict(plain.state_dict())
    use_levers(compiled, compile=True)
    sublayer = compiled.encoder.attention[0]
    x = torch.randn(4, 12, 16)
    explained = dynamo.explain(sublayer._orig_mod if hasattr(sublayer, "_orig_mod") else sublayer.forward)(x, Sequences())
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (plain, compiled)]
    for step, length in enumerate((12, 9, 12, 7)):  # batches cut to their longest: lengths vary
        losses = []
        for model, optimizer in zip((plain, compiled), optimizers):
            loss, _ = loss_and_grads(model, tiny_batch(step, length))
            optimizer.step()
            losses.append(loss)
        assert torch.allclose(losses[0], losses[1], rtol=1e-5, atol=1e-6), (step, losses)
    frames = counters["stats"]["unique_graphs"]
    assert frames <= 4, f"{frames} graphs compiled for 4 steps of 3 lengths"  # dynamic shapes: not one per length


# --- host reads -------------------------------------------------------------------------------------

class OnHost(torch.Tensor):
    """A batch tensor before the copy to the device; the copy (`.to`) gives a plain tensor, which
    stands for one on the device (this test runs on the CPU)."""

    def to(self, *args, **kwargs):
        return super().to(*args, **kwargs).as_subclass(torch.Tensor)


class TinyObjective(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = MaskedLM(TINY)

    def forward(self, batch):
        loss = self.model(**batch).loss
        return loss, {"mlm_loss": loss.detach()}


def loop_reads(monkeypatch, tmp_path, steps: int, **settings) -> int:
    """How many times train/train_step (loop.py's own lines) read a device tensor back in `steps` steps."""
    reads = []
    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__"):
        original = getattr(torch.Tensor, name)

        def counting(self, *args, _original=original, _name=name):
            if type(self) is torch.Tensor and sys._getframe(1).f_code.co_filename.endswith(str(Path("training", "loop.py"))):
                reads.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counting)
    torch.manual_seed(0)
    module = TinyObjective()
    batches = ({k: v.as_subclass(OnHost) for k, v in tiny_batch(i).items()} for i in range(steps))
    loop = LoopSettings(steps=steps, lr=1e-3, warmup=0.1, weight_decay=0.01, clip=1.0, seed=0,
                        log_every=1000, eval_every=1000, save_every=1000, **settings)
    cpu = torch.device("cpu")
    train(module, build_optimizer(module, lr=1e-3, weight_decay=0.01), [batches], None, loop, Progress(),
          dist=Distributed(), device=cpu, amp=Precision.of("fp32", cpu), log=MetricsLog(tmp_path / "metrics.jsonl"))
    return len(reads)


def test_the_loop_reads_the_device_only_at_its_logging_step(monkeypatch, tmp_path):
    # 6 steps, the last the only logging step: its NaN/Inf flags and its means, one read each
    assert loop_reads(monkeypatch, tmp_path, 6) <= 2
    # --skip-nonfinite decides before each update: one read a step, and the logging step's two
    assert loop_reads(monkeypatch, tmp_path, 6, skip_nonfinite=True) <= 6 + 2


# --- TensorBoard, recipes, plans ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


def test_tensorboard_gets_every_metrics_record(corpus, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    text, cache = corpus
    out = tmp_path / "out"
    assert main(tiny_args("albert", text, cache, out, 6, "--report-to", "tensorboard", "--log-every", "2",
                          "--eval-every", "3")) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(out / "tensorboard")).Reload()
    for name in ("loss", "lr", "eval_mlm_accuracy", "tokens_per_s"):
        logged = {r["step"]: r[name] for r in records if name in r}
        assert logged and {e.step: e.value for e in events.Scalars(name)} == pytest.approx(logged, rel=1e-6), name


@pytest.mark.parametrize("installed", ["none", "too old"])
def test_tensorboard_missing_is_one_line_before_out(installed, corpus, tmp_path, monkeypatch, capsys):
    """Without a TensorBoard torch can use, --report-to tensorboard names the extra to install,
    before the data is built or OUT is claimed."""
    old = type(sys)("tensorboard")  # found, but without __version__: torch's writer refuses it
    old.__spec__ = importlib.machinery.ModuleSpec("tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard", None if installed == "none" else old)
    monkeypatch.delitem(sys.modules, "torch.utils.tensorboard", raising=False)  # imported afresh
    text, cache = corpus
    out = tmp_path / "out"
    assert main(tiny_args("albert", text, cache, out, 2, "--report-to", "tensorboard")) == 2
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].endswith("pip install 'minibert[tensorboard]'") and not out.exists()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.stem)
def test_each_recipe_s_plan_parses_and_prints_without_touching_out(recipe, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([f"@{recipe}", "--plan", "--plan-for", "h100", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "training FLOPs:" in printed and "wall time on one H100 SXM:" in printed and not out.exists()
    if recipe.stem == "electra-small":  # ELECTRA's Table 1: 1.4e18
        flops = float(printed.split("training FLOPs: ")[1].split()[0])
        assert abs(flops / 1.4e18 - 1) < 0.35


def test_a_recipe_runs_a_few_steps_at_a_tiny_size(corpus, tmp_path):
    text, cache = corpus
    out = tmp_path / "out"
    shrink = ["--hidden-size", "32", "--num-heads", "2", "--intermediate-size", "64", "--num-layers", "2",
              "--embedding-size", "16", "--vocab-size", "400", "--seq-len", "32", "--batch-size", "8", "--steps", "3",
              "--stop-at", "2", "--threads", "1", "--eval-batches", "1"]
    assert main(["@" + str(REPO / "recipes" / "electra-small.txt"), "--data", str(text), "--cache-dir", str(cache),
                 "--out", str(out), *shrink]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 2 and math.isfinite(records[-1]["loss"])  # stopped at --stop-at


def test_bad_levers_and_schedules_are_one_line(capsys):
    for flags, fragment in ((["--min-lr", "1"], "--min-lr 1 must be between 0 and the peak --lr"),
                            (["--adam-betas", "0.9", "1.5"], "--adam-betas takes two numbers in [0, 1)"),
                            (["--stop-at", "5000"], "--stop-at 5000 must fall inside the run's --steps"),
                            (["--schedule", "step"], "invalid choice: 'step'"),
                            (["@no/such/recipe.txt"], "No such file")):
        assert main([*flags, "--plan"]) == 2
        assert fragment in capsys.readouterr().err
