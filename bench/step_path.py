"""How much of the project one training step runs: the yardstick for reading it in one sitting.

    python bench/step_path.py                     # the default run: python train.py --variant albert
    python bench/step_path.py --variant bert      # any variant's default run
    python bench/step_path.py --show              # ... and every line it ran, file by file
    python bench/step_path.py -- --reference      # anything after -- goes to train.py as flags
    python bench/step_path.py --page docs/step-path.md   # the default run's counts, as the docs cite them

It runs `python train.py --variant V` in this process (its own output folder, the shared data
cache) and traces, with `sys.settrace`, from the end of optimizer step 2 to the end of step 3
(a global optimizer-step hook starts and stops the trace): everything a step does, batch
building included, on every thread the step starts, and the lines of the project's functions
that were already running when the trace began (the training loop itself). Only the project's own files count
(minibert/ and train.py). A function is a code object that ran (comprehensions and generator
expressions are part of the function around them); a line is a distinct (file, line) that ran,
so a loop body counts once. The run then stops; nothing it wrote is kept.

The target for the default run is TARGET (lines, files); `--page` writes the counts, the target
and nanoGPT's step traced the same way (NANOGPT) into a generated page, which docs/reading.md
cites. Run it on Python 3.11, the floor: the line events of other versions differ slightly.
"""

from __future__ import annotations

import argparse
import datetime
import linecache
import platform
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NOT_FUNCTIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
TRACED_STEP = 3  # trace from the end of optimizer step TRACED_STEP - 1 to the end of this one
TARGET = (180, 8)  # the default run's step: at most this many lines, in at most this many files
NANOGPT = (72, 2)  # lines and files of nanoGPT's train.py step, traced the same way by this script's tracer


class StepDone(Exception):
    """Raised by the hook once the traced step is over: the run has nothing more to show."""


class StepTracer:
    """Collects the project's lines and functions that run while tracing is on."""

    def __init__(self):
        self.lines: dict[str, set[int]] = defaultdict(set)
        self.functions: dict[str, set[tuple[int, str]]] = defaultdict(set)
        self._ours: dict[str, str | None] = {}

    def relative(self, filename: str) -> str | None:
        """The file's path in the repository when it is one of the project's, else None."""
        if filename not in self._ours:
            path = Path(filename).resolve()
            ours = path.is_relative_to(REPO / "minibert") or path == REPO / "train.py"
            self._ours[filename] = str(path.relative_to(REPO)) if ours else None
        return self._ours[filename]

    def trace(self, frame, event, arg):
        if event != "call":
            return None
        return self.local if self.relative(frame.f_code.co_filename) is not None else None

    def local(self, frame, event, arg):
        if event == "line":
            code, name = frame.f_code, self.relative(frame.f_code.co_filename)
            self.lines[name].add(frame.f_lineno)
            if code.co_name not in NOT_FUNCTIONS:  # a function counts once one of its lines ran
                self.functions[name].add((code.co_firstlineno, code.co_qualname))
        return self.local

    def start(self) -> None:
        """Trace from here on, including the rest of the project's functions already running
        (the training loop that called the optimizer): their lines count too."""
        frame = sys._getframe(1)
        while frame is not None:
            if self.relative(frame.f_code.co_filename) is not None:
                frame.f_trace = self.local
            frame = frame.f_back
        threading.settrace(self.trace)
        sys.settrace(self.trace)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)


def traced_step(variant: str, extra: list[str]) -> StepTracer:
    """Run the variant's default run until the traced step is over; return what it ran."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from train import main

    tracer, steps = StepTracer(), [0]

    def after_step(optimizer, args, kwargs):
        steps[0] += 1
        if steps[0] == TRACED_STEP - 1:
            tracer.start()
        elif steps[0] == TRACED_STEP:
            tracer.stop()
            raise StepDone

    hook = register_optimizer_step_post_hook(after_step)
    try:
        with tempfile.TemporaryDirectory() as out:
            main(["--variant", variant, "--out", str(Path(out) / variant), *extra])
    except StepDone:
        pass
    finally:
        tracer.stop()
        hook.remove()
    if steps[0] < TRACED_STEP:
        raise SystemExit(f"the run took {steps[0]} optimizer steps; {TRACED_STEP} are needed to trace one")
    return tracer


def report(tracer: StepTracer, show: bool) -> str:
    files = sorted(tracer.lines, key=lambda f: (-len(tracer.lines[f]), f))
    rows = [f"{'file':<40} {'functions':>9} {'lines':>6}"]
    for name in files:
        rows.append(f"{name:<40} {len(tracer.functions[name]):>9} {len(tracer.lines[name]):>6}")
    functions, lines, _ = totals(tracer)
    rows.append(f"{'total: ' + str(len(files)) + ' files':<40} {functions:>9} {lines:>6}")
    rows.append("")
    for name in files:
        rows.append(f"{name}: " + ", ".join(q for _, q in sorted(tracer.functions[name])))
    if show:
        for name in files:
            rows += ["", f"--- {name}"]
            previous = None
            for number in sorted(tracer.lines[name]):
                if previous is not None and number > previous + 1:
                    rows.append("     ...")
                rows.append(f"{number:>5} {linecache.getline(str(REPO / name), number).rstrip()}")
                previous = number
    return "\n".join(rows)


def totals(tracer: StepTracer) -> tuple[int, int, int]:
    """(functions, lines, files) the step ran."""
    return sum(map(len, tracer.functions.values())), sum(map(len, tracer.lines.values())), len(tracer.lines)


def page(tracer: StepTracer, command: str) -> str:
    """The generated page: the counts first, then each file's functions in the order of the table."""
    import torch

    functions, lines, files = totals(tracer)
    met = "within" if lines <= TARGET[0] and files <= TARGET[1] else "over"
    when = datetime.date.today().isoformat()
    rows = [f"_Generated by `{command}` on {when} (Python {platform.python_version()}, torch {torch.__version__}): "
            f"do not edit by hand; [reading.md](reading.md) walks through the step._", "",
            "# One training step, traced", "",
            f"One optimizer step of `python train.py --variant albert` runs **{functions} functions, {lines} lines, "
            f"in {files} files** of minibert/ and train.py: {met} the target of at most {TARGET[0]} lines in at most "
            f"{TARGET[1]} files (nanoGPT's step, traced the same way, runs {NANOGPT[0]} lines in {NANOGPT[1]} files).", "",
            "| file | functions | lines |", "|---|---:|---:|"]
    order = sorted(tracer.lines, key=lambda f: (-len(tracer.lines[f]), f))
    rows += [f"| `{name}` | {len(tracer.functions[name])} | {len(tracer.lines[name])} |" for name in order]
    rows += [f"| **total** | **{functions}** | **{lines}** |", "", "## The functions, file by file", ""]
    rows += [f"- `{name}`: " + ", ".join(f"`{q}`" for _, q in sorted(tracer.functions[name])) for name in order]
    rows += ["", "A function is a code object that ran (comprehensions and generator expressions count with the "
             "function around them); a line is a distinct (file, line) that ran, so a loop body counts once. "
             "`python bench/step_path.py --show` prints every line.", ""]
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="albert", help="the default run to trace (default: albert)")
    parser.add_argument("--show", action="store_true", help="print every line the step ran")
    parser.add_argument("--page", type=Path, metavar="FILE.md", help="write the default run's counts to this generated page")
    parser.add_argument("flags", nargs="*", help="after --: more train.py flags")
    args = parser.parse_args(argv)
    if args.page and (args.variant != "albert" or args.flags):
        parser.error("--page describes the default run: give it without --variant or train.py flags")
    if sys.version_info[:2] != (3, 11):
        print(f"note: Python {sys.version_info[0]}.{sys.version_info[1]}; the yardstick is measured on 3.11, "
              f"whose line events differ slightly", file=sys.stderr)
    tracer = traced_step(args.variant, args.flags)
    print(f"one optimizer step of python train.py --variant {args.variant} {' '.join(args.flags)}".rstrip())
    print(report(tracer, args.show))
    if args.page:
        args.page.write_text(page(tracer, f"python bench/step_path.py --page {args.page.as_posix()}"), encoding="utf-8")
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
