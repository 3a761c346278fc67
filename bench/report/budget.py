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
THREADS = 1
PRETRAIN_SEED = FINETUNE_SEED = 0
PRETRAIN_LR = 1e-3
STUDENT_LR = 5e-4  # DistilBERT's peak learning rate
GENERATOR_FRACTION = 0.5  # ELECTRA: 1/4 to 1/2 of the discriminator's width works best (paper, fig. 3)
MASK_PROB = 0.15  # BERT's share of masked positions: what the FLOP count of the MLM head assumes
FINETUNE_BATCH = 32


@dataclass(frozen=True)
class Budget:
    """How big every experiment is (FULL for docs/results.md, QUICK for a smoke run)."""

    model: tuple[str, ...]  # ModelConfig flags of every pretrained model (ELECTRA: the discriminator)
    seq_len: int
    batch_size: int
    steps: int  # "S": the MLM runs of sections 4 and 5, and section 3's largest budget
    budgets: tuple[float, ...]  # section 3's compute budgets, as fractions of S MLM steps
    corpus_lines: int  # the first N lines of WikiText-2 train: S steps read them several times over
    sst2_train: int  # SST-2 training examples (a seeded subsample); dev is always the full set
    sst2_steps: int
    rte_steps: int  # on the full RTE training set; dev is the full set
    finetune_lr: float
    latency_repeats: tuple[int, int]  # timed calls per model at batch 1 and batch 8


FULL = Budget(
    model=("--hidden-size", "128", "--num-layers", "4", "--num-heads", "4", "--intermediate-size", "512",
           "--vocab-size", "8000", "--embedding-size", "64"),
    seq_len=128, batch_size=32, steps=300, budgets=(0.25, 0.5, 1.0), corpus_lines=6000,
    sst2_train=8000, sst2_steps=500, rte_steps=300, finetune_lr=5e-4, latency_repeats=(15, 7),
)
QUICK = Budget(
    model=("--hidden-size", "64", "--num-layers", "2", "--num-heads", "2", "--intermediate-size", "128",
           "--vocab-size", "1000", "--embedding-size", "32"),
    seq_len=64, batch_size=8, steps=8, budgets=(0.5, 1.0), corpus_lines=300,
    sst2_train=200, sst2_steps=10, rte_steps=6, finetune_lr=5e-4, latency_repeats=(2, 1),
)
