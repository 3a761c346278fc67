"""`python train.py`: the command line, generated from the dataclasses it configures.

Every `Settings` field and every `ModelConfig` field is a flag spelled `--field-name`, so a
new field is a new flag with no code here. Flags default to "the variant's value", and
`--help` lists those values per variant. The flags read are resolved as `minibert.pretrain`'s
keywords are (api.py), and the run is the one it starts (run.py). A bad value is one line on
stderr and exit status 2 — never a traceback, unless `--debug` asks for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from ..corpus.formats import CORPUS_FORMATS
from ..config import ACTIVATION_CHOICES, ATTENTION_CHOICES, NORM_CHOICES, POSITION_CHOICES, SHARE_CHOICES, ModelConfig
from ..variants import CLASSIC, VARIANTS, with_layout
from .api import resolve
from .errors import EXIT_USER_ERROR, RUN_ERRORS, USER_ERRORS
from ..training.settings import Settings, flag

MODEL_HELP = {
    "vocab_size": "size of the SentencePiece vocabulary trained on the corpus",
    "hidden_size": "H, the width of every layer",
    "num_layers": "depth (applications of a layer)",
    "num_heads": "attention heads (must divide --hidden-size)",
    "intermediate_size": "width of the feed-forward sublayer",
    "embedding_size": "E, width of the embedding tables, projected to H; below H = factorized (ALBERT); 'none' = H",
    "share_layers": "cross-layer sharing (ALBERT): which sublayers one copy serves at every depth",
    "max_positions": "rows of the position table (the longest sequence, plus --position-offset)",
    "position_encoding": "learned absolute positions (all five families) or rotary (RoPE: relative offsets inside attention)",
    "type_vocab_size": "segment types; 0 = no segment embeddings",
    "position_offset": "first position id (RoBERTa: pad id + 1)",
    "norm": "post-LN (BERT) or pre-LN",
    "activation": "feed-forward activation",
    "hidden_dropout": "dropout on embeddings and sublayer outputs",
    "attention_dropout": "dropout on attention probabilities",
    "layer_norm_eps": "LayerNorm epsilon",
    "pad_token_id": "id of [PAD] (set by the tokenizer)",
    "pooler": "tanh(Linear) on [CLS], read by NSP/SOP (without it they read [CLS] itself)",
    "attention_backend": "which code computes attention: auto (= sdpa), naive (readable), sdpa, triton (CUDA)",
    "unpad": "run the layers on the real tokens only, for a batch whose padding share is at least Encoder.UNPAD_FROM",
    "reference": "the reference path, to read and debug with: padded batches, naive attention, every layer at every "
                 "position, plain cross-entropy (same loss and gradients, slower; overrides --attention-backend and --unpad)",
    "initializer_range": "std of the initial weights",
}
MODEL_CHOICES = {"share_layers": SHARE_CHOICES, "norm": NORM_CHOICES, "activation": ACTIVATION_CHOICES, "attention_backend": ATTENTION_CHOICES,
                 "position_encoding": POSITION_CHOICES}
RUN_FLAGS = ("resume", "overwrite", "debug", "print_config", "plan")


class UsageError(ValueError):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage and exits; we want one line
        raise UsageError(f"{message}; see {self.prog} --help")

    def convert_arg_line_to_args(self, line: str) -> list[str]:
        """A recipe's line (recipes/): flags separated by spaces; '#' starts a comment."""
        return line.split("#", 1)[0].split()


def optional_int(text: str) -> int | None:
    return None if text.lower() == "none" else int(text)


def per_variant(values: dict[str, object]) -> str:
    """'default: X' or 'default: X (albert: Y, electra: Y)'."""
    shown = {name: ("none" if v is None else v) for name, v in values.items()}
    common, _ = Counter(map(repr, shown.values())).most_common(1)[0]
    common_value = next(v for v in shown.values() if repr(v) == common)
    exceptions = ", ".join(f"{name}: {v}" for name, v in shown.items() if repr(v) != common)
    return f"default: {common_value}" + (f"; {exceptions}" if exceptions else "")


def add_field(group, field: dataclasses.Field, help: str, choices, defaults: dict[str, object]) -> None:
    kind, name = str(field.type), flag(field.name)
    text = f"{help} ({per_variant(defaults)})".replace("%", "%%")
    if kind == "bool":
        group.add_argument(f"--{name}", action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS, help=text)
        return
    parse = {"int": int, "float": float, "float | None": float, "int | None": optional_int, "list[float]": float,
             "tuple[float, float]": float}.get(kind, str)
    nargs = {"list[str] | None": "+", "list[float]": 3, "tuple[float, float]": 2}.get(kind)
    metavar = None if choices else (field.metadata.get("metavar") or name.split("-")[-1].upper())
    group.add_argument(f"--{name}", type=parse, nargs=nargs, choices=choices, default=argparse.SUPPRESS, help=text, metavar=metavar)


def build_parser() -> Parser:
    table = "\n".join(f"  {v.name:<11} {v.changes}" for v in VARIANTS.values())
    parser = Parser(
        prog="python train.py", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        fromfile_prefix_chars="@",  # a recipe: python train.py @recipes/electra-small.txt --data DIR
        description="Pretrain a member of the BERT family from scratch: python train.py --variant V",
        epilog=f"variants:\n{table}\n\n"
               f"Every variant trains with rotary positions, no dropout and (ELECTRA aside) 40% masking by default: at the\n"
               f"default budget the papers' choices cost held-out accuracy (docs/training.md). The classic\n"
               f"recipe is one set of flags away: {CLASSIC}\n\n"
               f"Time instead of steps: --budget 5m. Distributed: torchrun --nproc_per_node=N train.py --variant V ...\n"
               f"Continue pretraining a saved model (a run's --out, or a Hugging Face folder with its vocab.txt,\n"
               f"tokenizer.model or spiece.model), e.g. a second phase at longer sequences: --init DIR --seq-len 128",
    )
    settings = {name: with_layout(v, v.default_settings()) for name, v in VARIANTS.items()}
    groups = {name: parser.add_argument_group(name) for name in ("run", "data", "objectives", "training", "at scale")}
    for field in dataclasses.fields(Settings):
        meta = field.metadata
        defaults = {name: getattr(s, field.name) for name, s in settings.items()}
        if field.name == "variant":
            defaults = {"all": Settings.variant}
        choices = list(VARIANTS) if field.name == "variant" else meta["choices"]
        help = meta["help"].replace("{formats}", CORPUS_FORMATS)  # the formats corpus/formats.py reads
        add_field(groups[meta["group"]], field, help, choices, defaults)
    layout = parser.add_argument_group("sentence task shorthands")
    layout.add_argument("--nsp", dest="layout", action="store_const", const="nsp", default=argparse.SUPPRESS, help="= --layout nsp (BERT's next sentence prediction)")
    layout.add_argument("--no-nsp", dest="layout", action="store_const", const="full_sentences", default=argparse.SUPPRESS, help="= --layout full_sentences (no sentence task)")
    layout.add_argument("--sop", dest="layout", action="store_const", const="sop", default=argparse.SUPPRESS, help="= --layout sop (ALBERT's sentence order prediction)")
    run = groups["run"]
    run.add_argument("--resume", action="store_true", help="continue the run in --out from its newest intact checkpoint")
    run.add_argument("--overwrite", action="store_true", help="replace the checkpoint already in --out")
    run.add_argument("--debug", action="store_true", help="show the traceback of an error")
    run.add_argument("--print-config", action="store_true",
                     help="print the resolved architecture and settings, each value with the layer it came from "
                          "(flag, variant, default), and exit")
    run.add_argument("--plan", action="store_true",
                     help="print the run's plan (its training FLOPs, and its wall time on --plan-for's device at "
                          "--plan-utilisation) and exit, before any data is read or OUT is touched")
    model = parser.add_argument_group("model (any ModelConfig field; distilbert takes the teacher's, --init the checkpoint's)")
    for field in dataclasses.fields(ModelConfig):
        defaults = {name: {**ModelConfig().to_dict(), **v.model}[field.name]
                    for name, v in VARIANTS.items() if not v.needs_teacher}
        if field.name == "max_positions":
            defaults = {name: "seq_len + position_offset" for name in defaults}
        add_field(model, field, MODEL_HELP.get(field.name, f"ModelConfig.{field.name}"), MODEL_CHOICES.get(field.name), defaults)
    return parser


def parse(argv: list[str]) -> tuple[Settings, dict, dict]:
    """argv -> (settings, ModelConfig overrides, run flags), resolved as `minibert.pretrain`'s
    keywords are (api.py). Flags not given are absent from argparse's result (default=SUPPRESS),
    so they keep the variant's values, and `--embedding-size none` still counts as given."""
    given = vars(build_parser().parse_args(argv))
    run = {name: given.pop(name) for name in RUN_FLAGS}
    return (*resolve(given), run)


def one_line(error: BaseException) -> str:
    """The message, on one line, with ModelConfig.field spelled as the flag --field."""
    message = re.sub(r"ModelConfig\.(\w+)", lambda m: "--" + flag(m.group(1)), str(error))
    return " ".join(message.split())


def report_errors(prog: str, argv: list[str], command: Callable[[], object]) -> int:
    """Run `command` (parsing included) as every minibert command line does: a problem the
    user can fix (USER_ERRORS, RUN_ERRORS) is one line on stderr and exit status 2, never a
    traceback — unless `--debug` is in `argv`. Returns the exit status."""
    try:
        command()
    except (*USER_ERRORS, *RUN_ERRORS) as error:
        if "--debug" in argv:
            raise
        print(f"{prog}: error: {one_line(error)}", file=sys.stderr)
        return EXIT_USER_ERROR
    return 0


def interrupted(out: Path | None, started: float) -> str:
    """What to do after Ctrl-C, true at that moment: --resume only once this run has saved a
    checkpoint (one written since the command started). Before that (the corpus still building,
    say) there is nothing of this run's to resume: the same command starts it again, and reuses
    what the cache holds whole (a half-built step is never published there)."""
    from ..operations.checkpoint import Checkpoints

    newest = Checkpoints(out / "checkpoints").steps()[:1] if out else []
    if newest and newest[0].stat().st_mtime >= started:
        return "interrupted; continue with the same command plus --resume"
    return "interrupted before the run saved a checkpoint; run the same command again"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    started, out = time.time(), []  # out: the run's OUT, once the flags are parsed

    def run() -> None:
        from .run import pretrain, print_config, print_plan, with_default_out  # after parsing: `--help` and typos need no data or torch setup

        settings, overrides, flags = parse(argv)
        out.append(Path(with_default_out(settings).out))
        if flags["print_config"]:
            return print_config(settings, overrides)
        if flags["plan"]:
            return print_plan(settings, overrides)
        pretrain(settings, overrides, resume=flags["resume"], overwrite=flags["overwrite"])

    try:
        return report_errors("train.py", argv, run)
    except KeyboardInterrupt:
        print(f"train.py: {interrupted(out[0] if out else None, started)}", file=sys.stderr)
        return 130
