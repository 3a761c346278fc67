"""--init DIR: a pretraining run that starts from a saved model instead of random weights.

Continued pretraining (a released checkpoint, trained on one's own text) and BERT's second
phase (the 128-token run's model, trained on at 512 tokens) are one thing: a NEW run whose
first weights, architecture and vocabulary are a checkpoint's. Unlike --resume, the optimizer,
schedule, step count and data order start afresh, so --seq-len, --batch-size and the rest may
change — up to the positions the model has.

Everything is read by the loaders that `from_pretrained` and `load_tokenizer` already are, so
minibert's own checkpoints and the five Hugging Face families load alike:

    the kept model        MaskedLM, or ELECTRA's discriminator; from a checkpoint without that
                          head only the encoder is loaded and the head starts fresh
    the tokenizer         tokenizer.model (SentencePiece) or vocab.txt (WordPiece) beside it
    ELECTRA's generator   --init-generator DIR (an MLM checkpoint), or a fresh one at
                          --generator-fraction of the loaded discriminator's width
    NSP / SOP head        always fresh: checkpoints keep only the model that survives pretraining

The checkpoint's config wins over the variant's default architecture; a flag that asks for a
different architecture is an error, while what only changes how the model runs (dropout, the
attention backend, unpadding) may be set. The log says in one line what starts fresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..config import ModelConfig
from ..tokenizers import load_tokenizer
from ..tokenizers.base import Tokenizer
from ..heads import MaskedLM
from ..pretrained import HEAD_NAMES, MissingHead, from_pretrained, head_of
from ..variants import Variant
from ..training.settings import Settings, flag

# ModelConfig fields that say how the model runs, not what it is: a flag may change them.
RUNTIME_FIELDS = ("hidden_dropout", "attention_dropout", "attention_backend", "unpad", "reference")


@dataclass
class Start:
    """What a run starting from --init takes from its checkpoint(s)."""

    directory: Path
    model: nn.Module  # the variant's kept model (MaskedLM / ReplacedTokenDetector), or a bare Encoder
    tokenizer: Tokenizer
    config: ModelConfig  # the run's architecture: the checkpoint's, with runtime flags applied
    generator: MaskedLM | None = None  # ELECTRA: --init-generator

    def load_into(self, pretrainer: nn.Module) -> str:
        """Copy the loaded weights into the run's freshly built `Pretrainer`; return the log
        line that says what starts fresh (a head the checkpoint lacked, the objectives' parts)."""
        kept = pretrainer.model
        whole = type(kept) is type(self.model)
        (kept if whole else kept.encoder).load_state_dict(self.model.state_dict())
        fresh = [] if whole else [HEAD_NAMES[head_of(kept)]]
        for name, objective in pretrainer.objectives.items():
            if name == "rtd" and self.generator is None:
                fresh.append("ELECTRA generator (--generator-fraction of the discriminator's width)")
            elif name != "rtd" and any(True for _ in objective.parameters()):
                fresh.append(f"{name.upper()} head")
        loaded = "weights loaded" + (f"; freshly initialised: {', '.join(fresh)}" if fresh else ", nothing starts fresh")
        return f"starting from {self.directory} ({sum(p.numel() for p in self.model.parameters()):,} parameters): {loaded}"


def load_start(variant: Variant, settings: Settings, overrides: dict) -> Start:
    """Read --init (and --init-generator) and check that they fit this variant and these flags."""
    if settings.init is None:
        raise ValueError("--init-generator continues an ELECTRA generator beside its discriminator; pass the discriminator with --init too")
    if variant.needs_teacher:
        raise ValueError(
            f"--init does not apply to --variant {variant.name}: its student starts from half the layers of --teacher; "
            f"to go on pretraining a DistilBERT checkpoint with MLM alone, use --variant roberta --init {settings.init}"
        )
    if settings.init_generator is not None and variant.head != "rtd":
        raise ValueError(f"--init-generator is ELECTRA's; --variant {variant.name} has no generator: drop the flag")
    directory = checkpoint_dir("--init", settings.init, settings.out)
    model, tokenizer = load_checkpoint("--init", directory, variant.head)
    config = run_config("--init", directory, model.config, overrides, settings)
    check_fits(variant, settings, config, directory)
    generator = None
    if settings.init_generator is not None:
        generator_dir = checkpoint_dir("--init-generator", settings.init_generator, settings.out)
        generator, _ = load_checkpoint("--init-generator", generator_dir, "mlm", fallback=False)
        check_generator(generator, model, generator_dir)
        runtime = {name: value for name, value in overrides.items() if name in RUNTIME_FIELDS}
        generator = with_config(generator, run_config("--init-generator", generator_dir, generator.config, runtime, settings))
    return Start(directory, model, tokenizer, config, generator)


def checkpoint_dir(option: str, path: str, out: str) -> Path:
    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"{option} {path} is not a directory; pass a checkpoint directory (a finished run's --out, or a "
            f"Hugging Face model folder with config.json, weights and vocab.txt, tokenizer.model or spiece.model)"
        )
    written = Path(out).resolve()
    if directory.resolve() == written or written in directory.resolve().parents:
        raise ValueError(f"{option} {path} lies in --out {out}, which this run writes; choose another --out")
    return directory


def load_checkpoint(option: str, directory: Path, head: str, fallback: bool = True) -> tuple[nn.Module, Tokenizer]:
    """The model with `head` (or, if the checkpoint lacks it and `fallback`, its bare encoder)
    and the tokenizer beside it, which must fit the model's embeddings."""
    try:
        try:
            model = from_pretrained(directory, head=head)
        except MissingHead:
            if not fallback:
                raise ValueError(f"it has no {HEAD_NAMES[head]}; pass a checkpoint that has one "
                                 f"(for a generator: a run's OUT/generator, or an ElectraForMaskedLM folder)") from None
            model = from_pretrained(directory, head=None)
        tokenizer = load_tokenizer(directory)
    except (ValueError, FileNotFoundError) as error:
        raise type(error)(f"{option} {directory}: {error}") from None
    config = model.config
    tokenizer.check_fits(config.vocab_size, f"{option} {directory}")
    if tokenizer.pad_id != config.pad_token_id:
        raise ValueError(f"{option} {directory}: its tokenizer's [PAD] is id {tokenizer.pad_id} but config.json says "
                         f"pad_token_id {config.pad_token_id}; they are not one checkpoint")
    return model.train(), tokenizer


def run_config(option: str, directory: Path, loaded: ModelConfig, overrides: dict, settings: Settings) -> ModelConfig:
    """The checkpoint's architecture, with the runtime flags given, long enough for --seq-len."""
    conflicts = [f"--{flag(name)} {value} (it has {getattr(loaded, name)})" for name, value in overrides.items()
                 if name not in RUNTIME_FIELDS and value != getattr(loaded, name)]
    if conflicts:
        raise ValueError(f"{option} {directory} fixes the architecture, but the flags ask for another: {'; '.join(conflicts)}; "
                         f"drop those flags (only {', '.join('--' + flag(n) for n in RUNTIME_FIELDS)} may change)")
    config = loaded.replace(**{name: overrides[name] for name in RUNTIME_FIELDS if name in overrides})
    fitted = config.for_length(settings.seq_len)
    if fitted is None:
        raise ValueError(
            f"--seq-len {settings.seq_len} exceeds the {config.max_length} positions the {option} model {directory} has learned; "
            f"lower --seq-len (for a longer second phase, train the first with --max-positions as large as the second's --seq-len)"
        )
    return fitted


def with_config(model: nn.Module, config: ModelConfig) -> nn.Module:
    """`model`, or a copy built for `config` (other runtime settings, more rotary positions)."""
    if model.config == config:
        return model
    copy = type(model)(config)
    copy.load_state_dict(model.state_dict())
    return copy


def check_fits(variant: Variant, settings: Settings, config: ModelConfig, directory: Path) -> None:
    """The checkpoint's architecture must be the one the variant trains: ALBERT's sharing
    defines ALBERT, and segment pairs need a second segment type."""
    variant_shares = variant.model_fields.get("share_layers", "none") != "none"
    if config.share_layers != "none" and not variant_shares:
        raise ValueError(f"--init {directory} holds an ALBERT-style model (share_layers={config.share_layers}: one layer serves "
                         f"every depth), which --variant {variant.name} does not train; continue it with --variant albert")
    if config.share_layers == "none" and variant_shares:
        raise ValueError(f"--init {directory} holds a model with its own layer at every depth, but --variant {variant.name} "
                         f"shares one layer; continue it with --variant bert or roberta (add --sop for the sentence order task)")
    if settings.layout != "full_sentences" and config.type_vocab_size == 1:
        raise ValueError(f"--init {directory} has one segment type, but --layout {settings.layout} marks segment B with "
                         f"segment id 1; pass --layout full_sentences (no sentence task) or use --variant roberta")


def check_generator(generator: MaskedLM, discriminator: nn.Module, directory: Path) -> None:
    """ELECTRA's generator and discriminator share one embedding module: the shapes must agree."""
    shared = (discriminator.encoder if hasattr(discriminator, "encoder") else discriminator).embeddings.state_dict()
    own = generator.encoder.embeddings.state_dict()
    ours, theirs = ({name: tuple(t.shape) for name, t in state.items()} for state in (shared, own))
    if ours != theirs:
        differ = ", ".join(f"{n} {theirs.get(n)} vs {ours.get(n)}" for n in sorted(set(ours) | set(theirs)) if ours.get(n) != theirs.get(n))
        raise ValueError(f"--init-generator {directory}: its embeddings differ from the discriminator's ({differ}); ELECTRA "
                         f"shares one embedding table, so pass the generator trained with that discriminator")
    if not all(torch.equal(shared[name], own[name]) for name in shared):
        print(f"--init-generator {directory}: its own embedding tables differ from the discriminator's; "
              f"the generator reads the discriminator's (ELECTRA shares them)", flush=True)
