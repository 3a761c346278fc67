"""bench/gpu_check.py cannot rot between GPU sessions: its dry run (CPU, tiny shapes, Triton's
interpreter) runs every step here, and a failing or hanging step is reported, not fatal."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import gpu_check  # noqa: E402


@pytest.mark.slow
def test_dry_run_reports_every_step_and_none_failed(tmp_path):
    result = subprocess.run([sys.executable, "bench/gpu_check.py", "--out", str(tmp_path), "--dry-run"], cwd=REPO,
                            capture_output=True, text=True, timeout=240)
    summary = (tmp_path / "summary.md").read_text()
    assert result.returncode == 0, summary + result.stderr
    assert "FAILED" not in summary
    for step in gpu_check.STEPS:
        assert f"## {step.name} — passed" in summary and f"## {step.name} — passed" in result.stdout  # printed as it goes
        assert (tmp_path / f"{step.name}.log").is_file() and (tmp_path / f"{step.name}.md").read_text().strip()
    for table_word in ("| torch |", "worst error / allowed", "ms (autotuner)", "tensor-core instr.", "SDPA + mask",
                       "tokens/s", "resumed run continued from a checkpoint", "activations kept (MB)"):
        assert table_word in summary


def test_candidate_times_sit_beside_their_own_compile_row():
    import gpu_check_candidates as candidates

    record = {"kernel": "forward", "dtype": "bf16", "head_dim": 64, "dropout": True, "candidate": [128, 64, 8, 3]}
    measured = {"times": {("forward", (128, 64, 8, 3)): 0.5, ("forward", (64, 64, 4, 3)): 0.25},
                "picks": {"forward": (64, 64, 4, 3)}}
    assert candidates.timing_cells(record, {("bf16", 64, True): measured}) == ["0.500", ""]
    assert candidates.timing_cells({**record, "candidate": [64, 64, 4, 3]}, {("bf16", 64, True): measured}) == ["0.250", "picked"]
    assert candidates.timing_cells(record, {("bf16", 64, False): measured}) == ["-", "-"]  # another key: not timed
    assert candidates.timing_cells(record, {("bf16", 64, True): {"error": "RuntimeError: out of memory"}})[0] == "FAILED"


def test_a_failing_step_is_reported_with_its_last_lines(tmp_path):
    step = gpu_check.Step("boom", 30, ["-c", "print('| a table |'); import sys; sys.exit('the kernel broke')"])
    result = gpu_check.run_step(step, tmp_path, dry_run=False)
    assert result["status"] == "FAILED (exit 1)" and "| a table |" in result["markdown"]
    assert "the kernel broke" in gpu_check.section(result)


def test_a_hanging_step_is_stopped_at_its_time_limit(tmp_path):
    step = gpu_check.Step("hang", 1, ["-c", "import time; print('started', flush=True); time.sleep(60)"])
    result = gpu_check.run_step(step, tmp_path, dry_run=False)
    assert result["status"] == "FAILED (time limit 1 s)" and result["seconds"] < 30
    assert "started" in result["markdown"]


def test_unknown_step_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        gpu_check.main(["--out", "unused", "--only", "kernal"])
    assert "unknown step(s) kernal; choose from environment, kernel" in capsys.readouterr().err


def test_every_step_together_fits_one_device_call():
    """A lent GPU gives one 10-minute call: the steps' limits, added up, must fit it."""
    assert sum(step.limit_s for step in gpu_check.STEPS) <= gpu_check.ONE_CALL_S <= 600
