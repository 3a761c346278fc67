"""`python -m minibert info DIR`: what a checkpoint folder holds, before anything is loaded.

    family        albert (Hugging Face format, AlbertForPreTraining)
    architecture  layers 12, hidden 768, heads 12, embedding size 128 (projected to 768), ...
    parameters    11,683,584 in the encoder (embeddings, layers, pooler); heads not counted
    tokenizer     SentencePiece, 30,000 tokens (spiece.model)
    heads         masked-LM head, sentence-order prediction (SOP)

One line per fact, read from config.json and the tensors' *names*: no weight is read (the
model is built on the meta device, which has shapes but no memory), so a folder of any size
answers at once. The parameter count is the one the papers and DESIGN.md's table give and the
loop prints, `sum(p.numel() for p in encoder.parameters())` of the backbone (`Encoder`: a shared
layer counts once, the pooler is included, the heads are not). The folder may be a minibert
checkpoint (`python train.py --variant V`, or `python train.py finetune`) or a Hugging Face
one of the six families minibert reads; anything else is a one-line error.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..config import ModelConfig
from ..finetune.checkpoint import HEADS as FINE_TUNED_HEADS, LABELS_FILE, is_classifier
from ..model import Encoder
from ..interop.huggingface import CUSTOM_CODE, export_family
from ..interop.huggingface.custom_code import HEAD_OF
from ..pretrained import FORMAT_KEY, HEAD_NAMES, checkpoint_directory, read_plan, stored_config
from ..operations.tensor_files import CONFIG_FILE, inside, open_tensors, read_json
from ..interop.huggingface.families import FAMILIES
from ..tokenizers.load import find_layout, load_tokenizer
from ..operations.outdir import GENERATOR_DIR, RUN_FILE

SHOWN_LABELS = 5


def describe(path: str | Path) -> dict[str, str]:
    """fact -> one line of text: family, architecture, parameters, tokenizer, heads (and, for
    a model of minibert's format, the Hugging Face family it exports as)."""
    directory = checkpoint_directory(path)
    stored = read_json(directory / CONFIG_FILE)
    if FORMAT_KEY in stored:
        family, config, heads, exports = own_format(directory, stored)
    elif stored.get("model_type") == CUSTOM_CODE:
        family, config, heads = custom_code_format(directory, stored)
        exports = None
    else:
        family, config, heads = reference_format(directory, stored)
        exports = None
    facts = {
        "family": family,
        "architecture": architecture(config),
        "parameters": parameters(config),
        "tokenizer": tokenizer(directory, config),
        "heads": ", ".join(heads) or "none (a bare encoder)",
    }
    if exports:
        facts["exports as"] = exports
    return facts


def own_format(directory: Path, stored: dict) -> tuple[str, ModelConfig, list[str], str | None]:
    """(family, config, heads, Hugging Face export) of a folder in minibert's format."""
    fields = dict(stored)
    marker = fields.pop(FORMAT_KEY)
    head = marker.get("head") if isinstance(marker, dict) else None
    try:
        config = stored_config(fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{directory / CONFIG_FILE}: {error}") from None
    if is_classifier(stored):
        return "minibert's format, fine-tuned (python train.py finetune)", config, [fine_tuned_head(directory, marker)], None
    run = read_json(directory / RUN_FILE) if (directory / RUN_FILE).is_file() else {}
    variant = (run.get("settings") or {}).get("variant")
    family = "minibert's format" + (f", pretrained by python train.py --variant {variant}" if variant else "")
    heads = [HEAD_NAMES[head]] if head in HEAD_NAMES and head else []
    if (directory / GENERATOR_DIR / CONFIG_FILE).is_file():
        heads.append(f"ELECTRA's generator beside it ({GENERATOR_DIR}/)")
    try:
        exports = export_family(config, head, None).model_type
    except ValueError as error:
        exports = f"no Hugging Face family ({error})"
    return family, config, heads, exports


def fine_tuned_head(directory: Path, marker: dict) -> str:
    """"SequenceClassifier with 2 labels (negative, positive)", or a regression's one score."""
    num_labels = marker.get("num_labels")
    if num_labels == 1:
        return f"{FINE_TUNED_HEADS[marker['head']].__name__}, regression (one score)"
    names = read_json(directory / LABELS_FILE).get("labels") if (directory / LABELS_FILE).is_file() else None
    shown = f" ({', '.join(map(str, names[:SHOWN_LABELS]))}{', ...' if len(names) > SHOWN_LABELS else ''})" if names else ""
    pooling = f", pooling {marker['pooling']}" if "pooling" in marker else ""
    return f"{FINE_TUNED_HEADS[marker['head']].__name__} with {num_labels} labels{shown}{pooling}"


def custom_code_format(directory: Path, stored: dict) -> tuple[str, ModelConfig, list[str]]:
    """(family, config, heads) of a folder `python -m minibert export` wrote as transformers' custom code."""
    with open_tensors(directory) as tensors:
        config, _, _ = read_plan(directory, stored, None, tensors)
    architecture = stored["architectures"][0]
    head = HEAD_OF[architecture]
    if head is None:
        heads = []
    elif head in HEAD_NAMES:
        heads = [HEAD_NAMES[head]]
    else:  # fine-tuned
        heads = [f"{head.replace('_', ' ')} with {len(stored.get('id2label') or {})} outputs"]
    return f"minibert, as transformers' custom code ({architecture}; load it with trust_remote_code=True)", config, heads


def reference_format(directory: Path, stored: dict) -> tuple[str, ModelConfig, list[str]]:
    """(family, config, heads) of a Hugging Face folder: its heads are the tensors it holds."""
    with open_tensors(directory) as tensors:
        config, _, _ = read_plan(directory, stored, None, tensors)
        names = tensors.names()
    family = FAMILIES[stored["model_type"]]
    held = [h for h in family.heads if any(inside(n, t) for n in names for t in family.head_tensors(h))]
    heads = [HEAD_NAMES[h] for h in held]
    heads += [what for module, what in family.other_heads.items() if any(inside(n, module) for n in names)]
    prefixed = any(n.startswith(family.prefix) for n in names)
    with torch.device("meta"):
        backbone = {r for ours in Encoder(config).state_dict() for r in family.reference_names(ours, None, prefixed)}
    tolerated = family.tolerated(None, prefixed)
    unread = sorted({n.split(".")[0] for n in names - backbone if not any(inside(n, t) for t in tolerated)})
    architectures = stored.get("architectures") or []
    if unread:
        labels = f", {len(stored['id2label'])} labels" if isinstance(stored.get("id2label"), dict) else ""
        heads.append(f"{', '.join(unread)} ({', '.join(architectures) or 'a task head'}{labels}; minibert does not read it)")
    role = {"rtd": " discriminator", "mlm": " generator"}.get(held[0], "") if family.model_type == "electra" and held else ""
    kind = ", ".join(architectures) or "no architectures named"
    return f"{family.model_type}{role} (Hugging Face format, {kind})", config, heads


def architecture(config: ModelConfig) -> str:
    H = config.hidden_size
    E = config.embedding_size or H
    if config.position_encoding == "learned":
        offset = f", ids from {config.position_offset}" if config.position_offset else ""
        positions = f"learned positions {config.max_positions}{offset}"
    else:
        positions = f"rotary positions (up to {config.max_length} tokens)"
    return ", ".join([
        f"layers {config.num_layers}", f"hidden {H}", f"heads {config.num_heads}",
        f"embedding size {E}" + (f" (projected to {H})" if E != H else ""),
        f"sharing {config.share_layers}", positions, f"intermediate {config.intermediate_size}",
        f"vocabulary {config.vocab_size}", f"{config.norm}-LN",
    ])


def parameters(config: ModelConfig) -> str:
    with torch.device("meta"):  # shapes only
        encoder = Encoder(config)
    parts = "embeddings, layers" + (", pooler" if config.pooler else "")
    return f"{sum(p.numel() for p in encoder.parameters()):,} in the encoder ({parts}); heads not counted"


def tokenizer(directory: Path, config: ModelConfig) -> str:
    names = find_layout(directory)
    if names is None:
        return "none"
    loaded = load_tokenizer(directory)
    fits = "" if loaded.vocab_size <= config.vocab_size else f"; more than the model's {config.vocab_size:,} embeddings: not its tokenizer"
    return f"{loaded.kind}, {loaded.vocab_size:,} tokens ({' + '.join(names)}){fits}"
