"""A model no built-in transformers class holds, exported with its own code: transformers' custom-code folder.

transformers loads an architecture it does not ship from a folder that carries the code itself
(ModernBERT, NomicBERT, MosaicBERT and Jina's BERT were first published this way): config.json's
`auto_map` names, for each Auto class, a class in one of the folder's Python files, and the user
opts in to running that code with `trust_remote_code=True`:

    model = AutoModelForMaskedLM.from_pretrained("albert-hf", trust_remote_code=True)

The folder minibert writes holds

    config.json                  model_type "minibert", `auto_map`, and every ModelConfig field
    model.safetensors            minibert's state dict, under minibert's own parameter names
    configuration_minibert.py    MinibertConfig     } the wrapper (templates/): transformers'
    modeling_minibert.py         MinibertFor...     } interface, and nothing of the model itself
    model.py, attention.py, heads.py, config.py ...  minibert's own source, copied (source_copy.py)
    tokenizer.json & co.         as for a built-in family

so it runs where only torch and transformers are installed, and computes what minibert computes
with the same code. `python -m minibert export` writes one wherever no built-in family holds
the model exactly (the default albert, electra and distilbert runs: rotary positions with
shared layers, a replaced-token head or no segment embeddings; pre-LN; attention-only or
FFN-only sharing; a fine-tuned head no built-in class computes, task_heads.py), and `save_pretrained(format="hf", family="minibert")`
writes one for any model. `minibert.from_pretrained` reads the folder back (`custom_plan`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch import nn

from ...config import ModelConfig
from ...operations.files import write_atomic, write_json
from ...operations.tensor_files import CONFIG_FILE, SAFETENSORS_FILE, TensorFile, save_tensors
from ...pretrained import HEAD_NAMES, HEADS, CheckpointPlan, MissingHead
from .family import TASK_HEADS
from .source_copy import copied_sources
from .task_heads import label_fields

MODEL_TYPE = "minibert"  # config.json's model_type, and the name `family=` picks this export by
TEMPLATES = Path(__file__).parent / "templates"  # the wrapper's two files, copied as they are
CONFIGURATION, MODELING = "configuration_minibert", "modeling_minibert"

# The head a model holds -> the wrapper class that runs it (and config.json's `architectures`).
# "classifier", "token_classifier" and "span_extractor" are a fine-tuned checkpoint's (minibert/finetune/checkpoint.py).
ARCHITECTURES = {
    None: "MinibertModel",
    "mlm": "MinibertForMaskedLM",
    "rtd": "MinibertForPreTraining",
    "classifier": "MinibertForSequenceClassification",
    "token_classifier": "MinibertForTokenClassification",
    "span_extractor": "MinibertForQuestionAnswering",
}
HEAD_OF = {architecture: head for head, architecture in ARCHITECTURES.items()}
AUTO_MAP = {
    "AutoConfig": f"{CONFIGURATION}.MinibertConfig",
    "AutoModel": f"{MODELING}.MinibertModel",
    "AutoModelForMaskedLM": f"{MODELING}.MinibertForMaskedLM",
    "AutoModelForPreTraining": f"{MODELING}.MinibertForPreTraining",  # ELECTRA's discriminator, as ElectraForPreTraining
    "AutoModelForSequenceClassification": f"{MODELING}.MinibertForSequenceClassification",
    "AutoModelForTokenClassification": f"{MODELING}.MinibertForTokenClassification",
    "AutoModelForQuestionAnswering": f"{MODELING}.MinibertForQuestionAnswering",
}
FIELDS = tuple(field.name for field in dataclasses.fields(ModelConfig))


def save_custom_code(model: nn.Module, directory: Path, head: str | None, labels: list | None = None) -> None:
    """Write `model` (holding `head`, a key of ARCHITECTURES) as a custom-code folder without its
    tokenizer: weights, code, and config.json last, so that a folder with a config.json is
    complete. `labels`: a classifier's class names, in id order."""
    directory.mkdir(parents=True, exist_ok=True)
    save_tensors(model, {name: (name,) for name in model.state_dict()}, directory / SAFETENSORS_FILE)
    for name, text in code_files().items():
        write_atomic(directory / name, text)
    write_json(directory / CONFIG_FILE, custom_config(model, head, labels))


def code_files() -> dict[str, str]:
    """file name -> text of the folder's Python files: the wrapper, then minibert's source."""
    wrapper = {f"{name}.py": (TEMPLATES / f"{name}.py.in").read_text(encoding="utf-8") for name in (CONFIGURATION, MODELING)}
    return {**wrapper, **copied_sources()}


def code_file_names() -> list[str]:
    return sorted(code_files())


def custom_config(model: nn.Module, head: str | None, labels: list | None) -> dict:
    """config.json: the model's ModelConfig fields beside transformers' own keys."""
    fields = model.config.to_dict()
    if fields["attention_backend"] == "triton":  # the kernel stays out of the folder (source_copy.LEFT_OUT)
        fields["attention_backend"] = "auto"
    config = {"model_type": MODEL_TYPE, "architectures": [ARCHITECTURES[head]], "auto_map": AUTO_MAP, **fields}
    if head in TASK_HEADS:
        config.update(label_fields(model, labels))
        if hasattr(model, "pooling"):
            config["pooling"] = model.pooling
    return config


def custom_plan(stored: dict, head: str | None, tensors: TensorFile) -> CheckpointPlan:
    """`from_pretrained` of a custom-code folder: minibert's own names, as in minibert's format;
    a task model's encoder alone under `encoder.`."""
    architecture = (stored.get("architectures") or [None])[0]
    if architecture not in HEAD_OF:
        raise ValueError(f"architectures names {architecture!r}; a minibert export names one of {', '.join(HEAD_OF)}")
    held = HEAD_OF[architecture]
    if head is not None and head != held:
        also = f" or head={held!r}" if held in HEADS and held is not None else ""
        raise MissingHead(f"this {architecture} folder holds no {HEAD_NAMES[head]}; load it with head=None{also}")
    config = ModelConfig.from_dict({name: stored[name] for name in FIELDS if name in stored})
    prefix = "encoder." if held is not None and head is None else ""
    return config, lambda ours: (prefix + ours,), ("head",) if prefix else ()
