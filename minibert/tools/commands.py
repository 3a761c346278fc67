"""`python -m minibert COMMAND`: question a pretrained model from the command line.

    python -m minibert fill-mask DIR "The [MASK] sat on the mat." [--top-k 5]
    python -m minibert detect DIR "The cat ate on the mat."
    python -m minibert info DIR
    python -m minibert attention DIR "The cat sat on the mat." [--layer L] [--head H] --out FILE.png
    python -m minibert export DIR OUT [--overwrite]
    python -m minibert curves RUN [RUN ...] --out FILE.png [--metric NAME ...]
    python -m minibert predict CLF FILE --out predictions.tsv [--text-columns A [B]] [--precision P] [--null-threshold X] [--overwrite]
    python -m minibert explore DIR [--port P] [--no-browser] [--out page.html [--text TEXT ...]]

DIR is a minibert checkpoint (what `python train.py` leaves in checkpoints/<variant>) or a
Hugging Face BERT-family directory with its vocab.txt. The work is done by probe.py
(fill-mask, detect), info.py (info), attention_maps.py (attention) beside this file,
minibert/interop/huggingface/export.py (export), minibert/runs/curves.py (curves),
minibert/finetune/predictions.py (predict, with a fine-tuned CLF) and explore/ (explore); this
file only parses and prints (`minibert/__main__.py` calls `main`). Bad input is one line on
stderr and exit status 2, through the same handler as `python train.py` (`--debug` shows the
traceback); Ctrl-C is one line too, and exit status 130, as training's (`Interrupted`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..runs.cli import Parser, report_errors
from ..training.settings import DEVICES, PRECISIONS

PROG = "python -m minibert"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the command leaves behind (its message)."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description="Question a pretrained BERT-family model.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fill = add_command(commands, "fill-mask", "the most probable tokens at each [MASK] of a text (masked-LM checkpoints)",
                       "Show the most probable tokens at each [MASK] (or <mask>) of each text, with their probabilities.")
    fill.add_argument("--top-k", type=int, default=5, metavar="K", help="candidates per mask (default 5)")
    detect = add_command(commands, "detect", "which tokens of a text look replaced (ELECTRA discriminators)",
                         "Print each token with the discriminator's probability that it was replaced; tokens above 0.5 are marked.")
    for command in (fill, detect):
        command.add_argument("texts", nargs="+", metavar="TEXT", help="one or more texts")
    add_command(commands, "info", "what a checkpoint folder holds: family, architecture, parameters, tokenizer, heads",
                "One line per fact about a checkpoint folder, read from its config and tensor names (no weights are loaded).")
    add_attention_command(commands)
    add_export_command(commands)
    add_curves_command(commands)
    add_predict_command(commands)
    add_explore_command(commands)
    for command in commands.choices.values():  # last in each command's --help, as in every minibert command line
        command.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def add_command(commands, name: str, help: str, description: str, checkpoint: bool = True) -> argparse.ArgumentParser:
    """One COMMAND: its line in the list of commands (`help`), the first line of its own --help
    (`description`) and, unless `checkpoint` is False, the DIR it reads first."""
    command = commands.add_parser(name, help=help, description=description)
    if checkpoint:
        command.add_argument("checkpoint", metavar="DIR", help="minibert checkpoint or Hugging Face directory")
    return command


def add_attention_command(commands) -> None:
    """`attention`: one layer's attention probabilities as heatmaps (minibert/tools/attention_maps.py)."""
    attention = add_command(commands, "attention", "draw where each token attends: a heatmap per head, tokens on both axes "
                            "(needs matplotlib)", "Draw one layer's attention probabilities, a heatmap per head (or one head), into a PNG.")
    attention.add_argument("text", metavar="TEXT", help="the text to look at")
    attention.add_argument("--layer", type=int, default=-1, metavar="L", help="which layer, from 0 (default: the last)")
    attention.add_argument("--head", type=int, metavar="H", help="only this head, from 0 (default: every head)")
    attention.add_argument("--out", required=True, metavar="FILE", help="the picture to write (.png)")


def add_export_command(commands) -> None:
    """`export`: a checkpoint and its tokenizer as a Hugging Face folder, read back by transformers first."""
    export = add_command(commands, "export", "write a checkpoint and its tokenizer as a Hugging Face folder, checked with transformers",
                         "Write DIR's model and tokenizer as a folder transformers loads, read it back with transformers "
                         "(ids, weights, outputs) where it is installed, and only then move it to OUT.")
    export.add_argument("out", metavar="OUT", help="the folder to write (must not hold a model, unless --overwrite)")
    export.add_argument("--overwrite", action="store_true", help="replace the model and tokenizer already in OUT")


def add_curves_command(commands) -> None:
    """`curves`: training runs' curves side by side, from their metrics.jsonl (minibert/runs/curves.py)."""
    curves = add_command(commands, "curves", "draw training runs' loss and held-out metrics side by side, with their variant's "
                         "default band (needs matplotlib)",
                         "Overlay the curves of one or more `python train.py` runs (their --out folders): training loss and "
                         "every held-out metric against steps, the baselines, and the variant's default run where it applies.",
                         checkpoint=False)
    curves.add_argument("runs", nargs="+", metavar="RUN", help="a python train.py --out folder (holding metrics.jsonl)")
    curves.add_argument("--out", required=True, metavar="FILE", help="the picture to write (.png)")
    curves.add_argument("--metric", nargs="+", metavar="NAME", help="only these curves, e.g. eval_mlm_accuracy loss")


def add_predict_command(commands) -> None:
    """`predict`: a fine-tuned classifier's label and score for every row of a file (minibert/finetune/predictions.py)."""
    predict = add_command(commands, "predict", "a fine-tuned classifier's label and score for every row of a file (a tag "
                          "per word for a tagger)", "Predict every row of FILE (its label column, if any, ignored) with the "
                          "model `python train.py finetune` wrote to CLF, in batches, into a TSV laid out as its predictions.tsv.",
                          checkpoint=False)
    predict.add_argument("classifier", metavar="CLF", help="a fine-tuned model: python train.py finetune's --out folder")
    predict.add_argument("file", metavar="FILE", help=".tsv, .csv or .jsonl of texts or pairs (.txt: one text a line); "
                         ".conll or .jsonl of words for a tagger")
    predict.add_argument("--out", required=True, metavar="FILE", help="the TSV to write (not replaced unless --overwrite)")
    predict.add_argument("--text-columns", nargs="+", metavar="COLUMN", help="the text column(s) of FILE, named outright (default: "
                         "found by name, as fine-tuning does)")
    predict.add_argument("--batch-size", type=int, default=32, metavar="B", help="rows per batch (default 32)")
    predict.add_argument("--max-len", type=int, metavar="T", help="tokens per row, as fine-tuning's --max-len (default: the one "
                         "CLF's eval.json records, else 128 or the model's limit)")
    predict.add_argument("--device", choices=DEVICES, default="auto", help="auto = cuda when available, else cpu")
    predict.add_argument("--precision", choices=PRECISIONS, default="auto", help="number format of the matmuls, as fine-tuning's: "
                         "auto = bf16 autocast on a CUDA GPU or a CPU with native bf16, else fp32 (default auto)")
    predict.add_argument("--null-threshold", type=float, metavar="X", help="a question-answering model fine-tuned on SQuAD "
                         "2.0 data: answer \"\" where the no-answer score beats the best span's by more than X (default: the "
                         "threshold it was fine-tuned with; the fine-tune prints the best one for its dev questions)")
    predict.add_argument("--overwrite", action="store_true", help="replace --out if it exists")


def add_explore_command(commands) -> None:
    """`explore`: a local page that shows the run's code acting on text (minibert/tools/explore/)."""
    explore = add_command(commands, "explore", "open a local page that shows a checkpoint's batches, heads, losses and "
                          "attention on real text", "Serve a page on 127.0.0.1 that shows what the run's own code does "
                          "with its held-out text or yours: token by token what was read, masked, guessed and judged, "
                          "the step's loss summed, ELECTRA's and DistilBERT's games, attention as pictures, the "
                          "parameters and the curves; for a question-answering model (python train.py "
                          "finetune on SQuAD), how it reads and answers a question about a passage.")
    explore.add_argument("--port", type=int, default=0, metavar="P", help="the port to listen on (default: a free one)")
    explore.add_argument("--no-browser", action="store_true", help="print the address without opening a browser")
    explore.add_argument("--out", metavar="FILE", help="write the page with a few answers inside to FILE instead of serving it "
                         "(the page lists the texts it holds)")
    explore.add_argument("--text", action="append", default=[], metavar="TEXT", help="with --out: a text of yours to "
                         "include (repeatable); for a question-answering model \"QUESTION [SEP] PASSAGE\"")


def explore(args: argparse.Namespace) -> None:
    if args.text and not args.out:
        raise ValueError("--text chooses the texts a written page holds: add --out FILE, or type the text in the page")
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port {args.port} is not a port: give 1 to 65535, or leave it out for a free one")
    try:  # Ctrl-C while torch and the model load is a Ctrl-C too
        import torch

        from .explore import open_session, serve, write_page

        torch.set_num_threads(1)  # the page answers one text at a time (bench/explore_speed.py times it)
        session = open_session(args.checkpoint)
        if args.out:
            return print(f"wrote {write_page(session, args.out, args.text)}")
        serve(session, args.port, open_browser=not args.no_browser)
    except KeyboardInterrupt:  # Ctrl-C, loading or serving: the page is gone, nothing to keep
        print("stopped", flush=True)


def draw(args: argparse.Namespace) -> None:
    from .attention_maps import attention_maps, draw_attention

    tokens, probs = attention_maps(args.checkpoint, args.text)
    print(f"wrote {draw_attention(tokens, probs, args.out, args.layer, args.head, title=args.text)}")


def run(args: argparse.Namespace) -> None:
    from .info import describe
    from .probe import detect_replaced, fill_mask

    if args.command == "attention":
        return draw(args)
    if args.command == "explore":
        return explore(args)
    if args.command == "curves":
        from ..runs.curves import draw_curves

        return print(f"wrote {draw_curves(args.runs, args.out, args.metric)}")
    if args.command == "predict":
        from ..finetune.predictions import predict_file

        left = "left as it was" if Path(args.out).exists() else "not written"  # --out is published whole, at the end
        try:
            predict_file(args.classifier, args.file, args.out, args.text_columns, args.batch_size, args.max_len, args.device,
                         args.overwrite, args.precision, args.null_threshold)
        except KeyboardInterrupt:
            raise Interrupted(f"--out {args.out} {left}") from None
        return
    if args.command == "export":
        from ..interop.huggingface.export import export, summary

        return print("\n".join(summary(export(args.checkpoint, args.out, overwrite=args.overwrite))))
    if args.command == "info":
        facts = describe(args.checkpoint)
        width = max(map(len, facts)) + 2
        for fact, text in facts.items():
            print(f"{fact:<{width}}{text}")
    elif args.command == "fill-mask":
        results = fill_mask(args.checkpoint, args.texts, top_k=args.top_k)
        for text, masks in zip(args.texts, results):
            print(text)
            for number, candidates in enumerate(masks, 1):
                print(f"  mask {number} of {len(masks)}:")
                for candidate in candidates:
                    print(f"    {candidate.score:.4f}  {shown(candidate)}")
    else:
        for text, judgements in zip(args.texts, detect_replaced(args.checkpoint, args.texts)):
            print(text)
            for judgement in judgements:
                mark = "  <- replaced" if judgement.replaced else ""
                print(f"  {judgement.probability:.4f}  {shown(judgement)}{mark}")


def shown(token) -> str:
    """A token as the text it stands for ("string", not "▁string"); its piece where that
    text is blank (the lone "▁" of SentencePiece, a space)."""
    return token.text if token.text.strip() else token.token


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return report_errors(PROG, argv, lambda: run(build_parser().parse_args(argv)))
    except KeyboardInterrupt as pressed:  # Ctrl-C: one line, never a traceback
        command = next((word for word in argv if not word.startswith("-")), None)
        print(f"{PROG}{f' {command}' if command else ''}: interrupted{f'; {pressed}' if str(pressed) else ''}", file=sys.stderr,
              flush=True)
        return 130
