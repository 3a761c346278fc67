"""--tokenizer DIR: pretraining from scratch with a tokenizer one already has, in every layout the
project reads; the model's vocabulary and special ids follow it. (DistilBERT reads its teacher's.)"""

import json

import pytest

from minibert import from_pretrained
from minibert.corpus.vocabulary import train_tokenizer
from minibert.tokenizers import load_tokenizer
from minibert.runs.cli import main as train_main
from test_family_folders import byte_bpe_files, spiece_file, wordpiece_vocab
from tiny_run import tiny_args, write_corpus

tokenizers = pytest.importorskip("tokenizers")


def write_layout(layout: str, directory, corpus):
    directory.mkdir()
    if layout == "vocab.txt":  # BERT's (DistilBERT's and ELECTRA's too)
        (directory / "vocab.txt").write_text("".join(t + "\n" for t in wordpiece_vocab()))
    elif layout == "tokenizer.json":
        wordpiece = tokenizers.BertWordPieceTokenizer({t: i for i, t in enumerate(wordpiece_vocab())}, lowercase=True)
        wordpiece.save(str(directory / "tokenizer.json"))
    elif layout == "spiece.model":  # ALBERT's
        spiece_file(directory)
    elif layout == "vocab.json + merges.txt":  # RoBERTa's byte-level BPE
        byte_bpe_files(directory)
    else:  # a minibert run's
        train_tokenizer(corpus, vocab_size=400, cache_dir=directory.parent / "tok-cache").save(directory)


@pytest.mark.parametrize("variant, layout", [("bert", "vocab.txt"), ("electra", "tokenizer.json"), ("albert", "spiece.model"),
                                             ("roberta", "vocab.json + merges.txt"), ("albert", "tokenizer.model")])
def test_pretrains_with_the_given_tokenizer(variant, layout, tmp_path):
    corpus = write_corpus(tmp_path / "animals.txt", documents=24)
    write_layout(layout, tmp_path / "tok", corpus)
    given = load_tokenizer(tmp_path / "tok")
    args = tiny_args(variant, corpus, tmp_path / "cache", tmp_path / "out", 2, "--tokenizer", str(tmp_path / "tok"),
                     "--eval-every", "2", "--save-every", "2")
    assert train_main(args) == 0
    model = from_pretrained(tmp_path / "out")
    assert model.config.vocab_size == given.vocab_size and model.config.pad_token_id == given.pad_id
    kept = load_tokenizer(tmp_path / "out")  # kept beside the model
    assert kept.vocab_size == given.vocab_size and (kept.mask_id, kept.sep_id) == (given.mask_id, given.sep_id)
    assert not list((tmp_path / "cache").glob("spm-*"))  # no tokenizer was trained


def test_a_folder_without_a_tokenizer_is_one_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "animals.txt", documents=4)
    (tmp_path / "empty").mkdir()
    assert train_main(tiny_args("bert", corpus, tmp_path / "cache", tmp_path / "out", 2, "--tokenizer", str(tmp_path / "empty"))) == 2
    assert "--tokenizer" in capsys.readouterr().err and not (tmp_path / "cache").exists()


def test_the_sentence_sample_is_a_flag_and_in_the_cost_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "animals.txt", documents=24)
    args = tiny_args("albert", corpus, tmp_path / "cache", tmp_path / "out", 1, "--tokenizer-sentences", "2000")
    assert train_main(args) == 0
    assert "the tokenizer on up to 2,000 sentences" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "cache").glob("spm-*")] and json.loads((tmp_path / "out" / "run.json").read_text())["settings"]["tokenizer_sentences"] == 2000
