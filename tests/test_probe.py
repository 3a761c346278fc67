"""fill-mask and detect: the same token ids and scores as transformers' fill-mask pipeline on a
Hugging Face checkpoint, the same numbers as a plain forward pass on a trained minibert
checkpoint (SentencePiece), and `python -m minibert` with one-line errors."""

import os
import subprocess
import sys

import pytest
import torch

from minibert import fill_mask, detect_replaced, from_pretrained
from minibert.__main__ import main
from minibert.tokenizers import load_tokenizer
from minibert.tools.probe import masked_ids
from minibert.runs.cli import main as train
from tiny_run import REPO, tiny_args, write_corpus

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
         *"the cat dog sat on mat a ran big small house . , ##s ##ing".split()]
TEXTS = ["The cat sat on the [MASK].", "[MASK] big dogs ran on a small [MASK], the [MASK] sat."]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A random BertForMaskedLM (weights spread wide, so the ranking has no near-ties) with a
    tiny WordPiece vocabulary, saved as transformers saves it."""
    config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
        max_position_embeddings=32, initializer_range=0.5,
    )
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("hf_bert")
    transformers.BertForMaskedLM(config).eval().save_pretrained(directory)
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in VOCAB))
    transformers.BertTokenizer(str(directory / "vocab.txt")).save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """variant -> checkpoint directory of a tiny `python train.py --variant V` run (SentencePiece)."""
    root = tmp_path_factory.mktemp("runs")
    corpus = write_corpus(root / "corpus.txt")
    runs = {}
    for variant in ("albert", "electra"):
        runs[variant] = root / variant
        assert train(tiny_args(variant, corpus, root / "cache", runs[variant], 10)) == 0
    return runs


def test_fill_mask_equals_the_transformers_pipeline(hf_dir):
    pipe = transformers.pipeline("fill-mask", model=str(hf_dir), tokenizer=str(hf_dir), device="cpu")
    ours = fill_mask(hf_dir, TEXTS, top_k=4)  # one padded batch
    for text, masks in zip(TEXTS, ours):
        reference = pipe(text, top_k=4)
        reference = [reference] if isinstance(reference[0], dict) else reference  # one mask: not nested
        assert len(masks) == len(reference) == text.count("[MASK]")
        for candidates, expected in zip(masks, reference):
            assert [c.token_id for c in candidates] == [e["token"] for e in expected]
            assert [c.text for c in candidates] == [e["token_str"] for e in expected]
            assert [c.token for c in candidates] == [pipe.tokenizer.convert_ids_to_tokens(e["token"]) for e in expected]
            torch.testing.assert_close(torch.tensor([c.score for c in candidates]),
                                       torch.tensor([e["score"] for e in expected]), atol=1e-5, rtol=0)
    tokenizer = load_tokenizer(hf_dir)  # every token's text as the pipeline shows it ("##s" stays "##s")
    assert [tokenizer.token_text(i) for i in range(len(VOCAB))] == [pipe.tokenizer.decode([i]) for i in range(len(VOCAB))]
    single = fill_mask(hf_dir, TEXTS[0], top_k=4)  # one text: not nested
    assert [[c.token_id for c in m] for m in single] == [[c.token_id for c in m] for m in ours[0]]


def test_roberta_spelling_of_the_mask_is_accepted(hf_dir):
    tokenizer = load_tokenizer(hf_dir)
    assert masked_ids(tokenizer, "the <mask> sat") == masked_ids(tokenizer, "the [MASK] sat")
    assert masked_ids(tokenizer, "the [MASK] sat").count(tokenizer.mask_id) == 1


def test_fill_mask_on_a_trained_sentencepiece_checkpoint(trained):
    directory = trained["albert"]
    tokenizer, model = load_tokenizer(directory), from_pretrained(directory, head="mlm")
    # the mask replaces whole pieces: no piece of its own for the space before it
    ids = [tokenizer.cls_id, *tokenizer.tokenize_to_ids("The small"), tokenizer.mask_id,
           *tokenizer.tokenize_to_ids("eats the big cat near the garden."), tokenizer.sep_id]
    with torch.no_grad():
        probabilities = model(torch.tensor([ids])).logits[0, ids.index(tokenizer.mask_id)].softmax(-1)
    scores, expected = probabilities.topk(3)
    (candidates,) = fill_mask(directory, "The small [MASK] eats the big cat near the garden.", top_k=3)
    assert [c.token_id for c in candidates] == expected.tolist()
    torch.testing.assert_close(torch.tensor([c.score for c in candidates]), scores, atol=1e-6, rtol=0)
    assert [c.token for c in candidates] == [tokenizer.piece(i) for i in expected.tolist()]  # ▁cat, not cat
    assert [c.text for c in candidates] == [tokenizer.piece(i).removeprefix("▁") for i in expected.tolist()]  # cat


def test_detect_gives_every_token_a_probability(trained):
    directory = trained["electra"]
    tokenizer, model = load_tokenizer(directory), from_pretrained(directory, head="rtd")
    text = "The big cat sees the fish."
    judgements = detect_replaced(directory, text)
    ids = tokenizer.encode(text)
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0, 1:-1].sigmoid()
    assert [j.token_id for j in judgements] == ids[1:-1]  # [CLS] and [SEP] left out
    torch.testing.assert_close(torch.tensor([j.probability for j in judgements]), expected, atol=1e-6, rtol=0)
    assert [j.replaced for j in judgements] == (expected > 0.5).tolist()


def test_command_line(trained, capsys):
    assert main(["fill-mask", str(trained["albert"]), "The [MASK] cat.", "A [MASK] [MASK].", "--top-k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["The [MASK] cat.", "  mask 1 of 1:"] and len(lines) == 2 + 2 + 1 + 2 * (1 + 2)
    assert lines[4:6] == ["A [MASK] [MASK].", "  mask 1 of 2:"]
    assert main(["detect", str(trained["electra"]), "The cat eats."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "The cat eats." and all(0 <= float(line.split()[0]) <= 1 for line in lines[1:])


def test_python_dash_m_minibert(hf_dir):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "minibert", "fill-mask", str(hf_dir), "The [MASK] sat."],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == "  mask 1 of 1:" and len(done.stdout.splitlines()) == 2 + 5


BAD_INPUT = {
    "missing directory": (["fill-mask", "no/such/dir", "The [MASK]."], "no checkpoint directory at no/such/dir"),
    "no mask": (["fill-mask", "{albert}", "No mask here."], "no mask in 'No mask here.'"),
    "no MLM head": (["fill-mask", "{electra}", "The [MASK]."], "fill-mask needs a masked-LM checkpoint"),
    "no RTD head": (["detect", "{albert}", "The cat."], "detect needs an ELECTRA discriminator"),
    "zero candidates": (["fill-mask", "{albert}", "The [MASK].", "--top-k", "0"], "top_k must be a positive integer"),
    "no command": ([], "required: COMMAND"),
    "unknown command": (["fill", "{albert}", "The [MASK]."], "invalid choice: 'fill'"),
    "no text": (["detect", "{electra}"], "required: TEXT"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_status_2(case, trained, capsys):
    argv, fragment = BAD_INPUT[case]
    argv = [a.format(**{k: str(v) for k, v in trained.items()}) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m minibert") and "Traceback" not in err
    assert fragment in err, err


def test_a_tokenizer_larger_than_the_model_is_refused_naming_the_fix(trained, hf_dir):
    """Ids beyond the embedding table would index out of range: Tokenizer.check_fits says so first."""
    bigger = load_tokenizer(trained["albert"])  # 8k pieces against the tiny HF model's small table
    model = from_pretrained(hf_dir, head="mlm")
    with pytest.raises(ValueError, match=r"tokenizer=: the tokenizer has \d+ tokens but the model only \d+ embeddings; "
                                         r"pass the tokenizer the model was trained with"):
        fill_mask(model, "The [MASK].", tokenizer=bigger)
