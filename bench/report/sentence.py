"""Section 4 — masking and sentence tasks: static vs dynamic masking; NSP vs SOP vs none."""

from __future__ import annotations

from pathlib import Path

from .budget import RTE, SST2, Budget
from .measure import dev_set, gap_noise, held_out, standard_error
from .recipes import corpus_passes, finetune_rte, finetune_sst2, mlm_run
from .runner import Runner

NAME = "sentence"
TITLE = "4. Masking and sentence tasks: static vs dynamic; NSP vs SOP vs none"
TASKS = ("SST-2", "RTE")


def plan(budget: Budget) -> str:
    return "Each row pretrains for S steps."


def compute(budget: Budget, runs: Path) -> dict:
    runner = Runner(runs)
    S = budget.steps
    dev = {"sst2": dev_set(SST2), "rte": dev_set(RTE)}
    setups = [  # (label, pretraining); the first is section 3's largest MLM run
        ("dynamic masking, no sentence task", lambda: mlm_run(runner, budget, S)),
        ("static masking (one mask per sequence), no sentence task",
         lambda: mlm_run(runner, budget, S, "full_sentences", "static", "--dupe-factor", "1", name=f"static-{S}")),
        ("dynamic masking, NSP", lambda: mlm_run(runner, budget, S, "nsp", name=f"nsp-{S}")),
        ("dynamic masking, SOP", lambda: mlm_run(runner, budget, S, "sop", name=f"sop-{S}")),
    ]
    rows = []
    for label, pretrain in setups:
        run = pretrain()
        name = Path(run["out"]).name
        sst2, rte = finetune_sst2(runner, budget, name, run), finetune_rte(runner, budget, name, run)
        rows.append({"setup": label, "final_eval": run["final_eval"], "pretrain_command": run["command"],
                     "pretrain_seconds": run["seconds"], "sst2": sst2["accuracy"], "rte": rte["accuracy"],
                     "commands": [run["command"], sst2["command"], rte["command"]]})
    return {"rows": rows, "dev": dev, "passes": corpus_passes(budget, runs, run["out"]), "run_seconds": runner.seconds}


def notes(result: dict) -> list[str]:
    sst2 = [r["sst2"] for r in result["rows"]]
    rte = [r["rte"] for r in result["rows"]]
    sentence = {task: r["final_eval"][f"eval_{task}_accuracy"] for r in result["rows"] for task in ("nsp", "sop")
                if f"eval_{task}_accuracy" in r["final_eval"]}
    sst2_dev, rte_dev = result["dev"]["sst2"], result["dev"]["rte"]
    majority = rte_dev["majority"]
    rte_noise = 2 * standard_error(0.5, rte_dev["examples"])
    near_chance = all(abs(a - majority) < rte_noise for a in rte)
    return [
        f"**Reading.** SST-2 dev accuracies span {min(sst2):.3f}–{max(sst2):.3f} and RTE {min(rte):.3f}–{max(rte):.3f}; "
        f"one standard error is {100 * standard_error(0.5, sst2_dev['examples']):.1f} points on SST-2 and "
        f"{100 * standard_error(0.5, rte_dev['examples']):.1f} on RTE ({rte_dev['examples']} pairs; always answering "
        f"{rte_dev['majority_label']!r} scores {majority:.3f}), so only gaps of several points mean anything.",
        "",
        "**Static vs dynamic masking.** RoBERTa found dynamic masking only marginally better (or equal) even at full "
        "scale, where each static mask is seen 4 times over 40 epochs. Here the static run uses one mask per sequence and "
        f"S steps read the corpus about {result['passes']:.1f} times, "
        + ("so each mask is seen about that often; an effect this small cannot be resolved with one seed."
           if result["passes"] >= 1.5 else "so hardly any mask is seen twice and the two runs cannot differ by design."),
        "",
        "**NSP vs SOP vs none.** ALBERT's argument: NSP's negatives come from another document, so a change of topic "
        "gives them away, while SOP's negatives are the same two segments swapped, which only discourse coherence "
        f"reveals. Held out, the NSP head reached {sentence['nsp']:.3f} and the SOP head {sentence['sop']:.3f} "
        f"({'NSP is the easier task here too' if sentence['nsp'] > sentence['sop'] else 'at this scale SOP was not the harder task'}"
        f"{'; the SOP head is still at chance' if sentence['sop'] < 0.55 else ''}). "
        "RoBERTa found that dropping NSP does not hurt downstream tasks; ALBERT that SOP helps multi-sentence tasks. RTE "
        "is the sentence-pair task that should show it; "
        + (f"here all four stay within two standard errors of its majority-class score {majority:.3f}, so it cannot."
           if near_chance else f"but with {rte_dev['examples']} pairs only gaps of more than about "
           f"{100 * gap_noise(rte_dev['examples']):.0f} points would mean anything."),
    ]


def render(result: dict, plots: Path) -> str:
    lines = [
        "| pretraining | time | held-out MLM acc. | held-out NSP / SOP acc. | SST-2 dev acc. | RTE dev acc. |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        ev = r["final_eval"]
        lines.append(f"| {r['setup']} | {r['pretrain_seconds']:.0f} s | {held_out(ev, ('mlm_accuracy',), labelled=False)} | "
                     f"{held_out(ev, ('nsp_accuracy', 'sop_accuracy'), labelled=False)} | {r['sst2']:.3f} | {r['rte']:.3f} |")
    lines += ["", *notes(result), "", "Commands:", "", "```", *(c for r in result["rows"] for c in r["commands"]), "```"]
    return "\n".join(lines)
