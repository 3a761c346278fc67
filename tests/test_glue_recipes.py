"""Layer-wise lr decay; rows held out of the training set.

Tiny models and a few rows written here (test_glue.py's layouts); nothing needs ../shared.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from minibert import ModelConfig
from minibert.finetune.glue import GLUE_TASKS
from minibert.finetune.job import TaskLoss
from minibert.finetune.layer_decay import layer_lr_scales
from minibert.finetune.tasks import read_task
from minibert.heads import SequenceClassifier
from minibert.operations.distributed import Distributed
from minibert.training.loop import LoopSettings, Progress, build_optimizer, train
from minibert.training.metrics import MetricsLog

from test_finetune import TINY, VOCAB
from test_glue import layout, seed_of

@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, above all on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def task_folder(root: Path, tasks=("RTE",), n_train: int = 12, n_dev: int = 6) -> Path:
    """Only `tasks`, each with its train and dev files (and MNLI's second dev file)."""
    for name in tasks:
        spec = GLUE_TASKS[name]
        (root / name).mkdir(parents=True)
        for file, split, n in [("train.tsv", "train", n_train), (spec.dev, "dev", n_dev),
                               *([(spec.mismatched, "dev", n_dev)] if spec.mismatched else [])]:
            (root / name / file).write_text(layout(name, split, n, seed=seed_of(file))[0], encoding="utf-8")
    return root


# --- layer-wise lr decay ---------------------------------------------------------------------------


@pytest.mark.parametrize("share", ["none", "all", "attention"])
def test_layer_decay_trains_each_layer_at_its_own_lr_and_a_shared_layer_at_the_tops(share, tmp_path):
    depth, decay, lr = 3, 0.5, 1e-3
    config = ModelConfig(**{**TINY, "num_layers": depth, "share_layers": share, "embedding_size": 16})  # E -> H projection
    torch.manual_seed(0)
    objective = TaskLoss(SequenceClassifier(config, 2))
    encoder = objective.model.encoder
    scales = layer_lr_scales(objective, encoder, decay)
    optimizer = build_optimizer(objective, lr=lr, weight_decay=0.01, lr_scales=scales)
    batch = {"input_ids": torch.randint(5, len(VOCAB), (2, 6)), "attention_mask": torch.ones(2, 6, dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    loop = LoopSettings(steps=1, lr=lr, warmup=0.0, weight_decay=0.01, clip=1.0, seed=0, precision="fp32", log_every=1,
                        eval_every=1, save_every=1)
    train(objective, optimizer, [iter([batch])], None, loop, Progress(), dist=Distributed(), device=torch.device("cpu"),
          log=MetricsLog(tmp_path / "metrics.jsonl"))  # the loop sets each group's lr from the schedule
    trained_at = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}

    def at(module, expected: float) -> bool:
        return all(math.isclose(trained_at[id(p)], expected) for p in module.parameters())

    assert at(encoder.embeddings, lr * decay ** depth) and at(encoder.embedding_projection, lr * decay ** depth)
    for sublayers in (encoder.attention, encoder.feed_forward):
        if len(sublayers) == 1:  # one parameter set applied at every depth: the top's lr
            assert at(sublayers[0], lr)
        else:
            assert all(at(sublayer, lr * decay ** (depth - 1 - d)) for d, sublayer in enumerate(sublayers))
    assert at(objective.model.head, lr) and at(encoder.pooler, lr)
    assert len(trained_at) == len(list(objective.parameters()))  # every parameter in exactly one group
    plain = build_optimizer(objective, lr=lr, weight_decay=0.01)  # pretraining's: two groups, as ever
    assert len(plain.param_groups) == 2 and all("lr_scale" not in group for group in plain.param_groups)


# --- held-out training rows -------------------------------------------------------------------


def test_held_out_rows_are_training_rows_disjoint_from_those_trained_on(tmp_path):
    train = read_task(task_folder(tmp_path, n_train=40) / "RTE" / "train.tsv", columns=GLUE_TASKS["RTE"].columns)
    rest, held = train.held_out(0.1)
    assert len(held) == 4 and len(rest) == 36 and not set(held.lines) & set(rest.lines)
    assert sorted(held.lines + rest.lines) == train.lines  # together every training row, each once
    assert train.held_out(0.1)[1].lines == held.lines  # seeded: the same rows every time


