"""The report's command line: run the sections asked for, store each result, write the document."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

from minibert.operations.files import read_json_object

from . import SECTIONS, __doc__ as DESCRIPTION
from .budget import FULL, QUICK, REPO
from .document import write_document
from .measure import machine
from .runner import NotRun


def stored_results(folder: Path) -> dict:
    return {path.stem: read_json_object(path, "delete it to run that section again") for path in sorted(folder.glob("*.json"))}


def run_section(name: str, budget, runs: Path, jobs: int) -> dict:
    """One section's result, with its budget, date, machine and wall time; or why it did not run."""
    start, where = time.perf_counter(), machine()
    try:
        result = SECTIONS[name].compute(budget, runs, jobs)
    except NotRun as reason:
        return {"not_run": str(reason)}
    measured = {"date": datetime.date.today().isoformat(), "machine": where, "seconds": time.perf_counter() - start}
    return {**result, "budget": asdict(budget), "measured": measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/results.py", description=DESCRIPTION.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny budgets for a smoke run, written under runs/report/quick/")
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only this section (repeatable); others keep their last results")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="runs at once, one thread each (default: the number of cores)")
    parser.add_argument("--pretrain-seeds", type=int, metavar="N",
                        help="only the first N pretraining seeds: a reduced grid, stated in each section's budget line")
    parser.add_argument("--list", action="store_true", help="list the sections and their stored results; run nothing")
    args = parser.parse_args(argv)
    budget = QUICK if args.quick else FULL
    if args.pretrain_seeds:
        budget = replace(budget, pretrain_seeds=budget.pretrain_seeds[:args.pretrain_seeds])
    runs = Path("runs") / "report" / ("quick" if args.quick else "full")
    document = REPO / runs / "results.md" if args.quick else REPO / "docs" / "results.md"
    stored = REPO / runs / "sections"
    if args.list:
        results = stored_results(stored) if stored.is_dir() else {}
        for name, section in SECTIONS.items():
            result = results.get(name)
            state = ("not run" if result is None else f"not run: {result['not_run']}" if "not_run" in result
                     else f"measured {result.get('measured', {}).get('date', '?')}")
            print(f"{name:<11} {section.TITLE} — {state}")
        return 0

    stored.mkdir(parents=True, exist_ok=True)
    for name in args.only or SECTIONS:
        print(f"[{name}] {SECTIONS[name].TITLE}", flush=True)
        result = run_section(name, budget, runs, max(1, args.jobs))
        print(f"[{name}] {'not run: ' + result['not_run'] if 'not_run' in result else 'done'}", flush=True)
        (stored / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    write_document(document, document.parent / "results", SECTIONS, stored_results(stored), budget, args.quick)
    print(f"wrote {document.relative_to(REPO)}")
    return 0
