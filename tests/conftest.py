import os
import signal
from pathlib import Path

import pytest
import torch

# Triton's CPU interpreter must be chosen before triton is first imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Every test, and every process a test starts, sees a CPU without native bf16, so that
# `--precision auto` is fp32 here as on any machine: the suite's figures do not depend on the CPU
# it runs on. tests/test_bf16.py turns the feature on where it tests the choice.
os.environ["MINIBERT_CPU_BF16"] = "0"

torch.set_num_threads(min(2, os.cpu_count() or 1))

# The Ctrl-C tests press a real Ctrl-C in the processes they start. A shell starts a command run in
# the background (`&`) with SIGINT ignored, and a process inherits that: those processes would
# sleep through the signal. Python's own handler here makes theirs the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


@pytest.fixture(scope="session")
def qa_models(tmp_path_factory):
    """"squad1" and "squad2" -> a tiny question-answering model, fine-tuned in seconds on a tiny
    SQuAD 1.1 / 2.0 file (tests/test_question_answering.py's), for the explorer's tests."""
    from minibert import Encoder, ModelConfig, save_pretrained
    from test_question_answering import QA_FLAGS, WORDS, squad_file, wordpiece
    from minibert.finetune import main as finetune

    root = tmp_path_factory.mktemp("qa_models")
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=len(WORDS), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=64)
    backbone = save_pretrained(Encoder(config), root / "backbone", tokenizer=wordpiece())
    models = {}
    for name, version, impossible in (("squad1", "1.1", False), ("squad2", "v2.0", True)):
        squad_file(root / f"{name}.json", version=version, impossible=impossible)
        models[name] = root / name
        assert finetune(["--init", str(backbone), "--train", str(root / f"{name}.json"), "--dev", str(root / f"{name}.json"),
                         "--out", str(models[name]), "--device", "cpu", *QA_FLAGS]) == 0
    return models
