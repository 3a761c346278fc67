"""The checkpoint that `python -m minibert explore DIR` looks at, loaded once.

A folder `python train.py` left holds more than a model: run.json records the variant and
every setting, so the explorer rebuilds what the run itself built, with the run's own code:

    the pretrainer     the kept model with the objectives around it (variants.build_pretrainer),
                       their weights from the run's newest checkpoint: the NSP/SOP head,
                       ELECTRA's generator and DistilBERT's teacher are there, not in the model
    the data           the run's corpus, cut, masked and batched by build_pretraining_data with
                       the run's settings (runs/run.py:data_settings); the cache the run filled
                       makes this a matter of opening files
    the masking        the run's Masking, which draws the masks of a text the learner types

A Hugging Face folder has no run: only its model and tokenizer, masked as BERT did (15%, 80/10/10).
A question-answering model (`python train.py finetune` on SQuAD) is its SpanExtractor, how its
fine-tune read questions (its checkpoint's `reading`), and an example to ask it: the first question of the
fine-tune's dev file where eval.json names one that is still there, else one of the explorer's own.
Every answer to a text reads this object under `lock`: one model, many request threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ...corpus.pipeline import PretrainingData, build_pretraining_data
from ...data.masking import Masking
from ...data.static_masks import EXAMPLES_PER_CHUNK, draw_static_masks
from ...operations.checkpoint import Checkpoints
from ...operations.outdir import GENERATOR_DIR
from ...operations.state import load_trainable_state
from ...finetune.checkpoint import HEADS, load_classifier
from ...finetune.kinds.squad import read_squad
from ...operations.tensor_files import CONFIG_FILE, read_json
from ...pretrained import FORMAT_KEY, MissingHead, checkpoint_directory, from_pretrained
from ...runs.run import asked_vocab_size, data_settings, load_teacher
from ...tokenizers import load_tokenizer
from ...tokenizers.base import Tokenizer
from ...training.loop import Pretrainer
from ...training.settings import Settings
from ...variants import Variant, build_pretrainer, get_variant
from ...operations.outdir import LAUNCHED_FROM, RUN_FILE

# A Hugging Face folder was pretrained as BERT's paper says: 15% of the tokens, 80/10/10.
PAPER_MASKING = dict(mask_prob=0.15, replace_probs=(0.8, 0.1, 0.1), max_span=1, whole_word=False, count="bernoulli", smoothing=0.0)


@dataclass
class Session:
    directory: Path
    tokenizer: Tokenizer
    model: nn.Module  # the kept model: MaskedLM, ReplacedTokenDetector, or a bare Encoder
    head: str | None  # "mlm", "rtd" or None, as from_pretrained names them
    masking: Masking | None  # what draws the masks of a typed text (None: a question-answering model)
    settings: Settings | None = None  # the run's (None: a Hugging Face folder)
    variant: Variant | None = None
    pretrainer: Pretrainer | None = None  # the model with the run's objectives
    weights: str = "the kept model"  # where the weights came from, in words
    data: PretrainingData | None = None
    notes: list[str] = field(default_factory=list)  # what the page cannot show, and why
    reading: dict | None = None  # how a question-answering model reads (its Classifier's; None: a pretrained model)
    example: tuple[str, str] | None = None  # a question and its passage, for a question-answering model's page
    mask_states: dict = field(default_factory=dict)  # a static run's masking generator at chunk starts (static_mask_states)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def encoder(self) -> nn.Module:
        return getattr(self.model, "encoder", self.model)

    @property
    def static(self) -> bool:
        """Under static masking the run's training examples carry their stored masks."""
        return self.data is not None and self.data.train.static_masks is not None

    def copy_rows(self) -> np.ndarray:
        """The row of each static copy's first example, in copy order, as write_examples recorded
        them when it stored the copies one after the other. A cache from before that record
        gives the first copy only (open_session notes it); a copy whose blocks yielded no
        example has none to show."""
        examples = self.data.train.examples
        starts = examples.copy_starts if examples.copy_starts is not None else np.zeros(1, dtype=np.int64)
        return starts[starts < np.append(starts[1:], len(examples))]


def open_session(path: str | Path) -> Session:
    """Load DIR: a `python train.py` run folder (run.json beside the model) or a Hugging Face one."""
    directory = checkpoint_directory(path)
    marker = read_json(directory / CONFIG_FILE).get(FORMAT_KEY) if (directory / CONFIG_FILE).is_file() else None
    head = marker.get("head") if isinstance(marker, dict) else None
    if head == "span_extractor":
        return answering_session(directory)
    if head in HEADS:
        raise ValueError(f"{directory} holds a fine-tuned {head.replace('_', ' ')}; the explorer shows pretrained models "
                         f"and question-answering ones (python -m minibert predict runs this one)")
    run = read_json(directory / RUN_FILE) if (directory / RUN_FILE).is_file() else {}
    tokenizer = load_tokenizer(directory)
    if "settings" not in run:
        model, head = kept_model(directory, ("mlm", "rtd", None))
        masking = Masking.for_tokenizer(tokenizer, **PAPER_MASKING)
        return Session(directory, tokenizer, model, head, masking,
                       notes=[f"{directory} holds no run.json: the run's batches, objectives and curves are unknown"])
    settings = Settings(**run["settings"])
    variant = get_variant(settings.variant)
    model, head = kept_model(directory, (variant.head,))
    session = Session(directory, tokenizer, model, head, Masking.for_tokenizer(tokenizer, **run_masking(settings)),
                      settings=settings, variant=variant)
    session.pretrainer = run_pretrainer(session, run.get(LAUNCHED_FROM))
    session.data = run_data(session, run.get("model_overrides") or {})
    if session.data is not None:
        session.masking = session.data.train.masking
    if session.static and session.data.train.examples.copy_starts is None:
        session.notes.append("the run's examples were cached before each static copy's first row was recorded: "
                             "Draw again shows copy 1 only (a cache built now records them)")
    return session


def static_mask_states(session: Session) -> dict:
    """The static masks' generator as it stood when each chunk holding a copy's first row began,
    drawn once through with the run's masking and seed (draw_static_masks), in serve's thread or
    at the first Draw again that needs it: each Draw again then redraws its copy's stored mask
    from that chunk, not from the first (example.py: prepare, stored_mask_drawn_again)."""
    train = session.data.train
    generator = torch.Generator().manual_seed(train.seed)
    states, wanted = {0: generator.get_state()}, {int(row) // EXAMPLES_PER_CHUNK for row in session.copy_rows()}
    if max(wanted) > 0:
        for index, _ in enumerate(draw_static_masks(train.examples, train.masking, seed=train.seed, generator=generator)):
            if index + 1 in wanted:
                states[index + 1] = generator.get_state()
            if index + 1 >= max(wanted):
                break
    return states


# The page's example where the fine-tune's dev file is not at hand: a question and a passage of our own.
EXAMPLE_QUESTION = "Who designed the bridge over the river?"
EXAMPLE_PASSAGE = ("The old bridge over the river was designed by Mary Lane, an engineer from the town, and opened "
                   "in 1887. It replaced a ferry that had carried people and carts across the water for two hundred "
                   "years. The bridge is built of stone, has five arches and is still open to walkers today.")


def answering_session(directory: Path) -> Session:
    """A fine-tuned question-answering model, as `python -m minibert predict` loads it."""
    found = load_classifier(directory)
    session = Session(directory, found.tokenizer, found.model, "span", None, weights="the fine-tuned model",
                      reading=dict(found.reading), example=(EXAMPLE_QUESTION, EXAMPLE_PASSAGE))
    dev = fine_tune_dev(directory)
    if dev is not None:
        session.example = dev
    else:
        session.notes.append("the fine-tune's dev file is not at hand: the example question is the explorer's own")
    return session


def fine_tune_dev(directory: Path) -> tuple[str, str] | None:
    """The first question of the dev file eval.json names, with its passage; None where it is
    gone or unreadable (the page then offers its own example)."""
    try:
        dev = read_json(directory / "eval.json").get("args", {}).get("dev")
        first = next(iter(read_squad(Path(dev), labelled=False))) if dev else None
    except (OSError, ValueError, TypeError, StopIteration, AttributeError):
        return None
    return None if first is None else (first.question, first.context)


def kept_model(directory: Path, heads: tuple[str | None, ...]) -> tuple[nn.Module, str | None]:
    """The model in DIR with the first of `heads` it holds, in eval mode (as from_pretrained returns it)."""
    for head in heads[:-1]:
        try:
            return from_pretrained(directory, head=head), head
        except MissingHead:
            pass
    return from_pretrained(directory, head=heads[-1]), heads[-1]


def run_masking(settings: Settings) -> dict:
    return dict(mask_prob=settings.mask_prob, replace_probs=tuple(settings.replace_probs), max_span=settings.max_span,
                whole_word=settings.whole_word, count="bernoulli", smoothing=0.0)  # a typed text: token by token, one sequence


def run_path(path: str, directory: Path, launched_from: str | None) -> Path:
    """A path from run.json's settings, found from here. An absolute one is itself; a relative one
    (--teacher checkpoints/bert) was relative to the folder the run was launched from: that
    folder where run.json records it, else the first of the run folder's parents, or the folder
    explore runs in, that holds it (a run left in checkpoints/distilbert was most likely
    launched beside checkpoints/)."""
    given = Path(path)
    if given.is_absolute():
        return given
    bases = ([Path(launched_from)] if launched_from else []) + list(directory.resolve().parents) + [Path.cwd()]
    return next((base / given for base in bases if (base / given).exists()), given)


def run_pretrainer(session: Session, launched_from: str | None = None) -> Pretrainer | None:
    """The run's kept model and objectives, as `python train.py` built them, with the weights
    of its newest checkpoint (where the heads it throws away live) or, without one, the kept model's."""
    settings, variant, directory = session.settings, session.variant, session.directory
    teacher = None
    if variant.needs_teacher:
        try:
            teacher = load_teacher(str(run_path(settings.teacher, directory, launched_from)), settings.seq_len)
        except (ValueError, FileNotFoundError) as error:
            session.notes.append(f"the teacher is not where the run found it ({error}); the DistilBERT panel needs it")
            return None
    generator_dir = directory / GENERATOR_DIR
    generator = from_pretrained(generator_dir, head="mlm") if (generator_dir / CONFIG_FILE).is_file() else None
    pretrainer = build_pretrainer(variant, settings, session.model.config, teacher, generator)
    pretrainer.model.load_state_dict(session.model.state_dict())
    saved = Checkpoints(directory / "checkpoints").load()
    if saved is not None:
        state, path = saved
        load_trainable_state(pretrainer, state["model"])
        session.weights = f"checkpoints/{path.name}, the run's newest checkpoint (the kept model and its training heads)"
    else:
        session.notes.append("no checkpoint beside the model: the NSP/SOP head is untrained here")
    session.model = pretrainer.model.eval()
    return pretrainer.eval()


def run_data(session: Session, model_overrides: dict) -> PretrainingData | None:
    """The run's examples and masks, rebuilt by the run's pipeline (from its cache, where it is)."""
    settings = session.settings
    asked = asked_vocab_size(session.variant, model_overrides)
    try:
        return build_pretraining_data(settings.data, **data_settings(settings, session.directory, asked, batch_size=1))
    except (OSError, ValueError) as error:
        session.notes.append(f"the run's corpus could not be read again ({error}); type a text instead")
        return None
