"""ALBERT's own evidence for SOP: every model scored on held-out NSP pairs AND held-out SOP pairs.

ALBERT (Lan et al., 2020, table 5) pretrained with no sentence task, with NSP and with SOP,
and scored each on both tasks' held-out pairs: NSP training solved NSP (90.5%) but left SOP at
chance (52.0%), while SOP training solved SOP (86.5%) and carried over to NSP (78.9%). The
reading: NSP's negatives come from another document, so a change of TOPIC gives them away and
the model need not learn coherence; SOP's negatives are the same two segments swapped, so only
coherence tells them apart — and a model that knows coherence also spots most topic changes.

Here each pretraining run is scored two ways, on the same held-out pairs:

* its own sentence-pair head (NSP or SOP runs), read from the run's last checkpoint, where
  the pretraining loop keeps it (the exported model folder holds the encoder and MLM head);
* a probe: logistic regression trained on the frozen encoder's features (the [CLS] vector
  and the mean of the last layer) of PROBE_PAIRS training-split pairs. The probe asks what
  the features hold, for every model alike, the MLM-only one without a head included; on the
  untrained encoder it measures what the pairs give away with no pretraining at all.

The pairs are built by the pretraining pipeline itself (`data/examples.py`: label 0 = B really
follows A, 1 = B is from another document (NSP) or the two are swapped (SOP)) from the
documents every run holds out, with one fixed seed, so every model meets the same pairs (up to
its tokenizer: runs that trained their tokenizers at the same moment can differ in a few
pieces, and so in a few pairs). The pipeline masks 15% of held-out tokens; the scoring puts
the original tokens back.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from minibert import from_pretrained
from minibert.data.masking import IGNORE_INDEX
from minibert.corpus.pipeline import build_pretraining_data
from minibert.operations.files import read_json_object, write_json
from minibert.heads import mean_over_tokens
from minibert.objectives.sentence import SentencePairHead
from minibert.operations.checkpoint import Checkpoints

from .budget import REPO, Budget
from .recipes import corpus

LAYOUTS = ("nsp", "sop")
PAIR_SEED = 1234  # one seed for every model's pairs: the same held-out (and probe-training) pairs for all
PROBE_PAIRS = 4096  # training-split pairs each probe learns from
PROBE_STEPS = 200  # L-BFGS iterations of the probe's logistic regression
PROBE_L2 = 1e-3
BATCH = 256
VERSION = 1  # bump when the scoring changes: cached scores of another version are recomputed


_PAIRS: dict[tuple, tuple[list[dict], list[dict]]] = {}  # runs that share a tokenizer share their pairs


def pairs(budget: Budget, runs: Path, run_out: str, layout: str) -> tuple[list[dict], list[dict]]:
    """(probe-training batches, held-out batches) of `layout`'s pairs, unmasked, under the
    tokenizer of the run in `run_out`."""
    key = (hashlib.sha256((REPO / run_out / "tokenizer.model").read_bytes()).hexdigest(), str(runs), layout, budget.seq_len)
    if key not in _PAIRS:
        _PAIRS[key] = build_pairs(budget, runs, run_out, layout)
    return _PAIRS[key]


def build_pairs(budget: Budget, runs: Path, run_out: str, layout: str) -> tuple[list[dict], list[dict]]:
    # the held-out pairs: the pipeline's held-out documents, masked at BERT's rate (and unmasked below)
    run = read_json_object(REPO / run_out / "run.json", "delete the folder to run it again")
    data = build_pretraining_data(str(REPO / corpus(budget, runs)), data_dir=REPO / runs / "cache",
                                  tokenizer_dir=REPO / run_out, vocab_size=run["config"]["vocab_size"], seq_len=budget.seq_len,
                                  layout=layout, masking="dynamic", dupe_factor=1, mask_prob=0.15,
                                  replace_probs=(0.8, 0.1, 0.1), whole_word=False, max_span=1, short_seq_prob=0.1,
                                  batch_size=BATCH, seed=PAIR_SEED,
                                  mask_count="bernoulli", max_predictions=None, mask_smoothing=0.0)
    train = iter(data.train)
    training = [unmasked(next(train)) for _ in range(PROBE_PAIRS // BATCH)]
    return training, [unmasked(batch) for batch in data.eval]


def unmasked(batch: dict) -> dict:
    labels = batch["labels"]
    return {**batch, "input_ids": torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])}


def sentence_head(run_out: str, config) -> SentencePairHead | None:
    """The NSP/SOP head a run trained (its layout, run.json says which), from its last
    checkpoint; None for a run without a sentence task."""
    layout = read_json_object(REPO / run_out / "run.json", "delete the folder to run it again")["settings"]["layout"]
    if layout not in LAYOUTS:
        return None
    state, _ = Checkpoints(REPO / run_out / "checkpoints").load()
    prefix = f"objectives.{layout}.head."
    head = SentencePairHead(config)
    head.load_state_dict({name[len(prefix):]: tensor for name, tensor in state["model"].items() if name.startswith(prefix)})
    return head.eval()


@torch.no_grad()
def features(encoder, batches: list[dict]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pooled [CLS] vectors [N, H], probe features [N, 2H], labels [N]) of every pair."""
    pooled, probe, labels = [], [], []
    for batch in batches:
        out = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        first = out.last_hidden_state[:, 0]  # [B, T, H] -> [B, H]
        pooled.append(out.pooler_output if out.pooler_output is not None else first)
        probe.append(torch.cat([first, mean_over_tokens(out.last_hidden_state, batch["attention_mask"])], -1))
        labels.append(batch["sentence_label"])
    return torch.cat(pooled), torch.cat(probe), torch.cat(labels)


def probe_accuracy(train_x, train_y, test_x, test_y) -> float:
    """Logistic regression on standardised features (L-BFGS, a little L2), scored held out."""
    mean, std = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
    train_x, test_x = (train_x - mean) / std, (test_x - mean) / std
    torch.manual_seed(0)
    linear = torch.nn.Linear(train_x.shape[1], 2)
    optimizer = torch.optim.LBFGS(linear.parameters(), max_iter=PROBE_STEPS, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(train_x), train_y) + PROBE_L2 * linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return (linear(test_x).argmax(-1) == test_y).float().mean().item()


def pair_scores(budget: Budget, runs: Path, run_out: str) -> dict:
    """{"head": {task: accuracy} (the run's own head, on both tasks' held-out pairs; {} without
    one), "probe": {task: accuracy}, "pairs": {task: held-out pairs}}, cached in the run folder."""
    cache = REPO / run_out / "pair-scores.json"
    if cache.is_file():
        stored = read_json_object(cache, "delete it to score the run again")
        if stored.get("version") == VERSION:
            return stored
    torch.set_num_threads(1)
    model = from_pretrained(REPO / run_out, head="mlm").eval()
    head = sentence_head(run_out, model.config)
    scores = {"version": VERSION, "head": {}, "probe": {}, "pairs": {}}
    for task in LAYOUTS:
        training, held_out = pairs(budget, runs, run_out, task)
        _, train_x, train_y = features(model.encoder, training)
        pooled, test_x, test_y = features(model.encoder, held_out)
        scores["probe"][task] = probe_accuracy(train_x, train_y, test_x, test_y)
        scores["pairs"][task] = len(test_y)
        if head is not None:  # the run's own head, scored on both tasks' pairs
            with torch.no_grad():
                scores["head"][task] = (head(pooled).argmax(-1) == test_y).float().mean().item()
    write_json(cache, scores)
    return scores
