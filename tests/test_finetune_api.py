"""minibert.finetune(...): each flag of `python train.py finetune` a keyword, resolved and checked as the
flag is (one FinetuneSettings), and a run that hands back its OUT and eval.json's scores; the
subpackage of the same name still serves its names."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import minibert
from minibert.finetune.api import resolve
from minibert.finetune.cli import PROG, build_parser, main, parse
from minibert.finetune.settings import FLAGS, FinetuneSettings
from minibert.runs.cli import one_line
from test_finetune import minibert_dir, one_thread, toy  # noqa: F401 (fixtures)

DATA = ["--init", "ckpt", "--train", "train.tsv", "--dev", "dev.tsv", "--out", "out"]
DATA_KEYWORDS = dict(init="ckpt", train="train.tsv", dev="dev.tsv", out="out")


@pytest.mark.parametrize("flags, keywords", [
    ([], {}),
    (["--steps", "5", "--lr", "1e-3", "--eval-every", "epoch", "--patience", "2", "--pooling", "mean"],
     dict(steps=5, lr=1e-3, eval_every="epoch", patience=2, pooling="mean")),
    (["--glue-recipe", "bert", "--epochs", "2", "--text-columns", "question", "sentence", "--eval-every", "10", "--compile"],
     dict(recipe="bert", epochs=2, text_columns=("question", "sentence"), eval_every=10, compile=True)),
    (["--teacher", "t", "--alpha", "1", "--transfer", "more.txt", "--max-len", "32", "--seed", "3"],
     dict(teacher=Path("t"), alpha=1, transfer="more.txt", max_len=32, seed=3)),
])
def test_keywords_give_the_settings_the_flags_give(flags, keywords):
    """Paths as Path objects, a number as an int, a tuple: each as the parsed flag holds it (repr: 2.0 as 2.0)."""
    assert repr(resolve({**DATA_KEYWORDS, "init": Path("ckpt"), **keywords})) == repr(parse([*DATA, *flags]))


def test_a_sweeps_keywords_give_the_settings_its_flags_give():
    flags = ["--init", "a", "b", "--glue", "glue", "--glue-tasks", "RTE", "--seeds", "0", "1", "--against-untrained", "--out", "o"]
    keywords = dict(init=["a", "b"], glue="glue", glue_tasks="RTE", seeds=[0, 1], against_untrained=True, out="o")
    assert resolve(keywords) == parse(flags)


def test_each_flag_is_a_field_with_the_fields_default():
    """The defaults live in FinetuneSettings alone: the parser's are its fields'."""
    parser = build_parser()
    assert {field.name for field in FLAGS} | {"debug", "help"} == {action.dest for action in parser._actions if action.option_strings}
    assert all(parser.get_default(field.name) == field.default for field in FLAGS)
    assert parse([]) == FinetuneSettings()


@pytest.mark.parametrize("keyword, hint", [
    ("step", "did you mean steps?"),
    ("max-len", "did you mean max_len"),
    ("learning_rate", "each keyword is a flag of python train.py finetune --help, in snake_case"),
    ("recipe_description", "each keyword is a flag"),  # a run's own value, no flag: not a keyword
])
def test_an_unknown_keyword_is_one_line_naming_the_close_matches(keyword, hint, tmp_path):
    with pytest.raises(TypeError, match=f"unknown keyword '{keyword}'; {hint}") as raised:
        minibert.finetune(**DATA_KEYWORDS, **{keyword: 3})
    assert "\n" not in str(raised.value) and str(raised.value).startswith("minibert.finetune got")


@pytest.mark.parametrize("keywords, says", [
    (dict(steps="200"), "steps (--steps) takes an integer or None, got '200'"),
    (dict(lr=True), "lr (--lr) takes a number or None, got True"),
    (dict(seeds=[0, 1.5]), "seeds (--seeds) takes an integer or a list of integers or None, got [0, 1.5]"),
    (dict(glue_tasks=3), "glue_tasks (--glue-tasks) takes a name or a list of names or None, got 3"),
    (dict(eval_every=2.5), "eval_every (--eval-every) takes a number of steps or 'epoch' or None, got 2.5"),
    (dict(seed=None), "seed (--seed) takes an integer, got None"),
])
def test_a_keyword_of_the_wrong_kind_says_what_it_takes(keywords, says):
    with pytest.raises(TypeError) as raised:
        resolve(keywords)
    assert str(raised.value) == f"minibert.finetune: {says}"


@pytest.mark.parametrize("flags, keywords", [
    (["--steps", "0"], dict(steps=0)),
    (["--steps", "5", "--epochs", "1"], dict(steps=5, epochs=1)),
    (["--recipe", "fast"], dict(recipe="fast")),
    (["--eval-every", "0"], dict(eval_every=0)),
    (["--eval-every", "weekly"], dict(eval_every="weekly")),
    (["--patience", "2"], dict(patience=2)),
    (["--seeds", "0", "1"], dict(seeds=[0, 1])),
    (["--alpha", "0.5"], dict(alpha=0.5)),
])
def test_a_bad_value_is_the_flags_own_one_line_error(flags, keywords, tmp_path, capsys, monkeypatch):
    """Checked by the same code (FinetuneSettings.check), before anything is read or OUT is made."""
    monkeypatch.chdir(tmp_path)
    assert main([*DATA, *flags]) == 2
    printed = capsys.readouterr().err.strip()
    with pytest.raises(ValueError) as raised:
        minibert.finetune(**DATA_KEYWORDS, **keywords)
    assert printed == f"{PROG}: error: {one_line(raised.value)}"
    assert not (tmp_path / "out").exists()


def test_a_sweeps_run_varies_its_settings_without_touching_the_commands():
    settings = parse([*DATA, "--lr", "1e-3"])
    run = settings.replace(seed=4, init="ckpt")
    assert (settings.seed, settings.init, run.seed, run.lr) == (0, ["ckpt"], 4, 1e-3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 4


def test_a_tiny_fine_tune_hands_back_its_out_and_eval_json(minibert_dir, toy, tmp_path):  # noqa: F811 (fixtures)
    train, dev = toy
    result = minibert.finetune(init=minibert_dir, train=train, dev=dev, out=tmp_path / "out", steps=2, batch_size=8, device="cpu")
    assert result.out == tmp_path / "out" and (result.out / "model.safetensors").is_file()
    report = json.loads((result.out / "eval.json").read_text())
    assert result.metrics == report and result.metrics["steps"] == 2 and "accuracy" in result.metrics
    assert report["args"]["init"] == str(minibert_dir) and report["args"]["batch_size"] == 8
    assert "untrained_seed" not in report["args"] and "overwrite" not in report["args"]  # a sweep's values in a sweep's runs alone
    assert minibert.finetune.load_classifier(result.out).labels.names == ["negative", "positive"]


def test_the_subpackage_keeps_its_names():
    from minibert.finetune import load_classifier, main as command

    assert minibert.finetune.load_classifier is load_classifier and minibert.finetune.main is command
    assert callable(minibert.finetune) and minibert.finetune.FinetuneResult is minibert.FinetuneResult
