"""Question answering's recipes: each family's SQuAD settings as released, value by value; the
row a QA fine-tune takes and the line that names it."""

from __future__ import annotations

import json
import math

import pytest

from minibert import ModelConfig
from minibert.finetune import main
from minibert.finetune.recipes import recipe_for

from test_question_answering import QA_FLAGS, backbone, squad_file  # noqa: F401 (a fixture)

ELECTRA = "Clark et al. 2020 (ELECTRA), appendix table; google-research/electra configure_finetuning.py (squad)"
BERT = "google-research/bert README.md, SQuAD 1.1 with BERT-base"
ALBERT = "Lan et al. 2020 (ALBERT), Table 14, SQuAD v1.1"
ALBERT2 = "Lan et al. 2020 (ALBERT), Table 14, SQuAD v2.0 (8,144 steps of 48: 3 epochs of 130,319 questions; 814 warm-up)"
BERT2 = "google-research/bert README.md, SQuAD 2.0 with BERT-large"
ROBERTA = "Liu et al. 2019 (RoBERTa), Table 10, SQuAD"
DISTILBERT = "transformers examples/research_projects/distillation/run_squad_w_distillation.py, its argparse defaults"

# (recipe, the width of the release it aims at, setting, the release's value, where it says so)
RELEASED = [
    *[("electra", width, "lr", lr, ELECTRA) for width, lr in ((256, 3e-4), (768, 1e-4), (1024, 5e-5))],
    *[("electra", width, "layer_decay", decay, ELECTRA) for width, decay in ((256, 0.8), (768, 0.8), (1024, 0.9))],
    ("electra", 256, "epochs", 2.0, ELECTRA), ("electra", 256, "batch_size", 32, ELECTRA),
    ("electra", 256, "weight_decay", 0.0, ELECTRA), ("electra", 256, "dropout", 0.1, ELECTRA),
    ("electra", 256, "windows", 512, ELECTRA),
    ("bert", 768, "lr", 3e-5, BERT), ("bert", 768, "batch_size", 12, BERT), ("bert", 768, "epochs", 2.0, BERT),
    ("bert", 768, "layer_decay", None, BERT), ("bert", 768, "weight_decay", 0.01, BERT), ("bert", 768, "windows", 384, BERT),
    ("albert", 768, "lr", 5e-5, ALBERT), ("albert", 768, "batch_size", 48, ALBERT), ("albert", 768, "epochs", 2.0, ALBERT),
    ("albert", 768, "dropout", 0.0, ALBERT), ("albert", 768, "windows", 384, ALBERT),
    ("roberta", 1024, "lr", 1.5e-5, ROBERTA), ("roberta", 1024, "batch_size", 48, ROBERTA),
    ("roberta", 1024, "epochs", 2.0, ROBERTA), ("roberta", 1024, "weight_decay", 0.01, ROBERTA),
    ("roberta", 1024, "windows", 512, ROBERTA), ("roberta", 1024, "warmup", 0.06, ROBERTA),
    ("bert", 768, "warmup", 0.1, BERT), ("albert", 768, "warmup", 0.1, ALBERT),  # ALBERT: 365 warm-up steps of 3,649
    ("electra", 256, "warmup", 0.1, ELECTRA), ("distilbert", 768, "warmup", 0.0, DISTILBERT),
    ("distilbert", 768, "lr", 5e-5, DISTILBERT), ("distilbert", 768, "batch_size", 8, DISTILBERT),
    ("distilbert", 768, "epochs", 3.0, DISTILBERT), ("distilbert", 768, "weight_decay", 0.0, DISTILBERT),
    ("distilbert", 768, "windows", 384, DISTILBERT),
]
# SQuAD 2.0: (recipe, width, setting, value, source) where the family published a row of its own
RELEASED_2 = [
    ("bert", 768, "lr", 3e-5, BERT2), ("bert", 768, "batch_size", 24, BERT2), ("bert", 768, "epochs", 2.0, BERT2),
    ("bert", 768, "windows", 384, BERT2), ("bert", 768, "weight_decay", 0.01, BERT2), ("bert", 768, "warmup", 0.1, BERT2),
    ("albert", 768, "lr", 3e-5, ALBERT2), ("albert", 768, "batch_size", 48, ALBERT2), ("albert", 768, "epochs", 3.0, ALBERT2),
    ("albert", 768, "windows", 512, ALBERT2), ("albert", 768, "dropout", 0.0, ALBERT2), ("albert", 768, "warmup", 0.1, ALBERT2),
]


def config_of(width: int) -> ModelConfig:
    return ModelConfig(vocab_size=64, hidden_size=width, num_layers=1, num_heads=4, intermediate_size=4 * width)


ROWS = [("1.1", *row) for row in RELEASED] + [("2.0", *row) for row in RELEASED_2]


@pytest.mark.parametrize("version, name, width, setting, value, source", ROWS,
                         ids=[f"{version}-{name}-{width}-{setting}" for version, name, width, setting, _, _ in ROWS])
def test_each_squad_row_gives_its_release_value(version, name, width, setting, value, source):
    recipe = recipe_for(name, config_of(width), squad=version)
    found = recipe.windows if setting == "windows" else recipe.values(pooled=False)[setting]
    assert found == (pytest.approx(value, rel=1e-12) if isinstance(value, float) else value), \
        f"--recipe {name} on SQuAD {version} sets {setting} {found!r}; its release's is {value!r} ({source})"


@pytest.mark.parametrize("name, width", [("electra", 256), ("roberta", 1024), ("distilbert", 768)])
def test_a_family_with_one_squad_row_takes_it_for_2_0_and_says_so(name, width):
    one, two = recipe_for(name, config_of(width), squad="1.1"), recipe_for(name, config_of(width), squad="2.0")
    assert one.values(pooled=False) == two.values(pooled=False) and one.windows == two.windows
    assert two.row.startswith(one.row) and "for SQuAD 2.0 too" in two.row and "for SQuAD 2.0 too" not in one.row


@pytest.mark.parametrize("name", ["bert", "albert"])
def test_a_family_with_a_squad_2_row_names_it_in_the_line(name):
    line = recipe_for(name, config_of(768), squad="2.0").line([], glue=False)
    assert "SQuAD 2.0 row" in line and "SQuAD 1.1" not in line.split(": ")[0]


def test_a_narrow_encoder_takes_electras_small_row_on_squad_as_on_glue():
    narrow = recipe_for("electra", config_of(32), squad="1.1")
    assert (narrow.lr, narrow.layer_decay, narrow.epochs) == (3e-4, 0.8, 2.0) and "H = 32 takes it" in narrow.row
    assert recipe_for("electra", config_of(32)).epochs == 3.0  # a sentence task keeps its 3


def test_grid_has_no_squad_row_and_the_squad_only_recipes_no_sentence_row():
    with pytest.raises(ValueError, match="published no SQuAD settings") as caught:
        recipe_for("grid", config_of(32), squad="1.1")
    assert "\n" not in str(caught.value)
    for name in ("albert", "roberta", "distilbert"):
        with pytest.raises(ValueError, match="for question answering alone"):
            recipe_for(name, config_of(32))


def test_a_qa_fine_tune_takes_the_squad_row_and_says_which(backbone, tmp_path, capsys):  # noqa: F811
    """No --steps, --epochs or --lr: ELECTRA-Small's SQuAD row, 2 epochs of the windows at lr 3e-4
    (a sentence task would take 3 epochs)."""
    squad_file(tmp_path / "train.json")
    flags = [flag for flag in QA_FLAGS if flag not in ("--steps", "6", "--lr", "1e-3")]
    common = ["--init", str(backbone), "--train", str(tmp_path / "train.json"), "--dev", str(tmp_path / "train.json"),
              "--device", "cpu", *flags]
    assert main([*common, "--out", str(tmp_path / "electra")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("recipe ")]
    assert len(lines) == 1 and "ELECTRA-Small's SQuAD row" in lines[0] and "2 epochs" in lines[0]
    assert "Clark et al. 2020" in lines[0] and "windows of 512 tokens" in lines[0]
    report = json.loads((tmp_path / "electra" / "eval.json").read_text())
    assert (report["args"]["epochs"], report["args"]["lr"], report["args"]["layer_decay"]) == (2.0, 3e-4, 0.8)
    assert report["steps"] == 2 * math.ceil(report["windows"] / 8)  # every question answered: train's windows are dev's
    assert report["recipe"]["row"].startswith("ELECTRA-Small's SQuAD row") and report["recipe"]["release_max_len"] == 512

    assert main([*common, "--steps", "1", "--recipe", "albert", "--out", str(tmp_path / "albert")]) == 0
    assert "ALBERT's SQuAD 1.1 row" in capsys.readouterr().out
    args = json.loads((tmp_path / "albert" / "eval.json").read_text())["args"]
    assert (args["lr"], args["dropout"], args["weight_decay"], args["batch_size"]) == (5e-5, 0.0, 0.01, 8)  # --batch-size given

    squad_file(tmp_path / "train2.json", version="v2.0", impossible=True)  # questions without an answer: SQuAD 2.0's row
    two = ["--init", str(backbone), "--train", str(tmp_path / "train2.json"), "--dev", str(tmp_path / "train2.json"),
           "--device", "cpu", *flags, "--steps", "1", "--recipe", "albert", "--out", str(tmp_path / "albert2")]
    assert main(two) == 0
    assert "ALBERT's SQuAD 2.0 row" in capsys.readouterr().out
    report = json.loads((tmp_path / "albert2" / "eval.json").read_text())
    assert (report["args"]["lr"], report["args"]["dropout"]) == (3e-5, 0.0)  # --steps given: the recipe's epochs unused
    assert (report["recipe"]["epochs"], report["recipe"]["release_max_len"]) == (3.0, 512)
