"""The recipe follows the model's size, for every fine-tune; the pooling follows its pretraining;
layer-wise lr decay; a choice made on training rows, never on dev; the untrained twin; pretrained
minus untrained in one command; GLUE's training text alone.

Tiny models and a few rows written here (test_glue.py's layouts); nothing needs ../shared.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import torch

from minibert import Encoder, ModelConfig, save_pretrained
from minibert.corpus.documents import read_documents
from minibert.finetune import job, main
from minibert.finetune.checkpoint import load_classifier
from minibert.finetune.cli import build_parser, parse
from minibert.finetune.glue.sweep import Side, choose_lr, task_runs
from minibert.finetune.glue.tasks import GLUE_TASKS, training_text
from minibert.finetune.job import TaskLoss, load_backbone
from minibert.finetune.kinds.sentences import SentenceKind
from minibert.finetune.layer_decay import layer_lr_scales
from minibert.finetune import recipes
from minibert.finetune.recipes import GRID_LRS, checkpoint_pooling, choose, recipe_for
from minibert.finetune.kinds.sentence_files import read_task
from minibert.finetune.glue.twin import init_seed, t975, untrained_twin
from minibert.heads import SequenceClassifier
from minibert.operations.distributed import Distributed
from minibert.operations.precision import Precision
from minibert.operations.state import seed_everything
from minibert.tokenizers.wordpiece import WordPieceTokenizer
from minibert.training.loop import Progress, train
from minibert.training.settings import LoopSettings
from minibert.training.optimizer import build_optimizer
from minibert.runs.metrics import MetricsLog
from minibert.training.settings import Settings
from minibert.variants import VARIANTS, build_pretrainer, with_layout

from test_finetune import TINY, VOCAB, toy_rows, write_tsv
from test_glue import layout, seed_of, write_glue

STEPS = ["--steps", "1", "--batch-size", "8", "--device", "cpu"]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, above all on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def task_folder(root: Path, tasks=("RTE",), n_train: int = 12, n_dev: int = 6) -> Path:
    """Only `tasks`, each with its train and dev files (and MNLI's second dev file)."""
    for name in tasks:
        spec = GLUE_TASKS[name]
        (root / name).mkdir(parents=True)
        for file, split, n in [("train.tsv", "train", n_train), (spec.dev, "dev", n_dev),
                               *([(spec.mismatched, "dev", n_dev)] if spec.mismatched else [])]:
            (root / name / file).write_text(layout(name, split, n, seed=seed_of(file))[0], encoding="utf-8")
    return root


def checkpoint(folder: Path, seed: int, run_seed: int | None = None, **fields) -> Path:
    """A tiny encoder initialised from `seed`; with `run_seed`, the run.json a pretraining run with that --seed leaves."""
    torch.manual_seed(seed)
    save_pretrained(Encoder(ModelConfig(**{**TINY, **fields})), folder, tokenizer=WordPieceTokenizer(VOCAB))
    if run_seed is not None:
        (folder / "run.json").write_text(json.dumps({"settings": Settings(variant="bert", seed=run_seed).to_dict()}))
    return folder


def eval_json(folder: Path) -> dict:
    return json.loads((folder / "eval.json").read_text())


# --- the recipe follows the width -----------------------------------------------------------------


@pytest.mark.parametrize("width, lr, decay", [(128, 3e-4, 0.8), (256, 3e-4, 0.8), (384, 3e-4, 0.8), (768, 1e-4, 0.8),
                                              (1024, 5e-5, 0.9), (2048, 5e-5, 0.9)])
def test_the_electra_recipe_takes_the_row_of_the_encoders_width_and_bert_stays_a_flag_away(width, lr, decay):
    config = ModelConfig(**{**TINY, "hidden_size": width, "num_heads": 4, "intermediate_size": 4 * width})
    electra = recipe_for("electra", config)
    for task in GLUE_TASKS:
        values = electra.values(task)
        assert (values["lr"], values["layer_decay"], values["weight_decay"], values["batch_size"]) == (lr, decay, 0.0, 32)
        assert values["dropout"] == 0.1  # ELECTRA's table; BERT's and the miniatures' configs alike
        assert values["epochs"] == (10.0 if task in ("RTE", "STS-B") else 3.0)
    bert = recipe_for("bert", config).values("SST-2")
    assert (bert["lr"], bert["layer_decay"], bert["weight_decay"], bert["epochs"]) == (2e-5, None, 0.01, 3.0)
    assert recipe_for("bert", config).values("RTE")["epochs"] == 10.0
    grid = recipe_for("grid", config)
    assert grid.values("RTE")["lr"] is None and grid.lrs == (3e-4, 1e-4, 5e-5, 3e-5) and grid.values("RTE")["epochs"] == 4.0


def test_the_sweep_says_its_recipe_in_one_line_records_it_and_every_flag_overrides_it(tmp_path, capsys):
    glue, tiny = task_folder(tmp_path / "glue"), checkpoint(tmp_path / "tiny", 0)  # H = 32: ELECTRA-Small's row
    base = ["--init", str(tiny), "--glue", str(glue), "--batch-size", "8", "--device", "cpu"]
    assert main([*base, "--max-train-examples", "1", "--out", str(tmp_path / "electra")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("recipe ")]
    assert len(lines) == 1 and "ELECTRA-Small" in lines[0] and "lr 0.0003" in lines[0] and "layer-wise lr decay 0.8" in lines[0]
    assert "Clark et al. 2020" in lines[0] and "appendix" in lines[0] and "overridden by --batch-size" in lines[0]
    assert "dropout 0.1" in lines[0]
    report = eval_json(tmp_path / "electra" / "RTE" / "seed-0")
    assert (report["args"]["lr"], report["args"]["layer_decay"], report["args"]["weight_decay"]) == (3e-4, 0.8, 0.0)
    assert report["args"]["dropout"] == 0.1 and load_classifier(tmp_path / "electra" / "RTE" / "seed-0").model.config.hidden_dropout == 0.1
    assert report["steps"] == 10 and report["recipe"]["name"] == "electra"  # RTE: 10 epochs of one batch
    glue_json = json.loads((tmp_path / "electra" / "glue.json").read_text())
    assert glue_json["recipe"] == report["recipe"] and glue_json["tasks"]["RTE"]["recipe"]["layer_decay"] == 0.8

    assert main([*base, "--steps", "1", "--glue-recipe", "bert", "--out", str(tmp_path / "bert")]) == 0
    report = eval_json(tmp_path / "bert" / "RTE" / "seed-0")
    assert (report["args"]["lr"], report["args"]["layer_decay"], report["args"]["weight_decay"]) == (2e-5, None, 0.01)
    assert main([*base, "--steps", "1", "--lr", "1e-3", "--layer-decay", "0.5", "--weight-decay", "0.1", "--dropout", "0",
                 "--out", str(tmp_path / "given")]) == 0
    assert "overridden by --lr, --layer-decay, --weight-decay, --dropout, --batch-size, --steps" in capsys.readouterr().out
    report = eval_json(tmp_path / "given" / "RTE" / "seed-0")
    assert (report["args"]["lr"], report["args"]["layer_decay"], report["args"]["weight_decay"]) == (1e-3, 0.5, 0.1)
    assert report["args"]["dropout"] == 0.0


# --- one recipe for every fine-tune --------------------------------------------------------------


def toy_task(folder: Path, n_train: int = 64) -> tuple[Path, Path]:
    """test_finetune's toy task (one sentiment word decides) in `folder`/train.tsv and dev.tsv."""
    folder.mkdir(parents=True)
    return (write_tsv(folder / "train.tsv", ["sentence", "label"], toy_rows(n_train, seed=1)),
            write_tsv(folder / "dev.tsv", ["sentence", "label"], toy_rows(8, seed=2)))


def train_dev(init: Path, train: Path, dev: Path, out: Path, *extra: str) -> int:
    return main(["--init", str(init), "--train", str(train), "--dev", str(dev), "--out", str(out), "--device", "cpu", *extra])


def test_train_dev_and_tasks_take_the_recipe_of_the_width_with_its_usual_epochs(tmp_path, capsys):
    """--train/--dev and --tasks run the recipe --glue runs (H = 32: ELECTRA-Small's lr 3e-4), not
    BERT-base's lr 2e-5, and eval.json records it; a folder called RTE is no GLUE task there, so
    it takes the usual 3 epochs, not RTE's 10."""
    tiny, (train, dev) = checkpoint(tmp_path / "tiny", 0), toy_task(tmp_path / "RTE")  # 64 rows: 2 batches of 32 an epoch
    assert train_dev(tiny, train, dev, tmp_path / "one") == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("recipe ")]
    assert len(lines) == 1 and "ELECTRA-Small" in lines[0] and "lr 0.0003" in lines[0] and "3 epochs;" in lines[0]
    assert "overridden" not in lines[0] and "RTE" not in lines[0]
    assert main(["--init", str(tiny), "--tasks", str(tmp_path / "RTE"), "--out", str(tmp_path / "tasks"), "--device", "cpu"]) == 0
    for report in (eval_json(tmp_path / "one"), eval_json(tmp_path / "tasks" / "RTE")):
        args = report["args"]
        assert (args["lr"], args["layer_decay"], args["weight_decay"], args["dropout"], args["batch_size"]) == (3e-4, 0.8, 0.0, 0.1, 32)
        assert args["epochs"] == 3.0 and report["steps"] == 6
        assert args["recipe"] == report["recipe"]["name"] == "electra" and report["recipe"]["lr"] == 3e-4


def test_glue_recipe_is_still_accepted_as_the_earlier_name_of_recipe(tmp_path):
    """--glue-recipe, the flag's name when only --glue took a recipe, is an alias of --recipe, and works outside --glue."""
    parser = build_parser()
    assert parser.parse_args(["--glue-recipe", "bert"]).recipe == parser.parse_args(["--recipe", "bert"]).recipe == "bert"
    tiny, (train, dev) = checkpoint(tmp_path / "tiny", 0), toy_task(tmp_path / "toy")
    assert train_dev(tiny, train, dev, tmp_path / "bert", "--glue-recipe", "bert", "--steps", "1") == 0
    report = eval_json(tmp_path / "bert")
    assert (report["args"]["lr"], report["args"]["layer_decay"], report["args"]["weight_decay"]) == (2e-5, None, 0.01)
    assert report["recipe"]["name"] == "bert"


def test_a_sweep_that_recorded_the_recipe_under_its_earlier_name_is_read_back(tmp_path, capsys):
    """eval.json written before --recipe had its name records it as glue_recipe: the same command reads that run back."""
    glue, tiny = task_folder(tmp_path / "glue"), checkpoint(tmp_path / "tiny", 0)
    argv = ["--init", str(tiny), "--glue", str(glue), "--out", str(tmp_path / "out"), *STEPS]
    assert main(argv) == 0
    folder = tmp_path / "out" / "RTE" / "seed-0"
    report = eval_json(folder)
    report["args"]["glue_recipe"] = report["args"].pop("recipe")
    (folder / "eval.json").write_text(json.dumps(report))
    capsys.readouterr()
    assert main(argv) == 0
    assert "RTE seed 0: finished earlier with these settings" in capsys.readouterr().out


def test_a_sweep_whose_runs_predate_a_flag_reads_them_back_at_its_default(tmp_path, capsys):
    """eval.json written before --grad-accum, --compile, --eval-every and --patience existed lacks
    them; those runs ran as their defaults do, so the same command reads them back instead of refusing them."""
    glue, tiny = task_folder(tmp_path / "glue"), checkpoint(tmp_path / "tiny", 0)
    argv = ["--init", str(tiny), "--glue", str(glue), "--out", str(tmp_path / "out"), *STEPS]
    assert main(argv) == 0
    folder = tmp_path / "out" / "RTE" / "seed-0"
    report = eval_json(folder)
    for flag in ("grad_accum", "compile", "eval_every", "patience"):
        del report["args"][flag]
    (folder / "eval.json").write_text(json.dumps(report))
    capsys.readouterr()
    assert main(argv) == 0
    assert "RTE seed 0: finished earlier with these settings" in capsys.readouterr().out


def pretraining_run(folder: Path, variant: str, layout: str | None = None, accuracies=()) -> Path:
    """A run folder as pretraining leaves it, for the pooling: run.json, and a metrics.jsonl whose
    held-out evaluations record `accuracies` of the run's sentence task (none: no metrics.jsonl)."""
    settings = with_layout(VARIANTS[variant], VARIANTS[variant].default_settings(layout=layout))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"settings": settings.to_dict()}))
    if accuracies:
        records = [{"step": 250 * (i + 1), f"eval_{settings.layout}_accuracy": accuracy, "eval_loss": 6.0}
                   for i, accuracy in enumerate(accuracies)]
        records.insert(1, {"step": 260, "loss": 6.5, f"{settings.layout}_accuracy": 0.99})  # a training record: not held out
        (folder / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    return folder


@pytest.mark.parametrize("variant, layout", [("roberta", None), ("electra", None), ("distilbert", None),
                                             ("bert", "full_sentences")])
def test_a_minibert_run_without_a_sentence_task_pools_the_mean(variant, layout, tmp_path):
    """No sentence task trained [CLS] (the roberta, electra and distilbert runs, or --layout
    full_sentences): the mean of the last layer, whatever metrics.jsonl records."""
    chosen = checkpoint_pooling(pretraining_run(tmp_path, variant, layout, [0.99]))
    assert chosen.name == "mean" and "without a sentence task" in chosen.why and "layout full_sentences" in chosen.why


@pytest.mark.parametrize("variant, layout, accuracies", [
    ("bert", None, [0.70, 0.73]), ("albert", None, [0.63]), ("roberta", "nsp", [0.84]), ("bert", None, [0.90, 0.80])])
def test_a_run_whose_sentence_task_did_not_learn_pools_the_mean(variant, layout, accuracies, tmp_path):
    """A run pretrained with NSP or SOP whose last held-out accuracy on it is below
    SENTENCE_LEARNED has not made [CLS] a sentence vector: the mean, and the line gives the
    accuracy, where it was read and the bar (an earlier, higher evaluation does not count)."""
    chosen = checkpoint_pooling(pretraining_run(tmp_path, variant, layout, accuracies))
    task = "sop" if variant == "albert" else "nsp"
    assert recipes.SENTENCE_LEARNED > accuracies[-1]
    assert chosen.name == "mean"
    assert f"held-out {task} accuracy {accuracies[-1]:.3f} (metrics.jsonl, step {250 * len(accuracies)})" in chosen.why
    assert f"below {recipes.SENTENCE_LEARNED:g}" in chosen.why


@pytest.mark.parametrize("variant, layout, accuracies", [
    ("bert", None, [0.60, 0.98]), ("albert", None, [0.865]), ("roberta", "sop", [0.90]), ("bert", None, [0.85])])
def test_a_run_whose_sentence_task_learned_pools_cls(variant, layout, accuracies, tmp_path):
    """A held-out NSP/SOP accuracy at or above SENTENCE_LEARNED (as the published heads reached)
    keeps [CLS], and the line says which accuracy showed it."""
    chosen = checkpoint_pooling(pretraining_run(tmp_path, variant, layout, accuracies))
    task = "sop" if variant == "albert" or layout == "sop" else "nsp"
    assert accuracies[-1] >= recipes.SENTENCE_LEARNED
    assert chosen.name == "cls" and f"held-out {task} accuracy {accuracies[-1]:.3f}" in chosen.why
    assert f"reaches {recipes.SENTENCE_LEARNED:g}" in chosen.why


@pytest.mark.parametrize("metrics", [None, "", '{"step": 25, "loss": 7.0, "nsp_accuracy": 0.9}\n'])
def test_a_sentence_task_run_that_records_no_held_out_accuracy_pools_the_mean(metrics, tmp_path):
    """No metrics.jsonl, an empty one, or one with training records alone: nothing shows that
    the sentence task trained [CLS], so the mean, and the line says the record is missing."""
    run = pretraining_run(tmp_path, "bert")
    if metrics is not None:
        (run / "metrics.jsonl").write_text(metrics)
    chosen = checkpoint_pooling(run)
    assert chosen.name == "mean" and "records no held-out nsp accuracy" in chosen.why


@pytest.mark.parametrize("config, pooling, known", [
    ({"model_type": "bert"}, "cls", True), ({"model_type": "albert"}, "cls", True), ({"model_type": "roberta"}, "mean", True),
    ({"model_type": "distilbert"}, "mean", True), ({"model_type": "electra"}, "mean", True),
    ({"model_type": "roformer"}, "cls", False), ({"minibert": {"format": 1, "head": None}}, "cls", False),
    ({"minibert": {"format": 1, "head": "classifier", "pooling": "mean"}}, "mean", True)])
def test_a_folder_without_a_run_takes_its_familys_pooling_or_berts(config, pooling, known, tmp_path):
    """A Hugging Face folder: BERT's and ALBERT's checkpoints were pretrained with NSP / SOP,
    RoBERTa's, DistilBERT's and ELECTRA's without; a fine-tuned classifier keeps what its head
    read; a folder that records none of this takes BERT's [CLS] and says so."""
    (tmp_path / "config.json").write_text(json.dumps(config))
    chosen = checkpoint_pooling(tmp_path)
    assert chosen.name == pooling and ("records no pretraining" in chosen.why) == (not known)


def test_the_pooling_that_ran_and_why_is_one_line_for_every_fine_tune(tmp_path, capsys):
    """A checkpoint pretrained without a sentence task fine-tunes on the mean of the last layer,
    under --train/--dev and --glue alike, and one line says so and why; --pooling overrides it,
    and the line then says what the checkpoint would have taken."""
    tiny, (train, dev) = checkpoint(tmp_path / "tiny", 0), toy_task(tmp_path / "toy")
    (tiny / "run.json").write_text(json.dumps({"settings": {"layout": "full_sentences"}}))
    assert train_dev(tiny, train, dev, tmp_path / "mean", "--steps", "1") == 0
    glue = task_folder(tmp_path / "glue")
    assert main(["--init", str(tiny), "--glue", str(glue), "--out", str(tmp_path / "glue-out"), *STEPS]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pooling ")]
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0].startswith("pooling mean: the head reads the mean of the last layer, since the checkpoint was pretrained "
                               "without a sentence task (run.json: layout full_sentences)") and "--pooling cls" in lines[0]
    for out in (tmp_path / "mean", tmp_path / "glue-out" / "RTE" / "seed-0"):
        assert load_classifier(out).model.pooling == eval_json(out)["args"]["pooling"] == "mean"

    assert train_dev(tiny, train, dev, tmp_path / "cls", "--steps", "1", "--pooling", "cls") == 0
    printed = capsys.readouterr().out.splitlines()
    (line,) = [line for line in printed if line.startswith("pooling ")]
    assert line.startswith("pooling cls: the head reads the [CLS] vector, as --pooling asks (without it: mean, since")
    assert any(line.startswith("recipe ") and "overridden by --pooling" in line for line in printed)
    assert load_classifier(tmp_path / "cls").model.pooling == "cls"


def test_a_bert_run_whose_nsp_did_not_learn_fine_tunes_on_the_mean_and_says_why(tmp_path, capsys):
    """The bert run's checkpoint (layout nsp) whose recorded held-out NSP accuracy is below the
    bar fine-tunes on the mean of the last layer by default, and the line gives the accuracy."""
    tiny, (train, dev) = checkpoint(tmp_path / "tiny", 0), toy_task(tmp_path / "toy")
    pretraining_run(tiny, "bert", None, [0.7, 0.73])
    assert train_dev(tiny, train, dev, tmp_path / "out", "--steps", "1") == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("pooling ")]
    assert line.startswith("pooling mean: the head reads the mean of the last layer, since the checkpoint was pretrained "
                           "with nsp (run.json: layout nsp) but its held-out nsp accuracy 0.730 (metrics.jsonl, step 500)")
    assert load_classifier(tmp_path / "out").model.pooling == eval_json(tmp_path / "out")["args"]["pooling"] == "mean"


# --- layer-wise lr decay ---------------------------------------------------------------------------


@pytest.mark.parametrize("share", ["none", "all", "attention"])
def test_layer_decay_trains_each_layer_at_its_own_lr_and_a_shared_layer_at_the_tops(share, tmp_path):
    depth, decay, lr = 3, 0.5, 1e-3
    config = ModelConfig(**{**TINY, "num_layers": depth, "share_layers": share, "embedding_size": 16})  # E -> H projection
    torch.manual_seed(0)
    objective = TaskLoss(SequenceClassifier(config, 2))
    encoder = objective.model.encoder
    scales = layer_lr_scales(objective, encoder, decay)
    optimizer = build_optimizer(objective, lr=lr, weight_decay=0.01, lr_scales=scales)
    batch = {"input_ids": torch.randint(5, len(VOCAB), (2, 6)), "attention_mask": torch.ones(2, 6, dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    loop = LoopSettings(steps=1, lr=lr, warmup=0.0, weight_decay=0.01, clip=1.0, seed=0, log_every=1, eval_every=1,
                        save_every=1)
    cpu = torch.device("cpu")
    train(objective, optimizer, [iter([batch])], None, loop, Progress(), dist=Distributed(), device=cpu,
          amp=Precision.of("fp32", cpu), log=MetricsLog(tmp_path / "metrics.jsonl"))  # the loop sets each group's lr from the schedule
    trained_at = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}

    def at(module, expected: float) -> bool:
        return all(math.isclose(trained_at[id(p)], expected) for p in module.parameters())

    assert at(encoder.embeddings, lr * decay ** depth) and at(encoder.embedding_projection, lr * decay ** depth)
    for sublayers in (encoder.attention, encoder.feed_forward):
        if len(sublayers) == 1:  # one parameter set applied at every depth: the top's lr
            assert at(sublayers[0], lr)
        else:
            assert all(at(sublayer, lr * decay ** (depth - 1 - d)) for d, sublayer in enumerate(sublayers))
    assert at(objective.model.head, lr) and at(encoder.pooler, lr)
    assert len(trained_at) == len(list(objective.parameters()))  # every parameter in exactly one group
    plain = build_optimizer(objective, lr=lr, weight_decay=0.01)  # pretraining's: two groups, as ever
    assert len(plain.param_groups) == 2 and all("lr_scale" not in group for group in plain.param_groups)


# --- a choice on training rows, never on dev --------------------------------------------------------


def test_held_out_rows_are_training_rows_disjoint_from_those_trained_on(tmp_path):
    train = read_task(task_folder(tmp_path, n_train=40) / "RTE" / "train.tsv", columns=GLUE_TASKS["RTE"].columns)
    rest, held = train.held_out(0.1)
    assert len(held) == 4 and len(rest) == 36 and not set(held.lines) & set(rest.lines)
    assert sorted(held.lines + rest.lines) == train.lines  # together every training row, each once
    assert train.held_out(0.1)[1].lines == held.lines  # seeded: the same rows every time
    assert choose({3e-4: 0.5, 1e-4: 0.7, 3e-5: 0.7}) == 3e-5  # the best; of equal ones the lower lr


def test_the_grid_chooses_its_lr_without_a_dev_file_and_scores_only_held_out_training_rows(tmp_path, capsys, monkeypatch):
    glue, tiny = task_folder(tmp_path / "glue", n_train=20), checkpoint(tmp_path / "tiny", 0)
    (glue / "RTE" / "dev.tsv").unlink()  # any read of dev would fail
    trained_on, read = [], SentenceKind.read

    def spy(self, *args):
        task = read(self, *args)
        trained_on.append(task.train.lines)
        return task

    monkeypatch.setattr(SentenceKind, "read", spy)
    out = tmp_path / "out"
    args = parse(["--init", str(tiny), "--glue", str(glue), "--out", str(out), "--glue-recipe", "grid", *STEPS])
    backbone, task = load_backbone(tiny), GLUE_TASKS["RTE"]
    recipe = recipe_for("grid", backbone[0].config)
    side = Side("", out, str(tiny))
    choices, _ = task_runs(args, task, [0], recipe, side)
    choice = choose_lr(args, task, choices, backbone, side, glue, torch.device("cpu"), Precision.of("fp32", torch.device("cpu")))
    assert choice["lr"] in GRID_LRS and set(choice["held_out_scores"]) == {f"{lr:g}" for lr in GRID_LRS}
    rest, held = read_task(glue / "RTE" / "train.tsv", columns=task.columns).held_out(0.1)
    assert trained_on == [rest.lines] * len(GRID_LRS) and len(held) == 2 and not set(rest.lines) & set(held.lines)
    for lr in GRID_LRS:
        run = out / "RTE" / "choose-lr" / f"lr-{lr:g}"
        report = eval_json(run)
        assert report["examples"] == len(held) and report["args"]["lr"] == lr and report["args"]["held_out"] == 0.1
        gold = [line.split("\t")[2] for line in (run / "predictions.tsv").read_text().splitlines()[1:]]
        assert gold == held.labels and not (run / "model.safetensors").exists()  # scored on the held-out training rows
    assert f"lr {choice['lr']:g} chosen on 10% of the training rows held out" in capsys.readouterr().out

    (glue / "RTE" / "dev.tsv").write_text(layout("RTE", "dev", 6, seed=seed_of("dev.tsv"))[0])  # the sweep: choice, then dev
    trained_on.clear()
    assert main(["--init", str(tiny), "--glue", str(glue), "--out", str(out), "--glue-recipe", "grid", *STEPS]) == 0
    assert capsys.readouterr().out.count("finished earlier with these settings") == len(GRID_LRS)  # the choice read back
    final = eval_json(out / "RTE" / "seed-0")
    assert final["args"]["lr"] == choice["lr"] and final["args"]["held_out"] is None and final["examples"] == 6
    assert trained_on == [sorted(rest.lines + held.lines)]  # the chosen lr on every training row
    assert json.loads((out / "glue.json").read_text())["tasks"]["RTE"]["lr_choice"] == choice


# --- the untrained twin ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["bert", "albert", "electra"])
def test_the_twin_has_the_config_the_tokenizer_and_the_weights_a_pretraining_run_of_its_seed_starts_from(variant, tmp_path):
    config = ModelConfig(**{**TINY, **{k: v for k, v in VARIANTS[variant].model_fields.items() if k != "embedding_size"},
                            **({"embedding_size": 16} if variant == "albert" else {})})
    settings = Settings(variant=variant, seed=7)
    seed_everything(settings.seed)  # as runs/run.py: seed, then build the pretrainer
    pretrainer = build_pretrainer(VARIANTS[variant], settings, config)
    start = {name: tensor.clone() for name, tensor in pretrainer.model.encoder.state_dict().items()}
    with torch.no_grad():  # "pretraining": the saved weights are no longer the initial ones
        for p in pretrainer.model.parameters():
            p.add_(0.5)
    folder = save_pretrained(pretrainer.model, tmp_path / "run", tokenizer=WordPieceTokenizer(VOCAB))
    (folder / "run.json").write_text(json.dumps({"settings": settings.to_dict(), "config": config.to_dict()}))
    backbone = load_backbone(folder)
    seed, line = init_seed(folder)
    assert seed == 7 and "seed 7" in line
    twin, tokenizer = untrained_twin(backbone, seed)
    assert twin.config == backbone[0].config and tokenizer is backbone[1] and tokenizer.id_to_token == VOCAB
    state = twin.state_dict()
    assert state.keys() == start.keys() and all(torch.equal(state[name], start[name]) for name in start)
    assert not torch.equal(backbone[0].state_dict()["embeddings.word_embeddings.weight"], start["embeddings.word_embeddings.weight"])


def test_a_folder_without_a_recorded_seed_gives_a_twin_of_seed_0_and_says_so(tmp_path):
    seed, line = init_seed(checkpoint(tmp_path / "hf-like", 3))
    assert seed == 0 and "no run.json" in line and "seed 0" in line


# --- pretrained against untrained, in one command ----------------------------------------------------


def test_against_untrained_gains_per_seed_and_over_pretraining_seeds_and_a_rerun_reads_both_sides_back(tmp_path, capsys):
    glue = task_folder(tmp_path / "glue")
    inits = [checkpoint(tmp_path / f"pre-{seed}", 100 + seed, run_seed=seed) for seed in (0, 1)]
    before = {path: path.read_bytes() for init in inits for path in sorted(init.iterdir())}
    out = tmp_path / "out"
    argv = ["--init", *map(str, inits), "--glue", str(glue), "--against-untrained", "--seeds", "0", "1", "--glue-recipe", "bert",
            "--out", str(out), *STEPS]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert all(f"untrained twin of {init}: its config and tokenizer, the weights of seed {seed}" in printed
               for seed, init in enumerate(inits))
    result = json.loads((out / "glue.json").read_text())
    per_checkpoint = []
    for seed, init in enumerate(inits):
        entry = result["checkpoints"][init.name]
        assert entry["untrained"]["init_seed"] == seed
        gains = {}
        for s in (0, 1):
            pre = eval_json(out / init.name / "RTE" / f"seed-{s}")["accuracy"]
            un = eval_json(out / init.name / "untrained" / "RTE" / f"seed-{s}")
            assert un["args"]["untrained_seed"] == seed and un["args"]["init"] == str(init)
            gains[str(s)] = pre - un["accuracy"]
        assert entry["gains"]["tasks"]["RTE"]["accuracy"]["seeds"] == gains
        assert entry["gains"]["tasks"]["RTE"]["accuracy"]["median"] == statistics.median(gains.values())
        assert entry["gains"]["averages"]["glue_score"]["median"] == pytest.approx(100 * statistics.median(gains.values()))
        per_checkpoint.append(statistics.median(gains.values()))
    over = result["gains"]["tasks"]["RTE"]["accuracy"]
    half = 12.706205 * statistics.stdev(per_checkpoint) / math.sqrt(2)  # t(0.975, 1)
    assert over["mean"] == pytest.approx(statistics.mean(per_checkpoint)) and over["n"] == 2
    assert (over["low"], over["high"]) == (pytest.approx(over["mean"] - half), pytest.approx(over["mean"] + half))
    assert "pretrained - untrained" in printed and "95% interval" in printed
    assert {path: path.read_bytes() for init in inits for path in sorted(init.iterdir())} == before  # only read

    models = sorted(out.rglob("model.safetensors"))
    stamps = [path.stat().st_mtime_ns for path in models]
    assert len(models) == 8  # 2 checkpoints x (pretrained, untrained) x 2 seeds
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("finished earlier with these settings") == 8 and "untrained RTE seed 1: finished earlier" in printed
    assert [path.stat().st_mtime_ns for path in models] == stamps
    assert json.loads((out / "glue.json").read_text())["gains"] == result["gains"]


def test_the_t_quantile_is_students():
    known = {1: 12.706205, 2: 4.302653, 10: 2.228139, 30: 2.042272, 31: 2.039513, 40: 2.021075, 60: 2.000298,
             120: 1.979930, 1000: 1.962339}  # scipy.stats.t.ppf(0.975, df)
    assert all(t975(df) == pytest.approx(value, rel=1e-4) for df, value in known.items())


# --- GLUE's training text, for pretraining ----------------------------------------------------------------


def test_the_training_text_holds_every_training_text_and_no_dev_or_test_text(tmp_path, capsys):
    glue = write_glue(tmp_path / "glue", n_train=6, n_dev=3, n_test=3)
    planted = set()
    for name, task in GLUE_TASKS.items():  # a unique sentence in every dev and test file, in the first row's first text
        for file, split in [(task.dev, "dev"), *([(task.mismatched, "dev")] if task.mismatched else []),
                            *((test, "test") for test, _ in task.tests)]:
            path, marker = glue / name / file, f"marker {name} {file} zebra"
            first_text = layout(name, split, 3, seed=seed_of(file))[1][0][0]
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            row = next(i for i, line in enumerate(lines) if first_text in line.rstrip("\n").split("\t"))
            lines[row] = "\t".join(f"{cell} {marker}" if cell == first_text else cell for cell in lines[row].rstrip("\n").split("\t")) + "\n"
            path.write_text("".join(lines), encoding="utf-8")
            columns = task.columns if split == "dev" else task.columns._replace(names=None)
            assert marker in " ".join(read_task(path, labelled=split == "dev", columns=columns).texts)  # a reader would see it
            planted.add(marker)
    documents = list(training_text(glue))
    texts = [text for document in documents for text in document]
    expected = []
    for name, task in GLUE_TASKS.items():
        train = read_task(glue / name / "train.tsv", columns=task.columns)
        expected += [text for i, a in enumerate(train.texts) for text in [a, *([] if train.pairs is None else [train.pairs[i]])]]
    assert texts == expected and len(documents) == 6 * len(GLUE_TASKS)  # one document per training row, in order
    assert not any(marker in text for marker in planted for text in texts)
    assert not any(label in texts for label in ("entailment", "not_entailment", "4.500", "0", "1"))

    path = tmp_path / "glue-train.txt"
    assert main(["--glue", str(glue), "--write-training-text", str(path)]) == 0
    assert f"{len(documents)} documents" in capsys.readouterr().out
    written = path.read_text(encoding="utf-8")
    assert not any(marker in written for marker in planted)
    assert [text for document in read_documents([path]) for text in document] == texts  # the corpus reader's view


def test_an_existing_training_text_file_is_kept_unless_overwrite_is_given(tmp_path, capsys):
    glue, path = write_glue(tmp_path / "glue", n_train=4, n_dev=2, n_test=2), tmp_path / "corpus.txt"
    path.write_text("the corpus a run was pretrained on\n", encoding="utf-8")
    argv = ["--glue", str(glue), "--glue-tasks", "RTE", "--write-training-text", str(path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"python -m minibert.finetune: error: --write-training-text {path} already exists; "
                                f"pass --overwrite to replace it, or name another file"]
    assert path.read_text(encoding="utf-8") == "the corpus a run was pretrained on\n"
    assert main([*argv, "--overwrite"]) == 0
    assert "4 documents" in capsys.readouterr().out
    assert [text for document in read_documents([path]) for text in document] == [
        text for document in training_text(glue, ["RTE"]) for text in document]
    assert main(["--glue", str(glue), "--write-training-text", str(tmp_path / "glue.txt"), "--overwrite"]) == 0  # none there yet
    (tmp_path / "folder.txt").mkdir()
    assert main(["--glue", str(glue), "--write-training-text", str(tmp_path / "folder.txt"), "--overwrite"]) == 2
    assert "is a folder" in capsys.readouterr().err
