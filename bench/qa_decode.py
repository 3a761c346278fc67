"""Seconds to decode SQuAD answers from span logits at the size of SQuAD v1.1's dev set.

Usage: python bench/qa_decode.py [--windows-of 384] [--stride 128] [--repeat 3]
Cuts the dev set's 10,570 questions into windows of 384 tokens, as a fine-tune would (the
question, then as much of the context as fits, the next window 128 tokens on), with the
context's whitespace words standing in for sub-word tokens, and decodes random logits of that
shape with minibert.finetune.kinds.span_decoding (v1.1 and v2.0 decoding). Without the shared dev
file, synthetic questions of its size (150 words of context each) stand in.
Prints the windows, the questions and the best seconds of --repeat runs.
"""

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from minibert.finetune.kinds.span_decoding import decode_spans  # noqa: E402
from minibert.finetune.kinds.squad import QAExample, read_squad  # noqa: E402

DEV = REPO.parent / "shared" / "datasets" / "squad" / "dev-v1.1.json"


def questions() -> list[QAExample]:
    if DEV.is_file():
        return list(read_squad(DEV))
    context = " ".join(f"word{i}" for i in range(150))
    return [QAExample(str(i), "", "what is the word asked about here?", context, [("word3", 15)]) for i in range(10570)]


def windows(examples: list[QAExample], length: int, stride: int):
    """(window_example [W], offsets [W, length, 2]): question tokens and padding -1."""
    owner, rows = [], []
    for e, example in enumerate(examples):
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", example.context)]
        room = length - len(example.question.split()) - 3  # [CLS] question [SEP] passage [SEP]
        at = 0
        while True:
            row = np.full((length, 2), -1, dtype=np.int64)
            part = words[at:at + room]
            first = length - room - 1
            row[first:first + len(part)] = part
            owner.append(e)
            rows.append(row)
            if at + room >= len(words):
                break
            at += stride
    return np.array(owner), np.stack(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows-of", type=int, default=384)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    examples = questions()
    owner, offsets = windows(examples, args.windows_of, args.stride)
    generator = np.random.default_rng(0)
    starts, ends = (generator.standard_normal(offsets.shape[:2]).astype(np.float32) for _ in range(2))
    print(f"{len(examples)} questions, {len(owner)} windows of {args.windows_of} tokens")
    for allow_null in (False, True):
        seconds = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            decoded = decode_spans(examples, owner, offsets, starts, ends, allow_null=allow_null)
            seconds.append(time.perf_counter() - began)
        assert len(decoded.predictions) == len(examples)
        print(f"decode ({'v2.0, with null' if allow_null else 'v1.1'}): best of {args.repeat}: {min(seconds):.2f} s")


if __name__ == "__main__":
    main()
