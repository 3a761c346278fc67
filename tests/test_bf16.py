"""bf16 autocast on the CPU: what `--precision auto` chooses and says, and that bf16 is nowhere
silently worse than fp32.

The choice follows the detected CPU feature (operations/precision.py:cpu_bf16), turned on and
off here with monkeypatch: conftest.py hides it from every other test (MINIBERT_CPU_BF16=0), so
that the suite's figures do not depend on the CPU it runs on.

The tolerances: bf16 keeps 8 significant bits (a relative rounding of 2^-9 ≈ 0.2% per
number); the residual stream and every LayerNorm stay fp32 under CPU autocast (the embeddings
are fp32, and fp32 + bf16 is fp32), the losses' softmaxes and reductions run in fp32
(heads.py, objectives/), and so do the optimizer's moments. Measured on these models (weights
drawn at 10x BERT's scale, so that the layers do more than pass their input on): the encoder's
outputs, LayerNorm-scaled to unit variance, differ by at most 0.045 between bf16 and fp32, and
every objective's loss by at most 0.7% (ELECTRA's detection loss, whose replacements are drawn
from the generator's bf16 logits); the bounds below are about 2-3x those.
"""

import json

import pytest
import torch

from minibert import Encoder, ModelConfig, SequenceClassifier
from minibert.heads import SpanExtractor
from minibert.objectives.kd import KnowledgeDistillation, init_student_from_teacher, student_config
from minibert.operations import precision
from minibert.operations.distributed import Distributed
from minibert.operations.precision import Precision, auto_line, find_cpu_bf16, resolve
from minibert.training.loop import NonfiniteCheck, Progress, train_step
from minibert.training.optimizer import build_optimizer
from minibert.training.settings import Settings
from minibert.variants import VARIANTS, build_pretrainer, run_architecture, with_layout
from minibert import MaskedLM
from test_objectives import make_batch

CPU = torch.device("cpu")
BF16 = torch.autocast("cpu", dtype=torch.bfloat16)
ENCODER_ATOL = 0.1  # LayerNorm-scaled outputs (unit variance): measured 0.045 at most
LOSS_RTOL = 0.02  # every objective's loss, relative: measured 0.7% at most
SCALE = dict(initializer_range=0.2, hidden_dropout=0.0, attention_dropout=0.0)  # weights that make the layers matter (BERT's
# 0.02 leaves them near the identity); no dropout, whose masks would differ between the two passes


@pytest.fixture
def native(monkeypatch):
    """A CPU with avx512_bf16, whatever this one has."""
    monkeypatch.setattr(precision, "cpu_bf16", lambda: "avx512_bf16")


# --- the choice ----------------------------------------------------------------------------------


def test_auto_follows_the_detected_feature_and_says_why(monkeypatch):
    monkeypatch.setattr(precision, "cpu_bf16", lambda: None)
    assert resolve("auto", CPU) == "fp32" and auto_line("auto", CPU) is None  # nothing changes, nothing said
    monkeypatch.setattr(precision, "cpu_bf16", lambda: "avx512_bf16")
    assert resolve("auto", CPU) == "bf16" and Precision.of("auto", CPU).name == "bf16"
    assert auto_line("auto", CPU) == "precision: bf16 autocast (this CPU has avx512_bf16); --precision fp32 for float32 throughout"
    assert resolve("fp32", CPU) == "fp32" and auto_line("fp32", CPU) is None and auto_line("bf16", CPU) is None
    # pretraining keeps fp32 on such a CPU (bf16 left default bert and electra runs outside their bands), and says so
    assert resolve("auto", CPU, pretraining=True) == "fp32" and Precision.of("auto", CPU, pretraining=True).name == "fp32"
    assert auto_line("auto", CPU, pretraining=True).startswith("precision: fp32 (this CPU has avx512_bf16, but bf16 pretraining")
    assert resolve("bf16", CPU, pretraining=True) == "bf16"
    assert resolve("auto", torch.device("mps")) == "fp32"  # the CPU's feature says nothing about another device


def test_the_feature_is_read_from_torch_else_from_the_cpu_flags(monkeypatch, tmp_path):
    monkeypatch.delenv("MINIBERT_CPU_BF16")  # conftest.py's: hidden from every other test
    for reported, found in (({"avx512_bf16": True, "amx_bf16": False}, "avx512_bf16"), ({"avx512_bf16": True, "amx_bf16": True}, "amx_bf16"),
                            ({"avx512_bf16": False, "avx512_f": True}, None)):  # AVX-512 alone emulates bf16: no gain
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: reported)
        assert find_cpu_bf16() == found
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {})  # torch says nothing: Linux's flags
    monkeypatch.setattr(precision.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(precision, "CPUINFO", tmp_path / "cpuinfo")
    for flags, found in (("fpu avx2 avx512f avx512_bf16 avx512_vnni", "avx512_bf16"), ("fpu avx2 avx512f", None)):
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert find_cpu_bf16() == found
    monkeypatch.setattr(precision, "CPUINFO", tmp_path / "absent")
    assert find_cpu_bf16() is None
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx512_bf16": True})
    monkeypatch.setenv("MINIBERT_CPU_BF16", "0")
    assert find_cpu_bf16() is None


def test_pretraining_keeps_fp32_under_auto_says_why_once_and_takes_bf16_when_asked(native, tmp_path, capsys, monkeypatch):
    from minibert.runs.cli import main
    from tiny_run import tiny_args, write_corpus

    chosen = []
    monkeypatch.setattr(precision.Precision, "__init__", lambda self, name, device, init=precision.Precision.__init__:
                        (chosen.append(name), init(self, name, device))[1])
    corpus = write_corpus(tmp_path / "animals.txt")
    assert main(tiny_args("bert", corpus, tmp_path / "cache", tmp_path / "out", 2, "--device", "cpu")) == 0
    printed = capsys.readouterr().out
    assert printed.count("precision: fp32 (this CPU has avx512_bf16, but bf16 pretraining") == 1 and chosen == ["fp32"]
    assert json.loads((tmp_path / "out" / "run.json").read_text())["settings"]["precision"] == "auto"
    assert main(tiny_args("bert", corpus, tmp_path / "cache", tmp_path / "bf16", 2, "--device", "cpu", "--precision", "bf16")) == 0
    assert "precision:" not in capsys.readouterr().out and chosen == ["fp32", "bf16"]


# --- bf16 against fp32 ---------------------------------------------------------------------------


def test_the_encoder_in_bf16_is_within_tolerance_of_fp32():
    """Full batches and padded ones (unpadded inside: Encoder.UNPAD_FROM), post-LN and pre-LN."""
    for norm in ("post", "pre"):
        config = ModelConfig(vocab_size=200, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_positions=64,
                             norm=norm, **SCALE)
        torch.manual_seed(0)
        encoder = Encoder(config).eval()
        ids = torch.randint(5, 200, (4, 48))
        for mask in (torch.ones(4, 48, dtype=torch.long), (torch.arange(48) < torch.tensor([[10], [30], [48], [20]])).long()):
            exact = encoder(ids, mask).last_hidden_state
            with BF16:
                low = encoder(ids, mask).last_hidden_state
            real = mask.bool()
            assert low.dtype == torch.float32  # the residual stream stays fp32
            assert (low - exact)[real].abs().max() <= ENCODER_ATOL, norm


def test_attention_in_bf16_is_within_tolerance_of_fp32_on_both_sides_of_the_formulas_threshold():
    """Up to BF16_CPU_FORMULAS_UP_TO keys "sdpa" takes the formulas in bf16 on a CPU, beyond it
    torch's kernel: either way the values and the gradients follow fp32's, padding keys get no
    weight, and a sequence of padding alone gives no NaN."""
    from minibert.attention import BF16_CPU_FORMULAS_UP_TO, attend

    for length in (BF16_CPU_FORMULAS_UP_TO, BF16_CPU_FORMULAS_UP_TO + 8):
        torch.manual_seed(0)
        q, k, v = (torch.randn(3, 2, length, 16) for _ in range(3))
        key_mask = torch.arange(length) < torch.tensor([[length], [length // 3], [0]])  # full, padded, padding alone
        outputs, grads = [], []
        for dtype, backend in ((torch.float32, "naive"), (torch.bfloat16, "sdpa")):
            inputs = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
            out = attend(*inputs, key_mask, backend, 0.0)
            out.float()[:2].sum().backward()
            outputs.append(out.float()[:2])
            grads.append([t.grad.float()[:2] for t in inputs])
            assert out.isfinite().all(), (length, backend)
        assert (outputs[1] - outputs[0]).abs().max() <= 0.05, length
        for low, exact in zip(*grads):
            assert (low - exact).abs().max() <= 0.05 * max(1.0, exact.abs().max().item()), length
        assert grads[1][1][1, :, length // 3:].abs().max() == 0  # no gradient reaches a padding key


@pytest.mark.parametrize("name", ["bert", "roberta", "albert", "electra"])
def test_each_objectives_loss_in_bf16_is_fp32_and_within_tolerance(name):
    variant = VARIANTS[name]
    settings = variant.default_settings(seq_len=24)
    small = dict(hidden_size=64, num_heads=4, intermediate_size=128, num_layers=2, **SCALE)
    if name in ("albert", "electra"):
        small["embedding_size"] = 32
    torch.manual_seed(0)
    pretrainer = build_pretrainer(variant, settings, run_architecture(variant, settings, small, vocab_size=200, pad_token_id=0))
    batch = make_batch(batch=8, seq=24, vocab=200, pair=with_layout(variant, settings).layout != "full_sentences")
    torch.manual_seed(1)  # ELECTRA's replacements: the same draw
    exact, exact_metrics = pretrainer.eval()(batch)
    with BF16:
        torch.manual_seed(1)
        low, metrics = pretrainer(batch)
    assert low.dtype == torch.float32
    for key in [k for k in exact_metrics if k.endswith("_loss")] + [None]:
        a, b = (exact.detach(), low.detach()) if key is None else (exact_metrics[key], metrics[key])
        assert b.dtype == torch.float32 and abs(float(b) - float(a)) <= LOSS_RTOL * abs(float(a)), key


def test_distillations_losses_in_bf16_are_within_tolerance():
    teacher_config = ModelConfig(vocab_size=200, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                                 max_positions=32, **SCALE)
    torch.manual_seed(0)
    teacher = MaskedLM(teacher_config)
    student = MaskedLM(student_config(teacher_config)).eval()
    init_student_from_teacher(student, teacher)
    kd = KnowledgeDistillation(teacher, temperature=2.0, soft_weight=5.0, mlm_weight=2.0, cosine_weight=1.0, all_tokens=False)
    batch = make_batch(batch=8, seq=24, vocab=200, pair=False)
    batch["token_type_ids"].zero_()
    exact, exact_metrics = kd(student, batch, student.encoder(batch["input_ids"], batch["attention_mask"]))
    with BF16:
        low, metrics = kd(student, batch, student.encoder(batch["input_ids"], batch["attention_mask"]))
    for key in ("kd_soft_loss", "kd_cosine_loss"):
        assert metrics[key].dtype == torch.float32
        assert abs(float(metrics[key]) - float(exact_metrics[key])) <= LOSS_RTOL * abs(float(exact_metrics[key])) + 1e-4, key
    assert abs(float(low.detach()) - float(exact.detach())) <= LOSS_RTOL * abs(float(exact.detach()))


def test_the_task_heads_losses_in_bf16_are_within_tolerance():
    """Sequence classification (and regression) and question answering's span loss."""
    config = ModelConfig(vocab_size=200, hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128, max_positions=64, **SCALE)
    ids, mask = torch.randint(5, 200, (6, 32)), (torch.arange(32) < torch.tensor([[32], [20], [12], [32], [25], [8]])).long()
    torch.manual_seed(0)
    for model, labels in ((SequenceClassifier(config, num_labels=3).eval(), {"labels": torch.tensor([0, 1, 2, 0, 1, 2])}),
                          (SequenceClassifier(config, num_labels=1).eval(), {"labels": torch.randn(6)}),
                          (SpanExtractor(config).eval(), {"start_positions": torch.tensor([1, 3, 0, 7, 2, 5]),
                                                          "end_positions": torch.tensor([2, 4, 0, 9, 2, 6])})):
        with torch.no_grad():
            exact = model(ids, mask, **labels).loss
            with BF16:
                low = model(ids, mask, **labels).loss
        assert low.dtype == torch.float32 and abs(float(low) - float(exact)) <= LOSS_RTOL * abs(float(exact)), type(model).__name__


def test_a_bf16_step_keeps_weights_gradients_and_adamw_state_in_fp32():
    config = ModelConfig(vocab_size=200, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=32)
    torch.manual_seed(0)
    model = SequenceClassifier(config, num_labels=2)

    class Task(torch.nn.Module):  # a Pretrainer's interface: batch -> (loss, metrics)
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, batch):
            return self.model(batch["input_ids"], batch["attention_mask"], labels=batch["labels"]).loss, {}

    optimizer = build_optimizer(model, lr=1e-3, weight_decay=0.01)
    settings, amp = Settings(), Precision("bf16", CPU)
    batch = {"input_ids": torch.randint(5, 200, (4, 16)), "attention_mask": torch.ones(4, 16, dtype=torch.long),
             "labels": torch.tensor([0, 1, 0, 1])}
    nonfinite = NonfiniteCheck(Progress(), settings, Distributed(), amp, resumable=False)
    train_step(Task(), optimizer, [iter([batch])], 1e-3, settings, Distributed(), amp, nonfinite)
    assert all(p.dtype == torch.float32 and (p.grad is None or p.grad.dtype == torch.float32) for p in model.parameters())
    state = [tensor for moments in optimizer.state.values() for tensor in moments.values() if torch.is_tensor(tensor) and tensor.numel() > 1]
    assert state and all(tensor.dtype == torch.float32 for tensor in state)


def test_a_fine_tuned_classifiers_predictions_agree_in_bf16(tmp_path, capsys, native):
    """Fine-tuned in fp32 on the toy task; its dev rows predicted in fp32 and bf16 (Classifier.predict
    and `python -m minibert predict`, whose auto is bf16 here and says so): the same labels,
    probabilities within 0.02."""
    from minibert.finetune import load_classifier
    from minibert.tools.commands import main as command
    from test_finetune import run, toy_rows, write_tsv, FAST, TINY, VOCAB
    from minibert import save_pretrained
    from minibert.tokenizers.wordpiece import WordPieceTokenizer

    torch.manual_seed(0)
    init = save_pretrained(Encoder(ModelConfig(**TINY)), tmp_path / "init", tokenizer=WordPieceTokenizer(VOCAB))
    train = write_tsv(tmp_path / "train.tsv", ["sentence", "label"], toy_rows(96, seed=1))
    dev = write_tsv(tmp_path / "dev.tsv", ["sentence", "label"], toy_rows(40, seed=2))
    assert run(init, train, dev, tmp_path / "clf", *FAST, "--precision", "fp32") == 0
    classifier = load_classifier(tmp_path / "clf")
    rows = [text for text, _ in toy_rows(40, seed=2)]
    exact, low = classifier.predict(rows, precision="fp32"), classifier.predict(rows, precision="bf16")
    assert [p.label for p in exact] == [p.label for p in low]
    assert max(abs(a.score - b.score) for a, b in zip(exact, low)) <= 0.02
    capsys.readouterr()
    assert command(["predict", str(tmp_path / "clf"), str(dev), "--out", str(tmp_path / "p.tsv")]) == 0
    assert "precision: bf16 autocast (this CPU has avx512_bf16)" in capsys.readouterr().out
    predicted = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    assert [row[1] for row in predicted] == [p.label for p in exact] or [row[0] for row in predicted] == [p.label for p in exact]
