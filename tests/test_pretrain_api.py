"""minibert.pretrain(...): each flag of `python train.py` a keyword, resolved and checked as the flag is,
and a run that hands back its OUT and how it ended."""

from __future__ import annotations

import json

import pytest

import minibert
from minibert.runs.api import resolve
from minibert.runs.cli import main, one_line, parse
from minibert.runs.metrics import MetricsLog
from tiny_run import tiny_args, tiny_keywords, write_corpus


@pytest.mark.parametrize("variant", ["bert", "albert", "electra"])
def test_the_tiny_keywords_give_the_settings_the_tiny_flags_give(variant, tmp_path):
    """Paths given as Path objects and one corpus file as a string: the flags' strings and list."""
    corpus, cache, out = tmp_path / "corpus.txt", tmp_path / "cache", tmp_path / "out"
    settings, overrides, _ = parse(tiny_args(variant, corpus, cache, out))
    assert resolve(tiny_keywords(variant, corpus, cache, out)) == (settings, overrides)
    assert settings.data == [str(corpus)] and settings.steps == 20


@pytest.mark.parametrize("flags, keywords", [
    ([], {}),  # the default run: albert
    (["--variant", "bert", "--no-nsp", "--lr", "1e-3", "--clip", "2"], dict(variant="bert", layout="full_sentences", lr=1e-3, clip=2)),
    (["--variant", "roberta", "--adam-betas", "0.9", "0.98", "--replace-probs", "0.8", "0.1", "0.1", "--no-pooler"],
     dict(variant="roberta", adam_betas=(0.9, 0.98), replace_probs=[0.8, 0.1, 0.1], pooler=False)),
    (["--variant", "albert", "--embedding-size", "none", "--budget", "5m", "--compile"],
     dict(variant="albert", embedding_size=None, budget="5m", compile=True)),
])
def test_keywords_give_the_settings_the_flags_give(flags, keywords):
    """Each keyword the flag's value: the variant's defaults beneath, numbers and sequences as the flag parses them."""
    settings, overrides, _ = parse(flags)
    assert repr(resolve(keywords)) == repr((settings, overrides))  # 2.0 as the flag's 2.0, a list as its list


def test_the_variants_defaults_lie_beneath_the_keywords():
    settings, overrides = resolve(dict(variant="bert", steps=7, hidden_size=64))
    assert (settings.masking, settings.steps, settings.mask_prob, overrides) == ("static", 7, 0.4, {"hidden_size": 64})


@pytest.mark.parametrize("keyword, hint", [
    ("step", "did you mean steps?"),
    ("seq-len", "did you mean seq_len"),
    ("sop", "pass layout='sop'"),
    ("colour", "each keyword is a flag of python train.py --help, in snake_case"),
])
def test_an_unknown_keyword_is_one_line_naming_the_close_matches(keyword, hint, tmp_path):
    with pytest.raises(TypeError, match=f"unknown keyword '{keyword}'; {hint}") as raised:
        minibert.pretrain("bert", out=tmp_path / "out", **{keyword: 3})
    assert "\n" not in str(raised.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("keywords, says", [
    (dict(steps="200"), "steps (--steps) takes an integer, got '200'"),
    (dict(steps=2.5), "steps (--steps) takes an integer, got 2.5"),
    (dict(lr=True), "lr (--lr) takes a number, got True"),
    (dict(data=[]), "data (--data) takes a path or a list of paths or None, got []"),
    (dict(compile="yes"), "compile (--compile) takes True or False, got 'yes'"),
    (dict(adam_betas=0.9), "adam_betas (--adam-betas) takes two numbers, got 0.9"),
    (dict(seed=None), "seed (--seed) takes an integer, got None"),
])
def test_a_keyword_of_the_wrong_kind_says_what_it_takes(keywords, says):
    with pytest.raises(TypeError) as raised:
        resolve(keywords)
    assert str(raised.value) == f"minibert.pretrain: {says}"


@pytest.mark.parametrize("flags, keywords", [
    (["--steps", "0"], dict(steps=0)),
    (["--mask-prob", "1.5"], dict(mask_prob=1.5)),
    (["--num-heads", "3"], dict(num_heads=3)),
    (["--variant", "electra", "--stop-at", "5", "--steps", "4"], dict(variant="electra", stop_at=5, steps=4)),
])
def test_a_bad_value_is_the_flags_own_one_line_error(flags, keywords, tmp_path, capsys, monkeypatch):
    """Checked by the same code, before any data is read or OUT is made."""
    monkeypatch.chdir(tmp_path)
    assert main([*flags, "--out", "out"]) == 2
    printed = capsys.readouterr().err.strip()
    with pytest.raises(ValueError) as raised:
        minibert.pretrain(**keywords, out="out")
    assert printed == f"train.py: error: {one_line(raised.value)}"
    assert not (tmp_path / "out").exists()


def test_a_tiny_run_hands_back_its_out_and_final_metrics(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt")
    result = minibert.pretrain(**tiny_keywords("bert", corpus, tmp_path / "cache", tmp_path / "out", steps=4))
    records = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert result.out == tmp_path / "out" and (result.out / "run.json").is_file()
    assert result.metrics == records[-1] and result.metrics["step"] == 4
    assert {"loss", "eval_mlm_accuracy", "eval_nsp_accuracy"} <= set(result.metrics)  # the final held-out evaluation


def test_the_last_record_skips_a_line_cut_short(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    assert log.last() == {}
    log.write({"step": 5, "loss": 1.0})
    with open(log.path, "a") as f:
        f.write('{"step": 1')  # cut short by a crash
    assert log.last() == {"step": 5, "loss": 1.0}
