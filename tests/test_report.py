"""bench/report/: the section registry holds together and the run cache reuses, resumes and
restarts runs as its docstring says (with stand-in commands that take milliseconds)."""

import json
from dataclasses import asdict
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import SECTIONS  # noqa: E402
from bench.report.budget import FULL, QUICK  # noqa: E402
from bench.report.document import budget_line  # noqa: E402
from bench.report.measure import describe_gap, paired_gap, verdict  # noqa: E402
from bench.report.runner import NotRun, Runner, shell  # noqa: E402
from hypothesis import given, strategies as st  # noqa: E402
from minibert.variants import VARIANTS  # noqa: E402


def test_every_section_declares_what_the_document_needs():
    assert list(SECTIONS) == ["params", "latency", "transfer", "efficiency", "sentence", "distill", "distill-task",
                             "intrinsic"]
    for name, section in SECTIONS.items():
        assert section.NAME == name and section.TITLE
        for budget in (FULL, QUICK):
            line = budget_line(section, budget)
            assert f"--only {name}" in line and section.plan(budget) in line
            assert ("Fine-tuning" in line) == bool(section.TASKS)


def test_the_entry_script_lists_the_sections():
    listed = subprocess.run([sys.executable, "bench/results.py", "--list"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(SECTIONS)


def counting_command(tally: Path) -> list[str]:
    """`python -c ...` that appends one line (its extra arguments) to `tally` per run."""
    return ["-c", f"import sys; open({str(tally)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')"]


def test_a_finished_command_is_reused_and_a_changed_one_starts_over(tmp_path):
    runner, out, tally = Runner(tmp_path), tmp_path / "run", tmp_path / "tally"
    first = runner.run("probe", out, counting_command(tally), resumable=True)
    again = runner.run("probe", out, counting_command(tally), resumable=True)
    assert first == again and first["done"] and tally.read_text().splitlines() == [""]  # ran once, no extra flag
    assert runner.seconds == pytest.approx(2 * first["seconds"])  # a cached run still counts what it cost
    runner.run("probe", out, [*counting_command(tally), "--seed", "1"], resumable=True)
    assert tally.read_text().splitlines() == ["", "--seed 1 --overwrite"]


def test_an_unfinished_run_resumes_and_a_failing_one_is_not_run(tmp_path):
    runner, out, tally = Runner(tmp_path), tmp_path / "run", tmp_path / "tally"
    out.mkdir()
    (out / Runner.MARKER).write_text(json.dumps({"command": shell(["python", *counting_command(tally)]), "done": False}))
    runner.run("probe", out, counting_command(tally), resumable=True)
    assert tally.read_text().splitlines() == ["--resume"]
    with pytest.raises(NotRun, match=r"`broken` failed \(exit 3\): the last words"):
        runner.run("broken", tmp_path / "broken", ["-c", "print('the last words'); raise SystemExit(3)"], resumable=False)


def test_a_result_stored_by_an_older_report_asks_for_a_rerun(tmp_path):
    from bench.report.document import render_section

    rows = [{"name": f"configuration {i}", "parameters": 1000 * (i + 1)} for i in range(6)]
    old = {"presets": rows, "ablation": rows, "when": "2026-11-30 on x86_64 (2 cores)"}  # no shape, no date or machine
    (line,) = render_section(SECTIONS["params"], old, tmp_path)
    assert line.startswith("Not run yet: the stored result predates") and "--only params" in line
    (line,) = render_section(SECTIONS["params"], {"budget": {"model": []}, "measured": {}}, tmp_path)  # older budget
    assert "predates this report's budget" in line


def test_a_pretraining_command_evaluates_along_the_way_at_the_recipe_s_learning_rate(tmp_path):
    from bench.report.budget import WIKITEXT
    from bench.report.recipes import pretrain_args

    if not (REPO / WIKITEXT).is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")
    args = pretrain_args(QUICK, tmp_path, "bert", 60, "--layout", "nsp", seed=3)
    flag = lambda name: args[args.index(name) + 1]  # noqa: E731
    assert flag("--steps") == flag("--save-every") == "60" and flag("--eval-every") == "10"  # six points on the curve
    assert flag("--layout") == "nsp" and flag("--seed") == "3"
    assert float(flag("--lr")) == VARIANTS["bert"].default_settings().lr  # the user's recipe, not the report's own


def test_parallel_runs_keep_their_order_and_really_overlap(tmp_path):
    import threading
    import time

    runner, running, most = Runner(tmp_path, jobs=3), [0], [0]
    lock = threading.Lock()

    def task(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return i * i

    assert runner.parallel([lambda i=i: task(i) for i in range(7)]) == [i * i for i in range(7)]
    assert most[0] == 3  # never more than `jobs` at once, and that many did overlap
    with pytest.raises(NotRun, match="the second"):
        runner.parallel([lambda: 1, lambda: (_ for _ in ()).throw(NotRun("the second")), lambda: 3])


scores = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=12)


@given(scores, st.floats(-0.2, 0.2))
def test_a_paired_gap_moves_with_a_shift_and_its_interval_holds_the_mean(a, shift):
    shifted = [x + shift for x in a]
    gap = paired_gap(shifted, a)
    assert gap["mean"] == pytest.approx(shift, abs=1e-9)
    assert gap["low"] <= gap["mean"] <= gap["high"]
    assert gap["ahead"] + gap["behind"] <= gap["n"] == len(a)


def test_the_verdict_reads_the_interval_not_the_mean():
    noisy = paired_gap([0.82, 0.70, 0.83, 0.69], [0.75, 0.75, 0.75, 0.75])  # mean +1 point, seeds all over
    steady = paired_gap([0.76, 0.761, 0.759, 0.76], [0.75, 0.75, 0.75, 0.75])  # mean +1 point, seeds agree
    assert noisy["mean"] == pytest.approx(steady["mean"], abs=1e-9)
    assert verdict(noisy) == "inconclusive" and verdict(steady) == "reproduced"
    assert verdict(paired_gap([0.75] * 4, [0.76, 0.761, 0.759, 0.76])) == "not reproduced"
    with pytest.raises(ValueError, match="two equal lists"):
        paired_gap([0.5], [0.5])


def test_fine_tunings_of_one_pretrained_model_count_as_one_pretraining_seed():
    # three pretraining seeds x three fine-tunings: every fine-tuning pair is ahead, but by how much
    # depends on the pretraining seed, and three seeds cannot pin that down
    a = [0.76, 0.76, 0.76, 0.70, 0.70, 0.70, 0.82, 0.82, 0.82]
    b = [0.75, 0.751, 0.749, 0.69, 0.691, 0.689, 0.74, 0.741, 0.739]
    pairs, seeds = paired_gap(a, b), paired_gap(a, b, per_seed=3)
    assert seeds["mean"] == pytest.approx(pairs["mean"], abs=1e-12)
    assert (pairs["n"], pairs["ahead"], seeds["n"], seeds["ahead"], seeds["unit"]) == (9, 9, 3, 3, "pretraining seeds")
    assert verdict(pairs) == "reproduced" and verdict(seeds) == "inconclusive"  # nine pairs overstate the evidence
    assert "3 of 3 pretraining seeds ahead" in describe_gap(seeds)
    with pytest.raises(ValueError, match="a multiple of 3"):
        paired_gap(a[:8], b[:8], per_seed=3)


def test_the_summary_lists_every_measured_claim_and_skips_the_rest():
    from types import SimpleNamespace

    from bench.report.document import summary

    said = SimpleNamespace(TITLE="3. Said", claims=lambda r: [("A beats B", "reproduced", "+4.0 points")])
    stale = SimpleNamespace(TITLE="4. Stale", claims=lambda r: r["missing"])
    quiet = SimpleNamespace(TITLE="1. Sizes")  # no claims
    sections = {"said": said, "stale": stale, "quiet": quiet, "absent": said, "failed": said}
    results = {"said": {}, "stale": {}, "quiet": {}, "failed": {"not_run": "no data"}}
    assert summary(sections, results)[5:] == ["| 3 | A beats B | reproduced | +4.0 points |"]
    assert summary({"quiet": quiet}, {"quiet": {}}) == []


def test_a_section_whose_result_is_gone_keeps_what_the_page_says(tmp_path):
    """runs/ is not in git: re-running one section on a fresh checkout must not blank the others."""
    from types import SimpleNamespace

    from bench.report.document import write_document

    def section(title, claim):
        return SimpleNamespace(NAME=title[:1], TITLE=title, TASKS=(), plan=lambda b: "Nothing.",
                               claims=lambda r: [(claim, "reproduced", "+1.0 points")], render=lambda r, p: f"Body of {title}.")

    sections = {"a": section("3. First", "A beats B"), "b": section("4. Second", "C beats D")}
    page = tmp_path / "results.md"
    stored = {"date": "2026-01-01", "machine": {"cpu": "x", "cores": 2, "arch": "x", "torch": "2", "load_average": 0.0},
              "seconds": 1.0}
    results = {name: {"budget": asdict(QUICK), "measured": stored} for name in sections}
    write_document(page, tmp_path / "plots", sections, results, QUICK, quick=True)
    sections["b"] = section("4. Second", "C beats D again")  # measured anew; section 3's result is gone
    write_document(page, tmp_path / "plots", sections, {"b": results["b"]}, QUICK, quick=True)
    text = page.read_text()
    assert "Body of 3. First." in text and "Body of 4. Second." in text and "Not run yet" not in text
    assert "| 3 | A beats B | reproduced | +1.0 points |" in text and "| 4 | C beats D again |" in text
    assert "| 4 | C beats D |" not in text


def test_the_fine_tuning_protocol_is_chosen_on_training_sentences_that_are_not_trained_on(tmp_path):
    from bench.report.budget import SST2
    from bench.report.recipes import sst2_subsample, sst2_validation, word_ngrams
    from bench.report.transfer import protocols

    for budget in (FULL, QUICK):  # the budget's own protocol is one of those compared
        assert (budget.sst2_lr, budget.sst2_steps) in protocols(budget)
    if not (REPO / SST2 / "train.tsv").is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")
    runs = tmp_path.relative_to(REPO) if tmp_path.is_relative_to(REPO) else tmp_path
    trained = set((REPO / sst2_subsample(QUICK, runs)).read_text(encoding="utf-8").splitlines()[1:])
    header, *held_out = (REPO / sst2_validation(QUICK, runs, size=300)).read_text(encoding="utf-8").splitlines()
    assert header == "sentence\tlabel" and len(held_out) == 300 == len(set(held_out))
    assert not trained & set(held_out)
    assert all(len(row.split("\t")[0].split()) >= 10 and row.split("\t")[1] in {"0", "1"} for row in held_out)
    seen = set().union(*(word_ngrams(row.split("\t")[0], 4) for row in trained))  # no four words in a row trained on
    assert not any(word_ngrams(row.split("\t")[0], 4) & seen for row in held_out)


def test_task_adaptive_pretraining_reads_sst2_training_text_without_labels_and_never_dev(tmp_path):
    from bench.report.budget import SST2
    from bench.report.recipes import sst2_text

    if not (REPO / SST2 / "train.tsv").is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")
    runs = tmp_path.relative_to(REPO) if tmp_path.is_relative_to(REPO) else tmp_path
    documents = (REPO / sst2_text(QUICK, runs)).read_text(encoding="utf-8").split("\n\n")[:-1]
    train = [row.split("\t") for row in (REPO / SST2 / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert documents == [text for text, _ in train[:QUICK.corpus_lines]]  # one document per entry, no label column
    dev = {row.split("\t")[0] for row in (REPO / SST2 / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    assert not dev & set(documents)


def test_the_protocol_reading_keeps_the_budget_s_protocol_only_within_the_noise_of_the_best():
    from bench.report.transfer import protocol_lines

    def row(lr, steps, mlm, untrained):
        return {"lr": lr, "steps": steps, "mlm": {"accuracy": mlm, "train_loss": 0.5}, "untrained": {"accuracy": untrained, "train_loss": 0.3}}

    rows = [row(3e-4, 200, 0.66, 0.70), row(1e-3, 200, 0.745, 0.73), row(1e-3, 600, 0.74, 0.72)]
    text = "\n".join(protocol_lines({"protocol": {"examples": 1000, "rows": rows}}, 1e-3, 600))
    assert "within one standard error (1.4 points on 1,000 sentences)" in text  # 0.5 below the best: noise
    assert "-4.0 points there and +1.5" in text and "further from fitting" in text
    text = "\n".join(protocol_lines({"protocol": {"examples": 1000, "rows": rows}}, 3e-4, 200))
    assert "best protocol here is lr 0.001 for 200 steps, more than one standard error" in text
    text = "\n".join(protocol_lines({"protocol": {"examples": 100_000, "rows": rows}}, 1e-3, 600))
    assert "change `Budget`" in text  # the same 0.5 points on a large held-out set is beyond the noise


def test_a_pretraining_gain_beyond_the_noise_but_below_the_aim_says_so():
    from bench.report.transfer import against_aim

    assert against_aim({"mean": 0.005, "low": 0.001, "high": 0.009}) == "reproduced, below the 3-point aim"
    assert against_aim({"mean": 0.04, "low": 0.031, "high": 0.049}) == "reproduced"
    assert against_aim({"mean": 0.04, "low": -0.01, "high": 0.09}) == "inconclusive"


def test_the_untrained_baseline_gets_its_own_best_protocol_and_its_own_folders(tmp_path):
    from bench.report.budget import SST2
    from bench.report.recipes import finetune
    from bench.report.transfer import own_protocol

    def row(lr, steps, mlm, untrained):
        return {"lr": lr, "steps": steps, "mlm": {"accuracy": mlm}, "untrained": {"accuracy": untrained}}

    chosen = {"rows": [row(3e-4, 200, 0.66, 0.70), row(3e-4, 600, 0.70, 0.68), row(1e-3, 200, 0.69, 0.71)]}
    assert own_protocol(chosen) == (1e-3, 200)  # the untrained encoder's best, not the pretrained one's
    if not (REPO / SST2 / "train.tsv").is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")

    class Recorder:
        runs = tmp_path.relative_to(REPO) if tmp_path.is_relative_to(REPO) else tmp_path

        def finetune(self, name, init, train, dev, steps, lr, max_len, seed, pooling):
            return name, steps, lr

    run = {"out": "runs/x/untrained-seed0"}
    assert finetune(Recorder(), QUICK, "sst2", "untrained-seed0", run, 1, "mean") == (
        "untrained-seed0-sst2-mean-ft1", QUICK.sst2_steps, QUICK.sst2_lr)
    assert finetune(Recorder(), QUICK, "sst2", "untrained-seed0", run, 1, "mean", (3e-4, 2)) == (
        "untrained-seed0-sst2-mean-lr0.0003-steps2-ft1", 2, 3e-4)  # another protocol never reuses the budget's folder


def test_distillation_transfer_text_is_training_text_outside_the_labelled_subsample_and_never_dev(tmp_path):
    from bench.report.budget import SST2
    from bench.report.distill_task import TRANSFER, transfer_text
    from bench.report.recipes import sst2_subsample

    if not (REPO / SST2 / "train.tsv").is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")
    runs = tmp_path.relative_to(REPO) if tmp_path.is_relative_to(REPO) else tmp_path
    texts = (REPO / transfer_text(QUICK, runs)).read_text(encoding="utf-8").splitlines()
    labelled = {row.split("\t")[0] for row in (REPO / sst2_subsample(QUICK, runs)).read_text(encoding="utf-8").splitlines()[1:]}
    train = {row.split("\t")[0] for row in (REPO / SST2 / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    dev = {row.split("\t")[0] for row in (REPO / SST2 / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    assert len(texts) == len(set(texts)) == TRANSFER * QUICK.sst2_train
    assert set(texts) <= train and not set(texts) & labelled and not set(texts) & dev


def distillation_result(soft_gain: float, transfer_gain: float, pretrain_seeds=(0, 1, 2)) -> dict:
    """A stand-in result of the distill-task section: (b) = (a) + soft_gain, (c) = (b) + transfer_gain."""
    from dataclasses import asdict, replace

    n = 3 * len(pretrain_seeds)
    base = [0.70 + 0.01 * (i % 4) for i in range(n)]
    ways = {"labels": base, "teacher": [x + soft_gain + 0.002 * (i % 2) for i, x in enumerate(base)]}
    ways["transfer"] = [x + transfer_gain - 0.002 * (i % 2) for i, x in enumerate(ways["teacher"])]
    command = {"sst2": ["python -m minibert.finetune --init runs/x"]}
    setups = {way: {key: {"label": key, "scores": {"sst2": scores},
                          "runs": [{"command": "python train.py", "finetune_commands": command}]}
                    for key in ("mlm", "untrained")} for way, scores in ways.items()}
    grid = [{"alpha": a, "temperature": t, "accuracy": 0.7, "command": "c"} for a in (0.0, 0.5, 0.9) for t in (1.0, 2.0, 4.0)]
    return {"teacher": {"accuracy": 0.82, "command": "python -m minibert.finetune --init /somewhere/model", "folder": "/somewhere/model"},
            "transfer_rows": 4000, "setups": setups, "grid": grid, "dev": {"examples": 872, "majority": 0.51},
            "parameters": {"teacher": 22_000_000, "student": 1_500_000}, "latency": {"teacher": 0.1, "student": 0.01},
            "repeats": 21, "batch": 8, "length": 64, "budget": asdict(replace(FULL, pretrain_seeds=pretrain_seeds))}


def test_the_distillation_claims_follow_the_paired_gaps_and_a_reduced_grid_says_so(tmp_path):
    from bench.report import distill_task

    helped = distill_task.claims(distillation_result(0.03, -0.03))
    assert [said for _, said, _ in helped[:2]] == ["reproduced", "not reproduced"]
    assert "82" in helped[2][2] and "7%" in helped[2][2] and "10.0× faster" in helped[2][2]
    full = distill_task.render(distillation_result(0.0, 0.0), tmp_path)
    assert "Reduced grid" not in full and "/somewhere/model" not in full and "MINILM" in full
    reduced = distill_task.render(distillation_result(0.02, 0.0, pretrain_seeds=(0,)), tmp_path)
    assert "Reduced grid" in reduced and "--only distill-task" in reduced


def test_the_pair_probe_reads_what_the_features_hold_and_nothing_else():
    """The probe behind ALBERT's table (pair_tasks.py): a label the features carry is found on
    held-out rows; a label they do not carry stays at chance."""
    import torch

    from bench.report.pair_tasks import probe_accuracy

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2000, 16, generator=g)
    carried = (x[:, 3] + 0.5 * x[:, 7] > 0).long()
    unrelated = torch.randint(0, 2, (2000,), generator=g)
    assert probe_accuracy(x[:1000], carried[:1000], x[1000:], carried[1000:]) > 0.95
    assert abs(probe_accuracy(x[:1000], unrelated[:1000], x[1000:], unrelated[1000:]) - 0.5) < 0.06
