"""bench/report/: the section registry holds together and the run cache reuses, resumes and
restarts runs as its docstring says (with stand-in commands that take milliseconds)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import SECTIONS  # noqa: E402
from bench.report.budget import FULL, QUICK  # noqa: E402
from bench.report.document import budget_line  # noqa: E402
from bench.report.runner import NotRun, Runner, shell  # noqa: E402


def test_every_section_declares_what_the_document_needs():
    assert list(SECTIONS) == ["params", "latency", "efficiency", "sentence", "distill"]
    for name, section in SECTIONS.items():
        assert section.NAME == name and section.TITLE
        for budget in (FULL, QUICK):
            line = budget_line(section, budget)
            assert f"--only {name}" in line and section.plan(budget) in line
            assert ("Fine-tuning" in line) == bool(section.TASKS)


def test_the_entry_script_lists_the_sections():
    listed = subprocess.run([sys.executable, "bench/report.py", "--list"], cwd=REPO, capture_output=True, text=True, timeout=120)
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
    assert line.startswith("Not run yet: the stored result has no") and "--only params" in line


def test_a_run_is_as_long_as_a_step_count_or_a_wall_clock_budget(tmp_path):
    from bench.report.budget import WIKITEXT
    from bench.report.recipes import pretrain_args

    if not (REPO / WIKITEXT).is_file():
        pytest.skip("the shared datasets folder is not present beside the repository")
    steps = pretrain_args(QUICK, tmp_path, "bert", 40, "--layout", "nsp", seed=3)
    timed = pretrain_args(QUICK, tmp_path, "bert", "5m", seed=3)
    flag = lambda args, name: args[args.index(name) + 1]  # noqa: E731
    assert flag(steps, "--steps") == flag(steps, "--eval-every") == flag(steps, "--save-every") == "40"
    assert flag(steps, "--layout") == "nsp" and flag(steps, "--seed") == flag(timed, "--seed") == "3"
    assert flag(timed, "--budget") == "5m" and "--steps" not in timed and "--eval-every" not in timed
