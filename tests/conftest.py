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


EXPLORED_FAMILIES = ("bert", "roberta", "albert", "electra", "distilbert")


@pytest.fixture(scope="session")
def family_runs(tmp_path_factory):
    """family -> a tiny `python train.py --variant FAMILY` folder (DistilBERT distils the BERT one),
    for the explorer's tests: built once, whichever of them run."""
    from minibert.runs.cli import main as train
    from tiny_run import tiny_args, write_corpus

    root = tmp_path_factory.mktemp("explore")
    corpus = write_corpus(root / "corpus.txt", documents=24)
    folders = {}
    for family in EXPLORED_FAMILIES:
        folders[family] = root / family
        teacher = ["--teacher", str(folders["bert"])] if family == "distilbert" else []
        args = tiny_args(family, corpus, root / "cache", folders[family], 2, "--eval-every", "2", "--save-every", "2", *teacher)
        assert train(args) == 0
    return folders
