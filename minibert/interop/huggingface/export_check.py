"""Read an export back with transformers before anyone relies on it.

The most common complaint about BERT-pretraining codebases is an export to Hugging Face that
loads with random weights (transformers only warns about a weight it did not find) or computes
other outputs, found much later. `python -m minibert export` therefore writes into a temporary
folder and hands it to `check_export` before the folder becomes OUT: transformers' AutoTokenizer
must give our ids on a few probe texts, the AutoModel* class the folder will be loaded with must
read every weight (none missing, none unexpected but the pooler a class without one leaves out),
and its outputs must equal ours within TOLERANCE (a span extractor's: the start and the end
logits). Any failure is an ExportMismatch that names what differs: the tensors transformers did
not read, the probe text whose ids differ, or the first stage (embeddings, a layer, the head)
whose outputs differ and the tensors it is made of.
A sequence classifier must also give, through transformers' text-classification pipeline,
minibert's label and score (softmax probability, or a regression's score) on every probe text.

A custom-code export (custom_code.py) is loaded the same way, with `trust_remote_code=True`:
its code is minibert's own, so its outputs must equal ours within the tighter CUSTOM_TOLERANCE.

`check_export` is the one place in minibert that imports transformers, at run time and only
when it is installed (tests/test_imports.py holds the package to that): minibert itself runs
without it, and the check then says it was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ...tokenizers.base import Tokenizer
from ...operations.tensor_files import listing

TOLERANCE = 1e-4  # largest difference allowed, relative to the largest output (or 1, if larger)
CUSTOM_TOLERANCE = 1e-5  # the same, for an export that runs minibert's own code: only float rounding may differ
SCORE_TOLERANCE = 1e-5  # a classifier's scores from transformers' pipeline: probabilities (a regression's score, relative)
INSTALL = "pip install transformers"

# The Auto class a user loads each kind of export with: it must give the class config.json names.
AUTO_CLASSES = {None: "AutoModel", "mlm": "AutoModelForMaskedLM", "rtd": "AutoModelForPreTraining",
                "classifier": "AutoModelForSequenceClassification", "token_classifier": "AutoModelForTokenClassification",
                "span_extractor": "AutoModelForQuestionAnswering"}
SEQUENCE_HEADS = ("classifier",)  # one row of logits per sequence, not per token
# The outputs compared, where they are not `logits`: both models name them alike
OUTPUTS = {None: ("last_hidden_state",), "span_extractor": ("start_logits", "end_logits")}

# Short texts of the kinds that trip tokenizers (casing, punctuation, accents, symbols, odd
# whitespace, a mask token), one longer than many models take (truncation), and sentence pairs
# (the segment layout). "{mask}" becomes the tokenizer's own spelling of its mask token. A pair
# is compared only where it fits the model untruncated: how to cut a pair that is too long is
# the tokenizer's rule, not the export's, and where both texts must be cut to an odd total,
# minibert's longest-first keeps the odd token in the first text, transformers 5's in the longer.
PROBES = (
    "The cat sat on the mat.",
    "Return a new list with the same elements, unless the list is empty!",
    "{mask} is the capital of France, said the café's owner.",
    "Symbols ①, ﬁ and 🤗 sit\tbeside  odd   whitespace.",
    " ".join(["A function may return a value or raise an exception."] * 60),
)
PAIRS = (("Who won?", "Nobody did."), ("How old is the house?", "It was built a hundred years ago."))


class ExportMismatch(ValueError):
    """transformers reads the export differently from what minibert wrote: it must not be published."""


@dataclass(frozen=True)
class Check:
    """What the check compared and found."""

    version: str  # transformers'
    architecture: str  # the class the Auto class loaded
    probes: int  # texts and pairs compared
    inputs: tuple[str, ...]  # the id tensors AutoTokenizer gave, all equal to ours
    unused: tuple[str, ...]  # tensors the class leaves out as expected (a pooler it does not have)
    output: str  # "logits", "last_hidden_state" or "start_logits/end_logits"
    difference: float  # largest absolute difference of those outputs over the real tokens
    scale: float  # what the tolerance is relative to
    tolerance: float  # TOLERANCE, or CUSTOM_TOLERANCE for custom code
    scores: float | None = None  # a sequence classifier's: largest difference of the pipeline's scores from ours


def check_export(directory: Path, model: nn.Module, tokenizer: Tokenizer, head: str | None,
                 names: dict[str, tuple[str, ...]], custom: bool = False, labels: list | None = None) -> Check | None:
    """Load `directory` with transformers and compare it with `model` and `tokenizer`, which it
    was written from (`names`: our parameter -> the tensors it was written as; `custom`: a
    custom-code folder; `labels`: a classifier's class names). None when transformers is not
    installed; an ExportMismatch when the export is not what was meant."""
    try:
        import transformers  # the one import of transformers in minibert: here, at run time, if installed
    except ImportError:
        return None
    tolerance = CUSTOM_TOLERANCE if custom else TOLERANCE
    return compare(transformers, Path(directory), model, tokenizer, head, names, tolerance, labels)


def compare(transformers, directory: Path, model: nn.Module, tokenizer: Tokenizer, head: str | None,
            names: dict[str, tuple[str, ...]], tolerance: float, labels: list | None = None) -> Check:
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    reference, unused = load_reference(transformers, directory, head, pooler_tensors(names))
    theirs = attempt(lambda: transformers.AutoTokenizer.from_pretrained(directory, trust_remote_code=True),
                     "AutoTokenizer cannot read the tokenizer")
    max_length = model.config.max_length
    batches = probe_batches(tokenizer, max_length)
    fields = OUTPUTS.get(head, ("logits",))
    output = "/".join(fields)
    difference, scale, inputs, scores = 0.0, 1.0, (), None
    pipe = (transformers.pipeline("text-classification", model=reference, tokenizer=theirs, device="cpu")
            if head in SEQUENCE_HEADS else None)  # built once, used on each batch
    for firsts, seconds in batches:
        ours = tokenizer.batch(firsts, seconds, max_length=max_length)
        encoded = theirs(firsts, seconds, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        inputs = tuple(encoded)
        same_ids(ours, encoded, firsts, seconds)
        ours = {key: ours[key] for key in encoded}  # what the export takes (no token_type_ids for one segment type)
        with torch.no_grad():
            want, got = outputs(model(**ours), fields), outputs(reference(**encoded), fields)
        real = slice(None) if head in SEQUENCE_HEADS else ours["attention_mask"].bool()  # rows: sequences or real tokens
        scale = max(scale, want[real].abs().max().item())
        gap = (got - want)[real].abs().max().item() if got.shape == want.shape else float("inf")
        if gap > tolerance * scale:
            where = first_difference(model, reference, ours, encoded, names, tolerance)
            raise ExportMismatch(
                f"transformers' {type(reference).__name__} computes other {output} than minibert: largest difference "
                f"{gap:.2e} (allowed {tolerance * scale:.1e}){where}"
            )
        difference = max(difference, gap)
        if pipe is not None:
            scores = max(scores or 0.0, same_predictions(pipe, firsts, seconds, want, labels, max_length))
    return Check(transformers.__version__, type(reference).__name__, sum(len(firsts) for firsts, _ in batches), inputs,
                 unused, output, difference, scale, tolerance, scores)


def outputs(result, fields: tuple[str, ...]) -> torch.Tensor:
    """A model's output named in `fields`, or its several outputs stacked along a last axis (a span
    extractor's start and end logits, [B, T, 2]): one tensor to compare, whose first axes are the
    sequences (and their tokens) whichever the head."""
    values = [getattr(result, name) for name in fields]
    return values[0] if len(values) == 1 else torch.stack(values, dim=-1)


def same_predictions(pipe, firsts: list[str], seconds: list[str] | None, logits: torch.Tensor, labels: list | None,
                     max_length: int) -> float:
    """transformers' text-classification pipeline gives minibert's predictions: the class named
    `labels`[argmax] with its softmax probability, or a regression's score as it is. Returns the
    largest score difference; an ExportMismatch names the first text predicted otherwise."""
    texts = firsts if seconds is None else [{"text": a, "text_pair": b} for a, b in zip(firsts, seconds)]
    theirs = pipe(texts, truncation=True, max_length=max_length)
    regression = logits.shape[-1] == 1
    probabilities = logits.float() if regression else logits.float().softmax(-1)
    largest = 0.0
    for row, (text, got) in enumerate(zip(firsts, theirs)):
        top = probabilities[row].topk(min(2, probabilities.shape[-1]))
        score = top.values[0].item()
        gap = abs(got["score"] - score) / max(1.0, abs(score))
        tied = len(top.values) > 1 and top.values[0] - top.values[1] <= SCORE_TOLERANCE  # either label is right
        if not regression and got["label"] != str(labels[top.indices[0]]) and not tied:
            raise ExportMismatch(f"transformers' text-classification pipeline predicts {got['label']!r} for {text[:60]!r}, "
                                 f"minibert {labels[top.indices[0]]!r}")
        if gap > SCORE_TOLERANCE:
            raise ExportMismatch(f"transformers' text-classification pipeline scores {text[:60]!r} {got['score']:.6f}, "
                                 f"minibert {score:.6f}")
        largest = max(largest, gap)
    return largest


def probe_batches(tokenizer: Tokenizer, max_length: int) -> list[tuple[list[str], list[str] | None]]:
    """(texts, None) and (first segments, second segments): PROBES with the tokenizer's mask
    token, and the PAIRS that fit the model untruncated."""
    texts = [text.format(mask=tokenizer.piece(tokenizer.mask_id)) for text in PROBES]
    pairs = [(a, b) for a, b in PAIRS if len(tokenizer.encode_pair(a, b)[0]) <= max_length]
    return [(texts, None)] + ([([a for a, _ in pairs], [b for _, b in pairs])] if pairs else [])


def load_reference(transformers, directory: Path, head: str | None, pooler: set[str]) -> tuple[nn.Module, tuple[str, ...]]:
    """The export loaded as users will load it, and the tensors it left out as expected: a
    pooler the class does not have (RoFormer's; BertForMaskedLM's). Any other tensor missing
    (left random), unexpected (unread) or of another shape is an ExportMismatch naming them."""
    auto = AUTO_CLASSES[head]
    # trust_remote_code: the code of a custom-code folder (config.json's auto_map) may run; a built-in family has none
    reference, info = attempt(lambda: getattr(transformers, auto).from_pretrained(
        directory, output_loading_info=True, trust_remote_code=True), f"{auto} cannot load it")
    name = type(reference).__name__
    expected = (transformers.AutoConfig.from_pretrained(directory, trust_remote_code=True).architectures or [name])[0]
    if name != expected:
        raise ExportMismatch(f"{auto} loads it as {name}, but its config.json names {expected}")
    no_pooler = getattr(reference.base_model, "pooler", None) is None
    unexpected = set(info["unexpected_keys"])
    unused = sorted(unexpected & pooler) if no_pooler else []
    problems = [f"{what} {listing(sorted(keys))}" for what, keys in (
        ("missing (left at random values)", set(info["missing_keys"])),
        ("unexpected (not read)", unexpected - set(unused)),
        ("of another shape", {str(k[0]) if isinstance(k, tuple) else str(k) for k in info["mismatched_keys"]}),
    ) if keys]
    if problems:
        raise ExportMismatch(f"{name} does not read the weights as minibert wrote them: tensor(s) {'; '.join(problems)}")
    return reference.eval(), tuple(unused)


def attempt(load, what: str):
    """`load()`, or an ExportMismatch with the first line of transformers' own error."""
    try:
        return load()
    except Exception as error:  # transformers raises many kinds; each means the export does not load
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ExportMismatch(f"transformers' {what} ({first})") from None


def pooler_tensors(names: dict[str, tuple[str, ...]]) -> set[str]:
    """The tensors our pooler was written as."""
    return {n for ours, written in names.items() if ours.removeprefix("encoder.").startswith("pooler.") for n in written}


def same_ids(ours: dict, encoded, firsts: list[str], seconds: list[str] | None) -> None:
    """AutoTokenizer's id tensors equal ours, or an ExportMismatch naming the first text that differs."""
    for key in encoded:
        differs = [i for i in range(len(firsts)) if key not in ours or real_ids(ours, key, i) != real_ids(encoded, key, i)]
        if differs:
            text = firsts[differs[0]] + ("" if seconds is None else f" / {seconds[differs[0]]}")
            raise ExportMismatch(f"transformers' AutoTokenizer gives other {key} than minibert's tokenizer, "
                                 f"first on {text[:60]!r}")


def real_ids(batch, key: str, row: int) -> list[int]:
    """One row of a padded id tensor, without its padding."""
    return batch[key][row, : int(batch["attention_mask"][row].sum())].tolist()


def first_difference(model: nn.Module, reference: nn.Module, ours: dict, encoded, names: dict[str, tuple[str, ...]],
                     tolerance: float) -> str:
    """'; first at STAGE, made of TENSORS': the first of the embeddings, each layer and the head
    whose output differs, from both models' hidden states; empty where those do not line up."""
    encoder = getattr(model, "encoder", model)
    with torch.no_grad():
        want = encoder(**ours, output_hidden_states=True).hidden_states
        got = reference(**encoded, output_hidden_states=True).hidden_states
    if got is None or len(got) != len(want) or any(g.shape != w.shape for g, w in zip(got, want)):
        return ""
    real = ours["attention_mask"].bool()
    prefix = "encoder." if encoder is not model else ""
    module_names = {id(module): name for name, module in encoder.named_modules()}
    for stage, (w, g) in enumerate(zip(want, got)):
        if (g - w)[real].abs().max().item() > tolerance * max(1.0, w[real].abs().max().item()):
            if stage == 0:
                label, parts = "the embeddings", ("embeddings", "embedding_projection")
            else:
                label, parts = f"layer {stage - 1}", tuple(module_names[id(m)] for m in encoder.layer(stage - 1))
            break
    else:
        label, parts, prefix = "the head", ("head",), ""
    tensors = [n for o, written in names.items() if any(o.startswith(f"{prefix}{p}.") for p in parts) for n in written]
    return f"; first at {label}, written as {listing(tensors)}" if tensors else f"; first at {label}"
