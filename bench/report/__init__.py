"""The results report: the BERT family's decision guide, measured at a size this machine can run.

    "best raw performance: RoBERTa or ELECTRA; tight memory: ALBERT;
     tight latency: DistilBERT; best sample efficiency: ELECTRA"

    python bench/results.py                     # every section, then docs/results.md
    python bench/results.py --only latency      # one section; the others are kept from before
    python bench/results.py --quick             # tiny budgets, written under runs/report/quick/
    python bench/results.py --list              # the sections and what is stored for each
    python bench/results.py --jobs 1            # one run at a time (default: one per core)

Sections, one module each: params (parameter counts, ALBERT's ablation), latency (bert-base
vs distilbert-base), transfer (pretrained against untrained, at S and 4S pretraining steps; the
fine-tuning protocol, chosen on held-out training sentences; which vector the classifier
reads), efficiency (MLM vs ELECTRA's RTD at equal pretraining FLOPs), sentence (static vs
dynamic masking; NSP vs SOP vs no sentence task), distill (a DistilBERT student against its
teacher), distill-task (fine-tuning with a real fine-tuned teacher: Hinton et al.'s soft_target_loss), intrinsic
(each family's own evidence on held-out pretraining tasks: RoBERTa's recipes, ALBERT's NSP/SOP
table and the cost of sharing, ELECTRA 15%). A section module has NAME, TITLE, TASKS (what it fine-tunes on), plan(budget) (what
it runs, in words), compute(budget, runs, jobs) -> a JSON-able result, and render(result,
plots) -> markdown; every number in the prose comes from the result.

The quality sections repeat every pretraining over the budget's pretraining seeds and every
fine-tuning over its fine-tuning seeds (`recipes.measure`), so that two setups' scores pair up
seed by seed; `measure.paired_gap` turns the pairs into a mean gap with a 95% interval over
the pretraining seeds (a pretrained model's fine-tunings are averaged first: they are not
independent), and `measure.verdict` into reproduced / not reproduced / inconclusive.

Training and fine-tuning run as the user would run them — `python train.py ...` and
`python -m minibert.finetune ...` in a subprocess (`runner`), one thread each, as many at once
as `--jobs` — so each table row carries the exact command that reproduces it. Every finished
run is cached in runs/report/ (git-ignored): rerunning resumes where it stopped, and a section
that cannot run (no dataset, a failing command) is reported as "not run yet" with the reason
instead of stopping the others.
"""

from . import distill, distill_task, efficiency, intrinsic, latency, params, sentence, transfer

SECTIONS = {section.NAME: section for section in (params, latency, transfer, efficiency, sentence, distill, distill_task,
                                                  intrinsic)}
