"""GLUE's nine tasks as files: which folder and columns each has, its labels and metrics, the
training text they hold, and the test predictions GLUE's server takes back.

GLUE_DIR is laid out as GLUE's download script leaves it (GLUE_DIR/<task>/train.tsv, dev.tsv,
test.tsv; MNLI's dev_matched/dev_mismatched and test_matched/test_mismatched; the diagnostic
set at GLUE_DIR/diagnostic/diagnostic.tsv). Each task's files have their own columns (QNLI's
`question sentence`, MRPC's `#1 String #2 String`, CoLA's file without a header line), so
the table below names them, with the label set and GLUE's metrics (Wang et al., 2018).

    python train.py finetune --glue GLUE_DIR --write-training-text FILE.txt   # a pretraining corpus: train text only

sweep.py fine-tunes on these tasks (`finetune --glue`); this file reads GLUE's files
(`present_tasks`, `training_text`) and writes the server's (`write_submission`, predicting with
the models the sweep kept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, NamedTuple

from ...operations.files import write_atomic
from ..checkpoint import load_classifier
from ..kinds.kind import Kind
from ..kinds.sentence_files import Columns, read_task
from ..kinds.sentences import CLASSIFICATION, REGRESSION

NLI = ["entailment", "not_entailment"]
DIAGNOSTIC = Path("diagnostic") / "diagnostic.tsv"  # GLUE's AX set, where the download script puts it
SUBMISSION = "submission"
MISMATCHED = "accuracy_mismatched"  # MNLI's second dev set, scored by the model of the first


class GlueTask(NamedTuple):
    """One GLUE task: its folder and files, columns, labels and metrics."""

    name: str  # the folder under GLUE_DIR and GLUE's own name
    columns: Columns
    labels: list | None  # the class names in id order; None: regression
    metrics: tuple[str, ...]  # eval.json keys GLUE scores the task by
    electra: str | None  # the one metric of ELECTRA's dev average; None: left out (WNLI)
    dev: str = "dev.tsv"
    tests: tuple[tuple[str, str], ...] = (("test.tsv", ""),)  # (test file, submission name; "" = the task's name)
    mismatched: str | None = None  # MNLI's second dev file, scored into MISMATCHED

    @property
    def file_metrics(self) -> tuple[str, ...]:
        """The metrics one scored file gives (all but MNLI's mismatched accuracy)."""
        return tuple(metric for metric in self.metrics if metric != MISMATCHED)

    @property
    def kind(self) -> Kind:
        """GLUE's tasks are sentence tasks: STS-B regression, the others classification."""
        return REGRESSION if self.labels is None else CLASSIFICATION

    @property
    def selected_by(self) -> str:
        """The metric that picks the model kept among evaluations while training (run_tools/evaluations.py): ELECTRA's."""
        return self.electra or self.metrics[0]


GLUE_TASKS = {task.name: task for task in (
    GlueTask("CoLA", Columns(("sentence",), "label", names=("source", "label", "mark", "sentence")), [0, 1], ("mcc",), "mcc"),
    GlueTask("SST-2", Columns(("sentence",), "label"), [0, 1], ("accuracy",), "accuracy"),
    GlueTask("MRPC", Columns(("#1 String", "#2 String"), "Quality"), [0, 1], ("f1", "accuracy"), "accuracy"),
    GlueTask("STS-B", Columns(("sentence1", "sentence2"), "score"), None, ("pearson", "spearman"), "spearman"),
    GlueTask("QQP", Columns(("question1", "question2"), "is_duplicate"), [0, 1], ("f1", "accuracy"), "accuracy"),
    GlueTask("MNLI", Columns(("sentence1", "sentence2"), "gold_label"), ["contradiction", "entailment", "neutral"],
             ("accuracy", MISMATCHED), "accuracy", dev="dev_matched.tsv",
             tests=(("test_matched.tsv", "MNLI-m"), ("test_mismatched.tsv", "MNLI-mm")), mismatched="dev_mismatched.tsv"),
    GlueTask("QNLI", Columns(("question", "sentence"), "label"), NLI, ("accuracy",), "accuracy"),
    GlueTask("RTE", Columns(("sentence1", "sentence2"), "label"), NLI, ("accuracy",), "accuracy"),
    GlueTask("WNLI", Columns(("sentence1", "sentence2"), "label"), [0, 1], ("accuracy",), None),
)}
AX = Columns(("sentence1", "sentence2"))  # the diagnostic set: MNLI's columns, no labels


def task_names(names: list[str] | None) -> list[str]:
    """GLUE's spelling of each name given (any case; None: all nine), or an error listing them."""
    if not names:
        return list(GLUE_TASKS)
    spelled = {name.lower(): name for name in GLUE_TASKS}
    unknown = [name for name in names if name.lower() not in spelled]
    if unknown:
        raise ValueError(f"--glue-tasks: no GLUE task {', '.join(unknown)}; choose among {', '.join(GLUE_TASKS)}")
    return [spelled[name.lower()] for name in dict.fromkeys(names)]


def present_tasks(glue_dir: Path, names: list[str]) -> list[GlueTask]:
    """The tasks whose train and dev files are under `glue_dir`; one line for each one skipped."""
    if not glue_dir.is_dir():
        raise NotADirectoryError(f"--glue {glue_dir} is not a folder; pass the folder GLUE's download script fills "
                                 f"(CoLA/, SST-2/, MRPC/, ...)")
    found = []
    for task in (GLUE_TASKS[name] for name in names):
        folder = glue_dir / task.name
        needed = ["train.tsv", task.dev, *([task.mismatched] if task.mismatched else [])]
        missing = [name for name in needed if not (folder / name).is_file()]
        if missing:
            print(f"{task.name}: skipped, no {folder if not folder.is_dir() else ', '.join(str(folder / m) for m in missing)}",
                  flush=True)
        else:
            found.append(task)
    if not found:
        raise FileNotFoundError(f"--glue {glue_dir} holds none of the tasks {', '.join(names)} (each a folder with "
                                f"train.tsv and dev.tsv, as GLUE distributes them)")
    return found


def write_submission(found: list[GlueTask], results: dict, glue_dir: Path, out: Path, args, device, amp) -> dict:
    """OUT/submission/<NAME>.tsv for each test file found, as GLUE's server takes them (`index`
    and `prediction`: label names, 0/1, or STS-B's score), each from its task's median seed;
    AX.tsv from MNLI's when GLUE_DIR holds the diagnostic set. Returns {file: the run it came from}."""
    written = {}
    for task in found:
        seed = results[task.name]["median_seed"]
        model = out / task.name / f"seed-{seed}"
        tests = [(glue_dir / task.name / file, name or task.name, task.columns) for file, name in task.tests]
        if task.name == "MNLI":
            tests.append((glue_dir / DIAGNOSTIC, "AX", AX))
        present = [test for test in tests if test[0].is_file()]
        if not present:
            print(f"{task.name}: no {' or '.join(test[0].name for test in tests)} in {glue_dir / task.name}, so no submission file for it",
                  flush=True)
            continue
        classifier = load_classifier(model)
        classifier.model.to(device)
        for path, name, columns in present:
            data = read_task(path, labelled=False, columns=columns._replace(names=None))  # test files have a header
            predicted, _ = classifier.kind.predicted(classifier, data, results[task.name]["recipe"]["batch_size"], args.max_len, amp)
            show = (lambda p: f"{p:.3f}") if classifier.labels is None else (lambda p: str(classifier.labels.names[p]))
            write_atomic(out / SUBMISSION / f"{name}.tsv", "index\tprediction\n" + "".join(f"{i}\t{show(p)}\n" for i, p in enumerate(predicted)))
            written[f"{name}.tsv"] = str(model)
        print(f"{task.name}: test predictions from seed {seed}, whose dev score is the median of {len(results[task.name]['metrics'][task.metrics[0]]['seeds'])}",
              flush=True)
    if written:
        print(f"{len(written)} submission files in {out / SUBMISSION}: {', '.join(written)}", flush=True)
    return written


def training_text(glue_dir: str | Path, tasks: list[str] | None = None, max_rows: int | None = None) -> Iterator[list[str]]:
    """The TRAINING text of GLUE's tasks, labels dropped: one document per training row (its text,
    and its pair's second text), task by task. Only each task's train.tsv is opened: no dev,
    test or diagnostic text ever enters it. `max_rows`: the seeded subsample a --max-train-examples
    sweep trains on (`TaskData.subsample`), the same rows."""
    glue_dir = Path(glue_dir)
    for task in (GLUE_TASKS[name] for name in task_names(tasks)):
        train = glue_dir / task.name / "train.tsv"
        if not train.is_file():
            continue
        data = read_task(train, labelled=False, columns=task.columns).subsample(max_rows)
        for i, text in enumerate(data.texts):
            document = [text.strip(), *([] if data.pairs is None else [data.pairs[i].strip()])]
            if any(document):
                yield [part for part in document if part]


def write_training_text(glue_dir: str | Path, path: str | Path, tasks: list[str] | None = None,
                        max_rows: int | None = None, overwrite: bool = False) -> dict:
    """`training_text` as a pretraining corpus (.txt: one text per line, a blank line after each
    document, as corpus/documents.py reads it); one line says what it holds. A file already at
    `path` is refused unless `overwrite` (a corpus a run was pretrained on may be there)."""
    glue_dir, path = Path(glue_dir), Path(path)
    if path.suffix != ".txt":
        raise ValueError(f"--write-training-text {path}: name a .txt file (one text per line, documents separated by blank lines)")
    if path.is_dir() or (path.exists() and not overwrite):
        raise FileExistsError(f"--write-training-text {path} is a folder; name a .txt file" if path.is_dir() else
                              f"--write-training-text {path} already exists; pass --overwrite to replace it, or name another file")
    if not glue_dir.is_dir():
        raise NotADirectoryError(f"--glue {glue_dir} is not a folder; pass the folder GLUE's download script fills")
    names = [name for name in task_names(tasks) if (glue_dir / name / "train.tsv").is_file()]
    if not names:
        raise FileNotFoundError(f"--glue {glue_dir} holds no <task>/train.tsv of {', '.join(task_names(tasks))}")
    documents = list(training_text(glue_dir, names, max_rows))
    write_atomic(path, "".join("".join(f"{line}\n" for line in document) + "\n" for document in documents))
    texts = sum(map(len, documents))
    print(f"{len(documents)} documents ({texts} texts, labels dropped) from the train.tsv of {', '.join(names)} in {path}; "
          f"no dev or test file read", flush=True)
    return {"documents": len(documents), "texts": texts, "tasks": names, "path": str(path)}
