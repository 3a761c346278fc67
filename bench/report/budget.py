"""How big every experiment of the report is, and the fixed choices all sections share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATASETS = Path("..") / "shared" / "datasets"  # beside the repository root; commands run in REPO
WIKITEXT = DATASETS / "wikitext-2" / "train.txt"
SST2 = DATASETS / "sst2"
RTE = DATASETS / "rte"
# One thread per training process: on a shared machine, two OpenMP threads that wait for each other
# at every op ran fine-tuning 50× slower than one thread (measured while writing this report).
# The report runs as many processes at once as there are cores instead (`--jobs`).
THREADS = 1
MLM_VARIANT = "bert"  # every MLM row, with --layout/--masking saying which recipe; segment types for NSP/SOP
FINETUNE_BATCH = 32


@dataclass(frozen=True)
class Budget:
    """How big every experiment is (FULL for docs/results.md, QUICK for a smoke run). Learning
    rates, masking rates and the ELECTRA generator's width are train.py's defaults for each
    variant (`minibert.variants`), so the report measures the recipe a user runs."""

    model: tuple[str, ...]  # ModelConfig flags of every pretrained model (ELECTRA: the discriminator)
    seq_len: int
    batch_size: int
    steps: int  # "S": the MLM runs of sections 3, 5 and 6, and section 4's largest budget
    budgets: tuple[float, ...]  # section 4's compute budgets, as fractions of the FLOPs of S MLM steps
    pretrain_seeds: tuple[int, ...]
    finetune_seeds: tuple[int, ...]  # every pretrained model is fine-tuned once with each
    corpus_lines: int  # the first N lines of WikiText-2 train (0 = all of it)
    sst2_train: int  # SST-2 training sentences (a seeded subsample); dev is always the full set
    sst2_steps: int  # enough to fit the subsample (section 3's protocol table: fewer under-train pretrained encoders)
    sst2_lrs: tuple[float, ...]  # the peak lrs section 3's protocol table compares, each for sst2_steps and a third of them
    sst2_lr: float  # one of them: SST-2's fine-tuning lr, the pretrained encoder's best there on held-out training sentences
    rte_steps: int  # on the full RTE training set; dev is the full set
    rte_max_len: int  # RTE's pairs are longer than pretraining's sequences (rotary positions extend)
    rte_lr: float
    pooling: str  # what the classifier reads (`--pooling`): "mean" — MLM alone leaves [CLS] untrained (section 3)
    latency_repeats: tuple[int, int]  # timed calls per model at batch 1 and batch 8


MODEL = ("--hidden-size", "128", "--num-layers", "2", "--num-heads", "2", "--intermediate-size", "512")
FULL = Budget(
    model=(*MODEL, "--vocab-size", "8000"), seq_len=64, batch_size=32, steps=1200, budgets=(0.25, 0.5, 1.0),
    pretrain_seeds=(0, 1, 2), finetune_seeds=(0, 1, 2), corpus_lines=0,
    sst2_train=2000, sst2_steps=600, sst2_lrs=(3e-4, 1e-3), sst2_lr=3e-4, rte_steps=240, rte_max_len=128, rte_lr=3e-4, pooling="mean",
    latency_repeats=(15, 7),
)
QUICK = Budget(
    model=("--hidden-size", "64", "--num-layers", "2", "--num-heads", "2", "--intermediate-size", "128",
           "--vocab-size", "1000"),
    seq_len=32, batch_size=8, steps=8, budgets=(0.5, 1.0), pretrain_seeds=(0, 1), finetune_seeds=(0, 1),
    corpus_lines=300, sst2_train=200, sst2_steps=6, sst2_lrs=(3e-4, 1e-3), sst2_lr=1e-3, rte_steps=4, rte_max_len=64, rte_lr=3e-4, pooling="mean",
    latency_repeats=(2, 1),
)
