"""Every ```python block of README.md and docs/*.md runs, as a reader would paste it.

Each block runs on its own, in a fresh namespace (`exec` in this process), with a temporary
folder as its working directory, where the paths the docs name exist, small and made here:

    checkpoints/bert, checkpoints/albert, checkpoints/electra
                          tiny `python train.py --variant V` runs (2 steps, tests/tiny_run.py)
    bert-base-uncased/    a tiny BERT in a Hugging Face folder (config.json, model.safetensors,
                          vocab.txt), as `hf download google-bert/bert-base-uncased` leaves one
    bert-hf/, albert-hf/  `python -m minibert export` of the bert and albert runs
    runs/sst2, runs/ner   the bert run fine-tuned for 2 steps: a sentence classifier and a tagger
    ner/dev.conll         the tagged sentences runs/ner was scored on
    glue/sst2/            train.tsv and dev.tsv, the sentences runs/sst2 was fine-tuned on

A block names everything it uses (its imports, its model, its tokenizer): none continues
another. A block that cannot run here (it needs a GPU, a download, a run of minutes) is marked
in the markdown, where a reader sees it, by the line right before its opening fence:

    *Not run by the tests: REASON.*

and this test checks that every such line gives its reason. Blocks that import transformers
(the dev extra) are skipped where it is not installed. A block's failure names its page and line.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from minibert import MaskedLM, ModelConfig, WordPieceTokenizer, save_pretrained
from minibert.runs.cli import main as train
from tiny_run import REPO, tiny_args, write_corpus

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\s*$")
MARKER = re.compile(r"^\*Not run by the tests: (?P<reason>.*)\*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    marker: str | None  # the line before the fence, when it is a "Not run" marker (or looks like one)

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    lines, blocks = page.read_text(encoding="utf-8").splitlines(), []
    for i, line in enumerate(lines):
        if FENCE.match(line):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            before = lines[i - 1] if i else ""
            marker = before if re.match(r"\s*(\*|<!--)\s*not run", before, re.I) else None
            blocks.append(Block(page, i + 1, "\n".join(lines[i + 1:end]) + "\n", marker))
    return blocks


BLOCKS = [block for page in PAGES for block in python_blocks(page)]

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the cat sat on mat . a dog barked paris is capital of france".split()]


def hf_bert(directory: Path) -> Path:
    """A tiny BERT with its MLM head, as Hugging Face lays one out, and a WordPiece vocab.txt."""
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=len(VOCAB), hidden_size=32, num_heads=2, intermediate_size=64, num_layers=2,
                         max_positions=64)
    return save_pretrained(MaskedLM(config), directory, format="hf", family="bert", tokenizer=WordPieceTokenizer(VOCAB))


@pytest.fixture(scope="module")
def docs_folder(tmp_path_factory) -> Path:
    """The working directory of every block: the paths the docs name (the module docstring)."""
    root = tmp_path_factory.mktemp("docs")
    corpus = write_corpus(root / "corpus.txt")
    for variant in ("bert", "albert", "electra"):
        out = root / "checkpoints" / variant
        assert train(tiny_args(variant, corpus, root / "cache", out, 2, "--eval-every", "100", "--save-every", "100")) == 0
    hf_bert(root / "bert-base-uncased")
    (root / "ner").mkdir()
    (root / "ner" / "dev.conll").write_text("The B-X\ncat O\nsat O\n\nA O\ndog B-X\nbarked O\n")
    sentences = root / "sst2.tsv"
    sentences.write_text("sentence\tlabel\n" + "".join(f"the cat sat {i}\t{i % 2}\n" for i in range(8)))
    (root / "glue" / "sst2").mkdir(parents=True)
    for split in ("train", "dev"):
        (root / "glue" / "sst2" / f"{split}.tsv").write_text(sentences.read_text())
    from minibert.finetune import main as finetune
    tiny = ["--init", str(root / "checkpoints" / "bert"), "--steps", "2", "--batch-size", "4", "--device", "cpu"]
    assert finetune([*tiny, "--train", str(sentences), "--dev", str(sentences), "--out", str(root / "runs" / "sst2")]) == 0
    assert finetune([*tiny, "--train", str(root / "ner" / "dev.conll"), "--dev", str(root / "ner" / "dev.conll"),
                     "--out", str(root / "runs" / "ner")]) == 0
    try:
        import transformers  # noqa: F401
    except ImportError:
        return root
    from minibert.__main__ import main as minibert_main
    for variant in ("bert", "albert"):
        assert minibert_main(["export", str(root / "checkpoints" / variant), str(root / f"{variant}-hf")]) == 0
    return root


def unexplained(blocks: list[Block]) -> list[str]:
    """The blocks marked as not run whose marker is not the convention's, or gives no reason."""
    return [f"{block.name}: a block that is not run is marked by the line right before its fence, "
            f"'*Not run by the tests: REASON.*'; found {block.marker!r}"
            for block in blocks if block.marker is not None and not (
                (match := MARKER.match(block.marker)) and match.group("reason").strip(" ."))]


def test_the_docs_have_python_blocks_and_each_skipped_one_says_why():
    assert len(BLOCKS) >= 9, [block.name for block in BLOCKS]
    assert not unexplained(BLOCKS)


def test_a_not_run_marker_without_its_reason_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n*Not run by the tests: needs a GPU.*\n```python\nimport torch\n```\n\n"
                    "*Not run by the tests: .*\n```python\npass\n```\n<!-- not run -->\n```python\npass\n```\n"
                    "```python\nprint(1)\n```\n")
    blocks = python_blocks(page)
    assert [(block.line, block.code) for block in blocks] == [(4, "import torch\n"), (9, "pass\n"), (13, "pass\n"),
                                                              (16, "print(1)\n")]
    assert [block.marker is not None for block in blocks] == [True, True, True, False]
    assert [problem.split(":")[1] for problem in unexplained(blocks)] == ["9", "13"]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.marker is None], ids=lambda block: block.name)
def test_the_python_block_runs(block, docs_folder, monkeypatch):
    if re.search(r"^\s*(from|import) transformers\b", block.code, re.M):
        pytest.importorskip("transformers")
    monkeypatch.chdir(docs_folder)
    page = str(block.page.relative_to(REPO))
    linecache.cache[page] = (0, None, block.page.read_text(encoding="utf-8").splitlines(True), page)  # tracebacks quote the page
    exec(compile("\n" * block.line + block.code, page, "exec"), {"__name__": "__docs__"})  # its line numbers are the page's
