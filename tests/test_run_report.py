"""What a run shows and checks about itself: evaluations on screen, the default band and the
warning behind it, curves.png, the cost of a corpus before the work, a full disk in one line."""

from __future__ import annotations

import errno
import json
import sys

import pytest
import torch

from minibert.corpus.pipeline import build_pretraining_data
from minibert.operations.checkpoint import Checkpoints
from minibert.runs import report
from minibert.runs.cli import main
from minibert.runs.curves import RunPicture, draw_curves
from minibert.runs.report import Band, BehindWarning, band_for, evaluation_line
from minibert.variants import VARIANTS, with_layout
from tiny_run import tiny_args, write_corpus

BASELINES = {"baseline_unigram_accuracy": 0.048, "baseline_neighbour_accuracy": 0.151}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(root / "animals.txt"), root / "cache"


# --- evaluations on screen ------------------------------------------------------------------------

def test_an_evaluation_is_one_line_with_its_baselines():
    line = evaluation_line({"step": 250, "elapsed_s": 65.2, "eval_mlm_accuracy": 0.1894, "eval_sop_accuracy": 0.612,
                            "eval_loss": 6.12, "loss": 6.3}, BASELINES)
    assert line.split() == ["step", "250", "1m05s", "held-out", "mlm_accuracy", "0.189", "(unigram", "0.048,",
                            "neighbours", "0.151)", "sop_accuracy", "0.612", "loss", "6.120"]


def test_every_evaluation_stays_on_screen_step_0_included(corpus, tmp_path, capsys):
    assert main(tiny_args("albert", *corpus, tmp_path / "out", 20)) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "held-out" in line and line.startswith("step")]
    assert [int(line.split()[1]) for line in lines] == [0, 10, 20]  # --eval-every 10 and the end
    assert all("mlm_accuracy" in line and "(unigram" in line for line in lines)


# --- the default band and the one warning ---------------------------------------------------------

BAND = Band("albert", "eval_mlm_accuracy", [0, 250, 500, 750], [0.0, 0.10, 0.15, 0.18], [0.005, 0.01, 0.01, 0.01])


def test_a_band_interpolates_between_its_evaluations_and_says_nothing_outside():
    assert BAND.at(500) == pytest.approx((0.14, 0.15, 0.16))
    assert BAND.at(375) == pytest.approx((0.115, 0.125, 0.135))
    assert BAND.at(800) is None


def test_a_share_s_band_is_drawn_within_0_and_1():
    """An accuracy's band, wide from a few seeds' spread, is drawn (curves, explore) inside [0, 1]."""
    accuracy = Band("electra", "eval_rtd_accuracy", [0, 100], [0.9, 0.1], [0.3, 0.3])
    assert accuracy.edges() == (pytest.approx([0.6, 0.0]), pytest.approx([1.0, 0.4]))
    loss = Band("electra", "eval_loss", [0, 100], [0.2, 0.1], [0.3, 0.3])
    assert loss.edges() == (pytest.approx([-0.1, -0.2]), pytest.approx([0.5, 0.4]))  # not a share: as measured


def test_behind_the_band_twice_in_a_row_is_one_warning_naming_the_changes(capsys):
    """A synthetic metrics log: once below the band is noise, twice in a row a trend."""
    warning = BehindWarning(BASELINES, BAND, ["--lr 1e-05"])
    for step, accuracy in ((0, 0.0), (250, 0.085), (500, 0.15), (625, 0.12)):  # below, back inside, below once
        warning.check({"step": step, "eval_mlm_accuracy": accuracy}, step / 750)
    assert capsys.readouterr().err == ""
    warning.check({"step": 750, "eval_mlm_accuracy": 0.13}, 1.0)  # below a second time in a row
    warning.check({"step": 800, "eval_mlm_accuracy": 0.10}, 1.0)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "step 750" in err and "0.050 behind" in err and "--lr 1e-05" in err
    assert "second evaluation in a row" in err and "0.170 to 0.190" in err


def test_without_a_band_it_is_the_plateau_warning(capsys):
    warning = BehindWarning(BASELINES)
    warning.check({"step": 100, "eval_mlm_accuracy": 0.05}, 0.3)  # early: too soon to tell
    warning.check({"step": 400, "eval_mlm_accuracy": 0.06}, 0.6)
    warning.check({"step": 500, "eval_mlm_accuracy": 0.06}, 0.7)
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and "unigram plateau" in err


@pytest.fixture
def stored_band(tmp_path, monkeypatch):
    """default_curves.json holding albert's band (as bench/default_curves.py writes it)."""
    curve = {"steps": BAND.steps, "runs": [BAND.mean], "mean": BAND.mean, "tolerance": BAND.tolerance}
    path = tmp_path / "default_curves.json"
    path.write_text(json.dumps({"variants": {"albert": {"metrics": {"eval_mlm_accuracy": curve}}}}))
    monkeypatch.setattr(report, "DEFAULT_CURVES", path)

def test_distilberts_band_was_measured_with_the_teacher_of_berts_band():
    """distilbert's default run distils the seed-0 bert run: when bert's band is measured again
    (another teacher), distilbert's must be too, or a README user's distilbert run is held
    against a band it cannot reach (python bench/default_curves.py --variants distilbert)."""
    stored = json.loads(report.DEFAULT_CURVES.read_text())["variants"]
    teacher, bert = stored["distilbert"]["teacher"], stored["bert"]["metrics"]
    assert teacher["step"] == bert["eval_mlm_accuracy"]["steps"][-1]
    differing = [name for name in bert if teacher[name] != bert[name]["runs"][0][-1]]
    assert not differing, f"distilbert's band was measured with another bert teacher ({differing} differ)"



@pytest.mark.parametrize("changes, overrides, held_against, named", [
    ({}, {}, True, ""),
    ({"lr": 1e-5}, {}, True, "--lr 1e-05"),  # whatever else a run changes, it is held against the band
    ({"seed": 3, "batch_size": 16, "eval_every": 100}, {}, True, "--seed 3"),  # the held-out set does not move
    ({}, {"num_layers": 4}, True, "--num-layers 4"),
    ({"seq_len": 128}, {}, False, "--seq-len 128"),  # another held-out set: no band, and the run says why
    ({"data": ["corpus.txt"]}, {}, False, "--data corpus.txt"),
    ({"max_span": 1}, {}, False, "--max-span 1"),
])
def test_which_runs_are_held_against_the_default_band(stored_band, changes, overrides, held_against, named):
    variant = VARIANTS["albert"]
    settings = with_layout(variant, variant.default_settings(**changes))
    band, why_not = band_for(variant, settings, overrides, vocab_size=8000)
    assert (band is not None) == held_against
    if held_against:
        assert why_not == "" and (not named or named in report.differences(variant, settings, overrides))
    else:
        assert named in why_not
    assert band_for(variant, settings, overrides, vocab_size=4000)[0] is None  # another vocabulary: other tokens


def test_the_held_out_batches_do_not_depend_on_the_seed_or_the_batch_size(corpus, tmp_path):
    common = dict(vocab_size=400, seq_len=32, layout="sop", masking="dynamic", dupe_factor=1, mask_prob=0.4,
                  replace_probs=(0.8, 0.1, 0.1), whole_word=False, max_span=1, short_seq_prob=0.1, data_dir=corpus[1],
                  mask_count="bernoulli", max_predictions=None, mask_smoothing=0.0)
    first = build_pretraining_data(corpus[0], **common, batch_size=8, seed=0)
    second = build_pretraining_data(corpus[0], **common, batch_size=4, seed=7)
    assert not torch.equal(next(iter(first.train))["input_ids"][:4], next(iter(second.train))["input_ids"])
    for a, b in zip(first.eval, second.eval, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --- the pictures ------------------------------------------------------------------------------------

def fake_run(folder, variant="albert", shift=0.0, **settings):
    folder.mkdir(parents=True)
    records = [{"step": 0, "elapsed_s": 0.0, **BASELINES, "eval_mlm_accuracy": 0.0, "eval_loss": 9.0}]
    records += [{"step": s, "loss": 9 - s / 100 + shift, "eval_mlm_accuracy": s / 5000 - shift, "eval_loss": 9 - s / 100}
                for s in (250, 500, 750)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    full = with_layout(VARIANTS[variant], VARIANTS[variant].default_settings(**settings))
    (folder / "run.json").write_text(json.dumps({"settings": full.to_dict(), "model_overrides": {},
                                                 "config": {"vocab_size": 8000}}))
    return folder


def test_curves_overlay_runs_with_the_default_band(stored_band, tmp_path):
    pytest.importorskip("matplotlib")
    runs = [fake_run(tmp_path / "ours"), fake_run(tmp_path / "low-lr", shift=0.03, lr=1e-5)]
    out = draw_curves(runs, tmp_path / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert main_minibert(["curves", *map(str, runs), "--out", str(tmp_path / "two.png"), "--metric", "eval_mlm_accuracy"]) == 0


def test_a_run_read_back_from_its_folder_gets_its_band(stored_band, tmp_path):
    """curves.png holds a finished run against the band from its run.json, where tuples come back as lists."""
    from minibert.runs.curves import run_band

    assert set(run_band(fake_run(tmp_path / "ours", lr=1e-5))) == {"eval_mlm_accuracy"}
    assert run_band(fake_run(tmp_path / "other-set", max_span=1)) == {}


def main_minibert(argv):
    from minibert.__main__ import main as minibert_main

    return minibert_main(argv)


def test_curves_command_errors_are_one_line(tmp_path, capsys):
    assert main_minibert(["curves", str(tmp_path / "nothing"), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert "holds no metrics.jsonl" in err and err.count("\n") == 1


def test_without_matplotlib_a_run_says_once_how_to_get_the_picture(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    picture = RunPicture(fake_run(tmp_path / "run"), "a run")
    picture.draw()
    picture.draw()
    out = capsys.readouterr().out
    assert out.count("pip install matplotlib") == 1 and not (tmp_path / "run" / "curves.png").exists()


# --- a corpus's cost, a full disk --------------------------------------------------------------------

def test_a_corpus_says_what_it_costs_first_and_one_the_disk_cannot_hold_is_refused(corpus, tmp_path, capsys, monkeypatch):
    big = tmp_path / "big.txt"
    big.write_text(corpus[0].read_text() * 40)
    cache = tmp_path / "cache"
    args = tiny_args("roberta", big, cache, tmp_path / "out", 2)
    import minibert.corpus.cost as cost

    real = cost.shutil.disk_usage
    monkeypatch.setattr(cost.shutil, "disk_usage", lambda path: real(path)._replace(free=10_000))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "needs about" in err and "10.0 kB free" in err and "--cache-dir" in err and "\n" not in err
    assert not cache.exists() and not (tmp_path / "out").exists()  # nothing written
    monkeypatch.setattr(cost.shutil, "disk_usage", real)
    assert main(args) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("corpus: ") and "M tokens" in first and "free" in first and "estimates" in first
    assert main(args + ["--overwrite"]) == 0  # the second time: tokenized before
    assert "tokenized before" in capsys.readouterr().out.splitlines()[0]


def test_a_full_disk_at_a_checkpoint_ends_the_run_in_one_line_and_resume_continues(corpus, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    args = tiny_args("albert", *corpus, out, 30)
    save = Checkpoints.save

    def full_at_step_20(self, step, state):
        if step == 20:
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(self, step, state)

    monkeypatch.setattr(Checkpoints, "save", full_at_step_20)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("train.py: error:") == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "no space left" in line and "step 20" in line and "step-00000010" in line and "--resume" in line
    assert [p.name for p in Checkpoints(out / "checkpoints").steps()] == ["step-00000010"]  # the earlier one, intact
    monkeypatch.setattr(Checkpoints, "save", save)
    assert main(args + ["--resume"]) == 0
    assert "resuming albert" in capsys.readouterr().out
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 30
