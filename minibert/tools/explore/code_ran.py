"""Which of the project's functions ran for an answer: each panel names the code that did its
work, and never code that did not run.

`CODE` names, per panel, the functions it may name; `Ran` watches which of them are called while
an answer is computed, so the batch panel names the stored-mask functions only where a stored mask
is shown, the span drawing only where spans were drawn, the sentence task only where it judged a pair.
`code_line` finds the line of a named function that computes one stage of a layer
(inside.py), so that the inside-a-layer panel can point at it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from contextlib import contextmanager
from pathlib import Path

CODE = {  # per panel, the functions it may name, in the order the page lists those that ran
    "batch": ["minibert.data.dataset:PretrainingBatches.batch", "minibert.data.static_masks:StaticMasks.apply",
              "minibert.data.static_masks:draw_static_masks", "minibert.data.masking:Masking.__call__",
              "minibert.data.masking:Masking.choose", "minibert.data.masking:Masking.choose_spans",
              "minibert.data.masking:Masking.choose_count", "minibert.data.masking:Masking.replace",
              "minibert.objectives.sentence:SentencePairTask.forward"],
    "mlm": ["minibert.tools.probe:mask_probabilities", "minibert.tools.probe:best_candidates",
            "minibert.heads:MaskedLM.predict"],
    "electra": ["minibert.objectives.rtd:ReplacedTokenDetection.forward", "minibert.objectives.rtd:gumbel_max_sample",
                "minibert.objectives.rtd:replace_masked", "minibert.heads:MaskedLM.predict", "minibert.tools.probe:replaced_probabilities"],
    "distil": ["minibert.objectives.kd:KnowledgeDistillation.forward", "minibert.objectives.kd:soft_target_kl",
               "minibert.objectives.kd:teacher_layers"],
    "model": ["minibert.model:build_layers", "minibert.model:Encoder.layer", "minibert.tools.info:describe"],
    "attention": ["minibert.tools.attention_maps:attention_probabilities"],
    "inside": ["minibert.model:Encoder.look_inside", "minibert.model:Encoder.embed", "minibert.model:Encoder.apply_layer",
               "minibert.model:Sublayer.forward", "minibert.model:Sublayer.fn_input", "minibert.model:Sublayer.residual_add",
               "minibert.attention:SelfAttention.forward", "minibert.attention:SelfAttention.heads",
               "minibert.attention:SelfAttention.probabilities", "minibert.attention:attention_probs", "minibert.attention:attend",
               "minibert.model:FeedForward.forward"],
    "run": ["minibert.runs.curves:read_log", "minibert.runs.curves:run_band"],
    # a question-answering model (questions.py)
    "qa_windows": ["minibert.finetune.kinds.windows:question_windows", "minibert.finetune.kinds.windows:cut"],
    "qa_logits": ["minibert.finetune.kinds.spans:window_logits", "minibert.heads:SpanExtractor.forward"],
    "qa_nbest": ["minibert.finetune.kinds.spans:decode_windows", "minibert.finetune.kinds.span_decoding:decode_spans",
                 "minibert.finetune.kinds.span_decoding:token_max_context", "minibert.finetune.kinds.span_decoding:best_pairs",
                 "minibert.finetune.kinds.span_decoding:assemble", "minibert.finetune.kinds.spans:chosen"],
    "qa_null": ["minibert.finetune.kinds.span_decoding:null_scores", "minibert.finetune.kinds.span_decoding:assemble"],
}
NAMED = {name for names in CODE.values() for name in names}


def named_function(name: str):
    """The function "module:Qualified.name" names, under any decorator (torch.no_grad)."""
    if name not in NAMED:
        raise ValueError(f"{name!r} is not one of the functions the panels name")
    module_name, qualified = name.split(":")
    target = importlib.import_module(module_name)
    for part in qualified.split("."):
        target = getattr(target, part)
    return inspect.unwrap(target)


def source(name: str) -> dict:
    """The source of one function the panels name, from the installed package, with the file
    (relative to the package's parent) and the line it starts at."""
    target = named_function(name)
    lines, first = inspect.getsourcelines(target)
    package_root = Path(__file__).resolve().parents[3]  # the folder that holds minibert/ (this file is minibert/tools/explore/)
    path = Path(inspect.getsourcefile(target)).resolve().relative_to(package_root.resolve())
    return {"name": name, "file": path.as_posix(), "line": first, "source": "".join(lines)}


@functools.lru_cache(maxsize=None)
def code_line(name: str, piece: str) -> dict:
    """The first line of the function `name` that holds `piece`: {"name", "file", "line", "text",
    "found"}. Where the code has changed and no line holds it, the function's first line, with
    "found" False (tests/test_explore.py fails on it; the page still answers)."""
    found = source(name)
    lines = found["source"].splitlines()
    offset = next((offset for offset, text in enumerate(lines) if piece in text), None)
    return {"name": name, "file": found["file"], "line": found["line"] + (offset or 0), "text": lines[offset or 0].strip(),
            "found": offset is not None}


class Ran:
    """Which of the functions `CODE` names run while this is open, on this thread, first call first.

    A profiler hook (sys.setprofile: this thread only, so another request's thread is not
    watched) sees every Python call and keeps those whose code object is one of the named
    functions'. It reads which code ran, nothing of what the code computed: the answers take
    that from what the functions return."""

    codes: dict | None = None  # code object -> name, built once

    def __init__(self):
        if Ran.codes is None:
            Ran.codes = {named_function(name).__code__: name for name in NAMED}
        self.ran: list[str] = []

    def __enter__(self) -> "Ran":
        self.previous = sys.getprofile()
        sys.setprofile(self.watch)
        return self

    def watch(self, frame, event, arg) -> None:
        if event == "call":
            name = self.codes.get(frame.f_code)
            if name is not None and name not in self.ran:
                self.ran.append(name)

    def __exit__(self, *exc) -> None:
        sys.setprofile(self.previous)

    def named(self, panel: str) -> list[str]:
        """The functions of `panel` that ran, in the order CODE lists them."""
        return [name for name in CODE[panel] if name in self.ran]


@contextmanager
def unwatched():
    """No profiler on this thread while open (Ran's): work that is not the answer's."""
    previous = sys.getprofile()
    sys.setprofile(None)
    try:
        yield
    finally:
        sys.setprofile(previous)
