"""Tokens per second of minibert's byte-level BPE against transformers' RoBERTa tokenizers.

Usage: python bench/tokenizer_speed.py [--lines N]
Learns a RoBERTa-sized vocabulary (up to 50k pieces, with the `tokenizers` library) from
WikiText-2's training text, or from the default corpus when the shared datasets are absent,
then tokenizes WikiText-2 valid (or the default corpus's first lines) with, side by side:
  * ours:   minibert.interop.tokenizers.ByteLevelBPETokenizer (pure Python, `re` + a word cache);
  * python: transformers 5 has no pure-Python RobertaTokenizer; its ClvpTokenizer's
            `_tokenize`, with the English normalizer off, is the same GPT-2 BPE in Python (the
            algorithm of transformers 4's slow RobertaTokenizer), on `regex`;
  * fast:   transformers.RobertaTokenizer, the `tokenizers` library in Rust, one call per line
            and one batch call (which may use every core), and its `tokenizers.Tokenizer` alone
            (the same batch without transformers' Python around it).
Each runs twice on a fresh instance: "cold" (first pass: every word new to its cache) and
"warm" (second pass). Prints a markdown table with the ratios to ours (time on the same text).
The python one does not look for typed special tokens (WikiText's "<unk>"), so it makes a few
more tokens; its tokens/s counts its own.
"""

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# The script's folder would shadow the `tokenizers` library with this file: put the checkout first instead.
REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)

import tokenizers  # noqa: E402
import transformers  # noqa: E402

from minibert.corpus.default_corpus import default_corpus_path  # noqa: E402
from minibert.interop.tokenizers import ByteLevelBPETokenizer  # noqa: E402
from minibert.interop.tokenizers.byte_bpe import pretokenizer  # noqa: E402

DATASETS = REPO.parent / "shared" / "datasets" / "wikitext-2"


def texts() -> tuple[list[str], list[str], str]:
    """(training lines, lines to tokenize, what they are)."""
    if DATASETS.is_dir():
        read = lambda name: (DATASETS / name).read_text(encoding="utf-8").splitlines()  # noqa: E731
        return read("train.txt"), [line for line in read("valid.txt") if line.strip()], "WikiText-2 valid"
    lines = [line for line in default_corpus_path().read_text(encoding="utf-8").splitlines() if line]
    return lines, lines[:4000], "the default corpus (first 4000 lines)"


def build(directory: Path, lines: list[str]) -> None:
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(lines, vocab_size=50265, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False)
    trainer.save_model(str(directory))
    vocab = json.loads((directory / "vocab.json").read_text(encoding="utf-8"))
    vocab["<mask>"] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    ByteLevelBPETokenizer.load(directory).save(directory)


def contenders(directory: Path) -> dict:
    """name -> (make a fresh tokenizer, tokenize all lines with it -> number of tokens)."""
    def ours():
        pretokenizer()  # built once per process (~0.3 s), like the others' compiled patterns: not timed
        return ByteLevelBPETokenizer.load(directory)

    def python():
        slow = transformers.ClvpTokenizer(str(directory / "vocab.json"), str(directory / "merges.txt"))
        slow._normalizer = lambda text: text
        return slow

    fast = lambda: transformers.AutoTokenizer.from_pretrained(str(directory))  # noqa: E731
    return {
        "ours": (ours, lambda t, ls: sum(len(t.tokenize_to_ids(x)) for x in ls)),
        "python (GPT-2 BPE)": (python, lambda t, ls: sum(len(t.convert_tokens_to_ids(t._tokenize(x))) for x in ls)),
        "fast, per line": (fast, lambda t, ls: sum(len(t(x, add_special_tokens=False)["input_ids"]) for x in ls)),
        "fast, one batch": (fast, lambda t, ls: sum(map(len, t(ls, add_special_tokens=False)["input_ids"]))),
        "its Rust core, one batch": (lambda: fast().backend_tokenizer,
                                     lambda t, ls: sum(len(e.ids) for e in t.encode_batch(ls, add_special_tokens=False))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=None, help="tokenize only the first N lines")
    args = parser.parse_args()
    train, lines, what = texts()
    lines = lines[: args.lines]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        build(directory, train)
        vocab_size = ByteLevelBPETokenizer.load(directory).vocab_size
        rows = {}
        for name, (make, run) in contenders(directory).items():
            tokenizer = make()
            seconds = []
            for _ in range(2):
                start = time.perf_counter()
                count = run(tokenizer, lines)
                seconds.append(time.perf_counter() - start)
            rows[name] = (count, *seconds)
    count = rows["ours"][0]
    assert all(rows[name][0] == count for name in rows if "python" not in name), f"different numbers of tokens: {rows}"
    print(f"{datetime.date.today()}, {os.cpu_count()} cores: {len(lines)} lines of {what}, {count} tokens, "
          f"vocabulary of {vocab_size}; transformers {transformers.__version__}, tokenizers {tokenizers.__version__}\n")
    print("| tokenizer | cold tokens/s | warm tokens/s | speed vs ours, cold | speed vs ours, warm |")
    print("|---|---:|---:|---:|---:|")
    _, ours_cold, ours_warm = rows["ours"]
    for name, (own_count, cold, warm) in rows.items():
        print(f"| {name} | {own_count / cold:,.0f} | {own_count / warm:,.0f} | {ours_cold / cold:.2f}x | {ours_warm / warm:.2f}x |")


if __name__ == "__main__":
    main()
