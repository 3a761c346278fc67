import os
from pathlib import Path

import pytest
import torch

# Triton's CPU interpreter must be chosen before triton is first imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

torch.set_num_threads(min(2, os.cpu_count() or 1))

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def datasets_dir() -> Path:
    if not DATASETS.is_dir():
        pytest.skip("the shared datasets folder is not present beside the repository")
    return DATASETS
