"""docs/results.md: the sections' stored results, rendered under one introduction."""

from __future__ import annotations

from pathlib import Path

from minibert.finetune.recipes import BERT_RECIPE, DROPOUT, WARMUP

from .budget import FINETUNE_BATCH, MLM_VARIANT, Budget
from .measure import count_parameters, describe_machine
from .recipes import report_config

COMMAND = "python bench/results.py"


def budget_line(section, budget: Budget) -> str:
    """What a section ran with, in one paragraph (from the budget stored with its results)."""
    command = f"Command: `{COMMAND} --only {section.NAME}` (`--quick` for a smoke run)."
    if not section.TASKS:
        return f"Budget: {section.plan(budget)} {command}"
    corpus = (f"the first {budget.corpus_lines:,} lines of WikiText-2's train split" if budget.corpus_lines
              else "WikiText-2's train split")
    pretraining = (f"Pretraining: the model `{' '.join(budget.model)}` (ELECTRA: its discriminator), "
                   f"{budget.batch_size} sequences × {budget.seq_len} tokens per step, train.py's recipe for each variant "
                   f"(MLM rows: `--variant {MLM_VARIANT}` with the layout and masking named), on {corpus} (SentencePiece "
                   f"tokenizer trained on the same text); S = {budget.steps} steps; pretraining seeds "
                   f"{', '.join(map(str, budget.pretrain_seeds))}.")
    steps = {"SST-2": f"SST-2 on a seeded subsample of {budget.sst2_train:,} training sentences, {budget.sst2_steps} steps "
                      f"of {FINETUNE_BATCH} at max length {budget.seq_len} and peak lr {budget.sst2_lr:g}",
             "RTE": f"RTE on its full training set, {budget.rte_steps} steps of {FINETUNE_BATCH} at max length "
                    f"{budget.rte_max_len} and peak lr {budget.rte_lr:g}"}
    warmup = WARMUP  # --recipe bert's
    finetuning = (f"Fine-tuning (`python -m minibert.finetune`): "
                  + "; ".join(f"{steps[task]}, scored on the full dev set" for task in section.TASKS)
                  + f"; BERT's recipe otherwise (`--recipe bert`: weight decay {BERT_RECIPE['weight_decay']:g}, dropout "
                  f"{DROPOUT:g}), {warmup:.0%} warm-up, "
                  f"the classifier on "
                  f"{'the mean of the last layer' if budget.pooling == 'mean' else 'the [CLS] token'} "
                  f"(`--pooling {budget.pooling}`); {finetune_seeds_line(section, budget)}.")
    return f"Budget. {pretraining} {section.plan(budget)} {finetuning} {command}"


def seeds_used(section, budget: Budget) -> tuple[int, ...]:
    """The fine-tuning seeds a section uses: the budget's, or its first FINETUNE_SEEDS of them."""
    return budget.finetune_seeds[:getattr(section, "FINETUNE_SEEDS", None)]


def finetune_seeds_line(section, budget: Budget) -> str:
    seeds = seeds_used(section, budget)
    if len(seeds) == 1:
        return f"fine-tuning seed {seeds[0]} only, one fine-tuning of each pretrained model"
    return f"fine-tuning seeds {', '.join(map(str, seeds))}, each applied to every pretrained model"


def render_section(section, result: dict | None, plots: Path) -> list[str]:
    if result is None:
        return [f"Not run yet: this section has not been run (`{COMMAND} --only {section.NAME}`)."]
    if "not_run" in result:
        return [f"Not run yet: {result['not_run']}"]
    rerun = f"re-run `{COMMAND} --only {section.NAME}`."
    try:
        budget = Budget(**result["budget"])
        body = section.render(result, plots)
        measured = result["measured"]
        when = f"{measured['date']} on {describe_machine(measured['machine'])}, this step {measured['seconds']:.0f} s"
    except KeyError as missing:  # stored by an older version of the report
        return [f"Not run yet: the stored result predates this report's field {missing}; {rerun}"]
    except TypeError:  # a budget with other fields
        return [f"Not run yet: the stored result predates this report's budget; {rerun}"]
    cost = f"; the runs behind it took {result['run_seconds'] / 60:.0f} minutes" if "run_seconds" in result else ""
    return [budget_line(section, budget), "", body, "", f"_Measured {when}{cost}._"]


def number(section) -> str:
    """A section's number as the at-a-glance table shows it ("3", "6b")."""
    return section.TITLE.split(".")[0]


def on_the_page(path: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """What the document already says: each section's body by its title, and the at-a-glance
    rows by section number. A section whose stored result is gone (runs/ is git-ignored, so a
    fresh checkout has none) keeps these, measured on the date they state, instead of turning
    into "not run yet" when another section is re-run."""
    if not path.is_file():
        return {}, {}
    bodies: dict[str, list[str]] = {}
    rows: dict[str, list[str]] = {}
    title = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            title = line[3:]
            bodies[title] = []
        elif title is not None:
            bodies[title].append(line)
        elif line.startswith("| ") and not line.startswith("| § "):
            rows.setdefault(line.split("|")[1].strip(), []).append(line)
    return {t: "\n".join(body).strip("\n").splitlines() for t, body in bodies.items()}, rows


def summary(sections: dict, results: dict, kept_rows: dict[str, list[str]] | None = None) -> list[str]:
    """The quality claims at a glance: each section's verdicts and the numbers that decide them
    (`kept_rows`: a section's rows from the page, where its result is not stored)."""
    rows = []
    for name, section in sections.items():
        result = results.get(name)
        if result is None and kept_rows:
            rows += kept_rows.get(number(section), [])
        if hasattr(section, "claims") and result is not None and "not_run" not in result:
            try:
                rows += [f"| {number(section)} | {claim} | {said} | {numbers} |"
                         for claim, said, numbers in section.claims(result)]
            except KeyError:  # stored by an older version of the report: its section says so
                continue
    if not rows:
        return []
    return ["", "The quality claims at a glance (each section below gives the details and the commands):", "",
            "| § | claim | at this scale | the numbers that decide it |", "|---|---|---|---|", *rows]


def write_document(path: Path, plots: Path, sections: dict, results: dict, budget: Budget, quick: bool) -> None:
    plots.mkdir(parents=True, exist_ok=True)
    size = count_parameters(report_config(budget))
    kept_bodies, kept_rows = on_the_page(path)
    parts = [
        f"_Generated by `{COMMAND}`{' --quick' if quick else ''} (bench/report/): do not edit by hand._",
        "",
        "# Results: the decision guide, measured",
        "",
        "**The question.** Do the usual reasons to pick one family over another hold at a size that fits a "
        "2-core CPU? (Best raw performance: RoBERTa or ELECTRA; tight memory: ALBERT; tight latency: DistilBERT; "
        "best sample efficiency: ELECTRA.)",
        "",
        "**The short answer** is the table: each claim, measured over several seeds, reads *reproduced*, "
        "*not reproduced* or *inconclusive* at this scale.",
        *summary(sections, results, kept_rows),
        "",
        f"Every number below comes from `{COMMAND}`; each section states its budget, the exact commands, the seeds, "
        f"and the machine and date it was measured on. Pretraining here is minutes on WikiText-2 with models of "
        f"{size / 1e6:.1f}M parameters, against days on billions of tokens in the papers: the size and speed claims "
        "(sections 1, 2) are measured at full size, the quality claims (3–7) at a scale where the models learn "
        "context (their held-out MLM accuracy passes the neighbour-count baseline, section 3) but little more. "
        "Each quality claim is repeated over several pretraining seeds × fine-tuning seeds; setups that are compared "
        "share their seeds pair by pair, and each reading gives the mean paired gap with a 95% interval (Student's t "
        "over the pretraining seeds, each seed's fine-tunings averaged first, since they share one pretrained model) "
        "and says *reproduced* (the interval lies on the claimed side of zero), *not reproduced* (it "
        "lies on the other side) or *inconclusive* (it straddles zero) — at this scale, never for the papers' scale. "
        "The commands read data files the script writes under runs/report/ first (a seeded SST-2 subsample, and held-out "
        "training sentences to choose the fine-tuning protocol on); the "
        "datasets themselves are in the shared/datasets folder beside the repository. Runs are cached there: a re-run "
        "reuses every finished run and resumes an interrupted one. Times are wall-clock seconds of one-thread runs that "
        "shared the machine with the report's other runs (`--jobs`), so they are noisy; the budgets are step counts "
        "and FLOPs, which are not."
        + (" **This is a `--quick` smoke run: the budgets are far too small to mean anything.**" if quick else ""),
    ]
    for name, section in sections.items():
        result = results.get(name)
        body = kept_bodies.get(section.TITLE) if result is None else None
        parts += ["", f"## {section.TITLE}", "", *(body or render_section(section, result, plots))]
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
