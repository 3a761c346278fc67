"""`--report-to tensorboard`: metrics.jsonl's records, also as TensorBoard scalars.

Every record the run logs (training means, each held-out evaluation, the learning rate,
tokens/s) becomes one scalar per number at its step, in OUT/tensorboard: `tensorboard
--logdir OUT/tensorboard`. A resumed run drops the events after the step it resumes from, as
metrics.jsonl drops its lines. TensorBoard is an optional extra: pip install minibert[tensorboard].
"""

from __future__ import annotations

from pathlib import Path

from .metrics import MetricsLog

EXTRA = "pip install 'minibert[tensorboard]'"


def check_installed() -> None:
    """--report-to tensorboard needs a TensorBoard that torch's writer can use: said in one line
    while the flags are checked, before the data is built or OUT is claimed."""
    try:
        import torch.utils.tensorboard  # noqa: F401  (it imports tensorboard and checks its version)
    except ImportError as error:
        raise ValueError(f"--report-to tensorboard needs TensorBoard, which cannot be imported ({error}); {EXTRA}") from None


class TensorBoardLog:
    """A MetricsLog that also writes each record to TensorBoard."""

    def __init__(self, log: MetricsLog, folder: Path, resumed_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        self.log = log
        self.writer = SummaryWriter(str(folder), purge_step=resumed_step + 1 if resumed_step else None)

    def write(self, record: dict) -> None:
        self.log.write(record)
        for name, value in record.items():
            if name != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(name, value, record["step"])
        self.writer.flush()

    def keep_until(self, step: int) -> None:
        self.log.keep_until(step)


def report_to(kind: str, log: MetricsLog, out: Path, step: int):
    """The run's log: metrics.jsonl, and TensorBoard's events with --report-to tensorboard."""
    return TensorBoardLog(log, out / "tensorboard", step) if kind == "tensorboard" else log
