"""DDP: the same train.py under torchrun. Two CPU processes (gloo) must end with the same
weights as one process that takes the same global batch in the same micro-batches."""

import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from tiny_run import REPO, run_cli, tiny_args, write_corpus


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path):
    corpus, cache = write_corpus(tmp_path / "animals.txt"), tmp_path / "cache"
    steps = 6

    def args(out, accumulation):
        return tiny_args("albert", corpus, cache, tmp_path / out, steps, "--batch-size", "8", "--grad-accum", str(accumulation), "--save-every", "3")

    single = run_cli(args("one", 2))  # micro-batches one after the other...
    assert single.returncode == 0, single.stderr
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    double = subprocess.run(  # ...or side by side, one per process
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(REPO / "train.py"), *args("two", 1)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert double.returncode == 0, double.stderr[-3000:]

    one, two = (load_file(tmp_path / name / "model.safetensors") for name in ("one", "two"))
    assert one.keys() == two.keys()
    for name in one:  # equal up to the order of floating-point sums
        torch.testing.assert_close(two[name], one[name], rtol=1e-4, atol=1e-5, msg=name)
    moved = load_file(tmp_path / "one" / "checkpoints" / "step-00000003" / "tensors.safetensors")
    assert not torch.equal(moved["state.model.model.encoder.embeddings.word_embeddings.weight"],
                           one["encoder.embeddings.word_embeddings.weight"])  # training moved the weights
    assert not (tmp_path / "two" / ".lock").exists()

    # --resume on another number of processes: 2 × 1 -> 1 × 2 serves the same batches, so it ends
    # where the uninterrupted run ended; 2 × 1 -> 1 × 1 continues by the documented rule, saying so once
    finished = load_file(tmp_path / "two" / "model.safetensors")
    for accumulation, exact in ((2, True), (1, False)):
        shutil.rmtree(tmp_path / "two" / "checkpoints" / "step-00000006")
        resumed = run_cli([*args("two", accumulation), "--resume"])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert resumed.stdout.count("not bit-identical") == 1 and "resuming albert from" in resumed.stdout
        assert ("the same batches" in resumed.stdout) == exact
        again = load_file(tmp_path / "two" / "model.safetensors")
        if exact:
            for name in finished:
                torch.testing.assert_close(again[name], finished[name], rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("variant, unused", [("roberta", True), ("bert", False)])
def test_ddp_looks_for_unused_parameters_only_where_there_are_some(variant, unused, tmp_path):
    """A pooler that no sentence task reads gets no gradient (RoBERTa's recipe): DDP must look
    for unused parameters there, or its second step fails; elsewhere (BERT's NSP reads the
    pooler) the search would cost a pass over the graph every step, and DDP warns about it."""
    from minibert.training.loop import Pretrainer
    from minibert.variants import VARIANTS, build_pretrainer, run_architecture, with_layout

    settings = with_layout(VARIANTS[variant], VARIANTS[variant].default_settings(seq_len=16))
    config = run_architecture(VARIANTS[variant], settings, dict(hidden_size=16, num_heads=2, intermediate_size=32),
                              vocab_size=100, pad_token_id=0)
    pretrainer: Pretrainer = build_pretrainer(VARIANTS[variant], settings, config)
    assert pretrainer.unused_parameters == unused
    corpus, cache = write_corpus(tmp_path / "animals.txt"), tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(REPO / "train.py"),
         *tiny_args(variant, corpus, cache, tmp_path / "out", 3, "--batch-size", "8", "--save-every", "3")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "find_unused_parameters=True" not in run.stderr  # DDP's warning that the search found nothing
