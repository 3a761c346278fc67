"""Question answering: the span head, its loss and its checkpoint; the windows over a passage;
a fine-tune end to end on a tiny SQuAD file."""

import torch
import torch.nn.functional as F

from minibert import ModelConfig
from minibert.finetune.checkpoint import load_classifier, save_classifier
from minibert.heads import SpanExtractor, span_loss
from minibert.tokenizers.wordpiece import WordPieceTokenizer

TINY = ModelConfig(vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=64)


def test_span_loss_is_the_mean_of_the_start_and_end_cross_entropies():
    torch.manual_seed(0)
    start, end = torch.randn(3, 7), torch.randn(3, 7)
    gold_start, gold_end = torch.tensor([0, 2, 5]), torch.tensor([0, 4, 6])
    expected = (F.cross_entropy(start, gold_start) + F.cross_entropy(end, gold_end)) / 2
    assert torch.allclose(span_loss(start, end, gold_start, gold_end), expected)
    # it is not the sum: both terms weigh a half
    assert not torch.allclose(span_loss(start, end, gold_start, gold_end), expected * 2)


def test_span_extractor_gives_one_start_and_one_end_logit_per_position():
    torch.manual_seed(0)
    model = SpanExtractor(TINY).eval()
    ids = torch.randint(5, 64, (2, 9))
    out = model(ids, torch.ones_like(ids))
    assert out.start_logits.shape == out.end_logits.shape == (2, 9)
    hidden = model.encoder(ids, torch.ones_like(ids)).last_hidden_state  # the head is one linear map H -> 2
    assert torch.allclose(out.start_logits, hidden @ model.head.weight[0] + model.head.bias[0], atol=1e-5)
    assert torch.allclose(out.end_logits, hidden @ model.head.weight[1] + model.head.bias[1], atol=1e-5)
    trained = model(ids, torch.ones_like(ids), start_positions=torch.tensor([1, 0]), end_positions=torch.tensor([3, 0]))
    assert torch.allclose(trained.loss, span_loss(out.start_logits, out.end_logits, torch.tensor([1, 0]), torch.tensor([3, 0])))


def test_padding_a_window_does_not_change_its_loss():
    torch.manual_seed(0)
    model = SpanExtractor(TINY).eval()
    ids = torch.randint(5, 64, (1, 9))
    gold = dict(start_positions=torch.tensor([2]), end_positions=torch.tensor([4]))
    alone = model(ids, torch.ones_like(ids), **gold).loss
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)  # the same window in a batch 14 wide
    mask = torch.cat([torch.ones(1, 9, dtype=torch.long), torch.zeros(1, 5, dtype=torch.long)], 1)
    assert torch.allclose(model(padded, mask, **gold).loss, alone, atol=1e-5)


def test_a_span_extractor_saves_and_loads_as_a_fine_tuned_model(tmp_path):
    torch.manual_seed(0)
    model = SpanExtractor(TINY).eval()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
    save_classifier(model, WordPieceTokenizer(vocab), None, tmp_path)
    loaded = load_classifier(tmp_path)
    assert isinstance(loaded.model, SpanExtractor) and loaded.labels is None
    ids = torch.randint(5, 64, (1, 6))
    assert torch.equal(loaded.model(ids).start_logits, model(ids).start_logits)


# --- windows ---------------------------------------------------------------------------------

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "wrote", "it", "?", "the", "book", "was", "written", "by",
         "ann", "smith", "in", "1990", "##s", "a", "long", "time", "ago", ".", "and", "then", "some", "more", "words"]


def wordpiece() -> WordPieceTokenizer:
    return WordPieceTokenizer(WORDS)


def example(context: str, answer: str, question: str = "Who wrote it?", qid: str = "q1"):
    from minibert.finetune.kinds.squad import QAExample
    start = context.index(answer) if answer else 0
    return QAExample(qid, "t", question, context, [(answer, start)] if answer else [], is_impossible=not answer)


PASSAGE = "The book was written by Ann Smith in 1990s, a long time ago. And then some more words and more words."


def test_each_window_holds_the_question_then_a_slice_of_the_passage_overlapping_by_the_stride():
    from minibert.finetune.kinds.windows import question_windows
    tokenizer = wordpiece()
    passage, spans = tokenizer.tokenize_with_offsets(PASSAGE)
    question = tokenizer.tokenize_to_ids("Who wrote it?")
    windows, _ = question_windows(tokenizer, [example(PASSAGE, "Ann Smith")], max_len=16, max_query_len=64, doc_stride=3,
                                  labelled=True)
    room = 16 - len(question) - 3
    assert len(windows) > 2
    covered = []
    for window in windows:
        assert len(window.input_ids) <= 16
        assert window.input_ids[:len(question) + 2] == [tokenizer.cls_id, *question, tokenizer.sep_id]
        inside = [i for i, offset in enumerate(window.offsets) if offset is not None]
        covered.append([window.offsets[i] for i in inside])
        assert [window.input_ids[i] for i in inside] == passage[spans.index(window.offsets[inside[0]]):][:len(inside)]
    for before, after in zip(covered, covered[1:]):  # consecutive windows share exactly doc_stride tokens
        assert before[-3:] == after[:3] and len(before) == room
    assert covered[-1][-1] == spans[-1]  # the last window reaches the passage's end


def test_the_gold_positions_point_at_the_answer_or_at_cls_where_a_window_misses_it():
    from minibert.finetune.kinds.windows import question_windows
    tokenizer = wordpiece()
    windows, alignment = question_windows(tokenizer, [example(PASSAGE, "Ann Smith")], max_len=16, max_query_len=64,
                                          doc_stride=3, labelled=True)
    holding = [w for w in windows if w.start != 0]
    assert holding and alignment.inexact == alignment.lost == 0
    for window in holding:
        first, last = window.offsets[window.start], window.offsets[window.end]
        assert PASSAGE[first[0]:last[1]] == "Ann Smith"
    for window in windows:
        if window.start == 0:  # this window does not hold both ends of the answer
            texts = [o for o in window.offsets if o is not None]
            assert not (texts[0][0] <= PASSAGE.index("Ann") and PASSAGE.index("Smith") + 5 <= texts[-1][1])


def test_an_answer_inside_a_token_is_counted_as_not_aligned_exactly():
    from minibert.finetune.kinds.windows import question_windows
    windows, alignment = question_windows(wordpiece(), [example(PASSAGE, "Smit")], max_len=64, max_query_len=64, doc_stride=8,
                                          labelled=True)
    assert (alignment.answers, alignment.inexact, alignment.lost) == (1, 1, 0)
    assert "1 of 1 training answers" in alignment.line()


def test_a_window_too_small_for_the_stride_is_one_line_naming_the_fix():
    import pytest
    from minibert.finetune.kinds.windows import question_windows
    with pytest.raises(ValueError, match="--doc-stride"):
        question_windows(wordpiece(), [example(PASSAGE, "Ann Smith")], max_len=12, max_query_len=64, doc_stride=8, labelled=True)


# --- a fine-tune end to end ------------------------------------------------------------------

import collections
import json
import re
import string
import subprocess
import sys

import pytest

from minibert import Encoder, save_pretrained

SENTENCES = ["The book was written by Ann Smith in 1990s.", "It was a long time ago.", "And then some more words.",
             "Smith wrote the book.", "The words were written in 1990s."]
QUESTIONS = [("Who wrote the book?", "Ann Smith"), ("When was it written?", "1990s"), ("What was it?", "a long time ago"),
             ("What came then?", "some more words")]


def squad_file(path, version="1.1", impossible=False) -> dict:
    """A small SQuAD file in its own layout: two articles, each paragraph the sentences in another order."""
    data, n = [], 0
    for article in range(2):
        paragraphs = []
        for shift in range(3):
            context = " ".join(SENTENCES[shift:] + SENTENCES[:shift])
            qas = []
            for question, answer in QUESTIONS:
                n += 1
                qas.append({"id": f"q{n}", "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]})
            if impossible:
                n += 1
                qas.append({"id": f"q{n}", "question": "Who read it?", "answers": [], "is_impossible": True,
                            "plausible_answers": [{"text": "Smith", "answer_start": context.index("Smith")}]})
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"article {article}", "paragraphs": paragraphs})
    top = {"version": version, "data": data}
    path.write_text(json.dumps(top))
    return top


def official_v1(dataset: dict, predictions: dict) -> dict:
    """SQuAD 1.1's official evaluation, written out from its rules: answers normalized (lower
    case, punctuation and a/an/the removed, whitespace collapsed), exact match and bag-of-tokens
    F1 each the best over the gold answers, averaged over every question, as percentages."""
    def normalize(text):
        text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
        return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())

    def f1(prediction, gold):
        p, g = normalize(prediction).split(), normalize(gold).split()
        same = sum((collections.Counter(p) & collections.Counter(g)).values())
        if same == 0:
            return 0.0
        precision, recall = same / len(p), same / len(g)
        return 2 * precision * recall / (precision + recall)

    exact = total_f1 = total = 0
    for article in dataset["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                golds = [answer["text"] for answer in qa["answers"]]
                exact += max(float(normalize(predictions[qa["id"]]) == normalize(g)) for g in golds)
                total_f1 += max(f1(predictions[qa["id"]], g) for g in golds)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * total_f1 / total}


from test_finetune import one_thread  # noqa: F401  (one thread, as the processes the tests start: results match theirs bit for bit)


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=len(WORDS), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=64)
    return save_pretrained(Encoder(config), tmp_path_factory.mktemp("qa_backbone"), tokenizer=wordpiece())


QA_FLAGS = ["--max-len", "32", "--doc-stride", "8", "--batch-size", "8", "--steps", "6", "--lr", "1e-3"]


def finetune_qa(backbone, train, dev, out, *flags):
    from minibert.finetune import main
    assert main(["--init", str(backbone), "--train", str(train), "--dev", str(dev), "--out", str(out), "--device", "cpu",
                 *QA_FLAGS, *flags]) == 0
    return json.loads((out / "eval.json").read_text())


@pytest.fixture(scope="module")
def squad_run(backbone, tmp_path_factory):
    folder = tmp_path_factory.mktemp("squad")
    dataset = squad_file(folder / "train.json")
    return folder, dataset, finetune_qa(backbone, folder / "train.json", folder / "train.json", folder / "out")


def test_a_squad_file_fine_tunes_and_its_predictions_score_as_the_official_script_scores_them(squad_run):
    folder, dataset, report = squad_run
    predictions = json.loads((folder / "out" / "predictions.json").read_text())
    ids = [qa["id"] for article in dataset["data"] for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    assert sorted(predictions) == sorted(ids) and report["task"] == "qa"
    official = official_v1(dataset, predictions)
    assert report["exact_match"] == pytest.approx(official["exact_match"])
    assert report["f1"] == pytest.approx(official["f1"])
    nbest = json.loads((folder / "out" / "nbest_predictions.json").read_text())
    assert all(nbest[qid][0]["text"] == predictions[qid] for qid in ids)
    assert not (folder / "out" / "null_odds.json").exists()


def test_predict_answers_a_dev_file_as_its_fine_tune_did(squad_run, tmp_path):
    folder, dataset, _ = squad_run
    subprocess.run([sys.executable, "-m", "minibert", "predict", str(folder / "out"), str(folder / "train.json"), "--out",
                    str(tmp_path / "p.json")], check=True, capture_output=True)
    assert json.loads((tmp_path / "p.json").read_text()) == json.loads((folder / "out" / "predictions.json").read_text())
    rows = "id\tquestion\tcontext\n" + "".join(f"{qa['id']}\t{qa['question']}\t{paragraph['context']}\n"
                                                for paragraph in dataset["data"][0]["paragraphs"] for qa in paragraph["qas"])
    (tmp_path / "q.tsv").write_text(rows)
    subprocess.run([sys.executable, "-m", "minibert", "predict", str(folder / "out"), str(tmp_path / "q.tsv"), "--out",
                    str(tmp_path / "a.tsv")], check=True, capture_output=True)
    answered = [line.split("\t") for line in (tmp_path / "a.tsv").read_text().splitlines()[1:]]
    predictions = json.loads((folder / "out" / "predictions.json").read_text())
    contexts = {qa["id"]: paragraph["context"] for paragraph in dataset["data"][0]["paragraphs"] for qa in paragraph["qas"]}
    assert len(answered) == len(contexts)
    for qid, text, score, start in answered:
        assert text == predictions[qid] and 0 <= float(score) <= 1
        assert contexts[qid][int(start):int(start) + len(text)] == text


def test_an_answer_with_a_tab_or_a_line_break_keeps_its_row_in_predicts_tsv():
    import csv
    import io

    from minibert.finetune.kinds.spans import Answer, answer_table
    answers = {"q1": Answer("plain", 0.5, 3), "q2": Answer('a\tb\nc "d"', 0.25, 7), "q3": Answer("", 0.0, -1)}
    rows = list(csv.reader(io.StringIO(answer_table(answers)), dialect="excel-tab"))
    assert rows == [["id", "answer", "score", "start"], ["q1", "plain", "0.5", "3"], ["q2", 'a\tb\nc "d"', "0.25", "7"], ["q3", "", "0", "-1"]]
    assert answer_table(answers).splitlines()[1] == "q1\tplain\t0.5\t3"  # a plain answer as it is


def test_the_python_api_answers_a_question_from_a_context(squad_run):
    from minibert.finetune import load_classifier
    folder, _, _ = squad_run
    context = " ".join(SENTENCES)
    (found,) = load_classifier(folder / "out").predict([("Who wrote the book?", context)], max_len=32)
    assert found.text and context[found.start:found.start + len(found.text)] == found.text
    with pytest.raises(ValueError, match="question, context"):
        load_classifier(folder / "out").predict(["Who wrote the book?"])


def test_a_squad_2_file_trains_and_scores_with_answers_that_are_not_there(backbone, tmp_path):
    squad_file(tmp_path / "train.json", version="v2.0", impossible=True)
    report = finetune_qa(backbone, tmp_path / "train.json", tmp_path / "train.json", tmp_path / "out")
    for key in ("HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh", "exact_match", "f1"):
        assert key in report
    null_odds = json.loads((tmp_path / "out" / "null_odds.json").read_text())
    assert len(null_odds) == report["total"] and report["NoAns_total"] == 6


def test_squad_2_dev_data_is_refused_for_a_head_trained_on_squad_1(backbone, tmp_path, capsys):
    from minibert.finetune import main
    squad_file(tmp_path / "train.json")
    squad_file(tmp_path / "dev.json", version="v2.0", impossible=True)
    assert main(["--init", str(backbone), "--train", str(tmp_path / "train.json"), "--dev", str(tmp_path / "dev.json"),
                 "--out", str(tmp_path / "out"), *QA_FLAGS]) != 0
    assert "SQuAD 2.0" in capsys.readouterr().err and not (tmp_path / "out" / "model.safetensors").exists()


def test_a_passage_of_100000_characters_is_read_in_many_windows(squad_run):
    from minibert.finetune import load_classifier
    folder, _, _ = squad_run
    passage = " ".join(SENTENCES * 2300)[:100_000]
    (found,) = load_classifier(folder / "out").predict([("Who wrote the book?", passage)])
    assert found.text and passage[found.start:found.start + len(found.text)] == found.text


# `python -m minibert predict ...` on a question-answering model, held in its second batch's forward.
HELD_WHILE_ANSWERING = """
from minibert.heads import SpanExtractor
forward, calls = SpanExtractor.forward, []
def second_held(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        hold()
    return forward(self, *args, **kwargs)
SpanExtractor.forward = second_held
from minibert.tools.commands import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_answering_is_one_line_and_writes_nothing(squad_run, tmp_path):
    from test_finetune_ctrl_c import HOLD, pressed_when_held
    folder, _, _ = squad_run
    out = tmp_path / "answers" / "p.json"
    out.parent.mkdir()
    argv = ["predict", str(folder / "out"), str(folder / "train.json"), "--out", str(out), "--batch-size", "2", "--device", "cpu"]
    returncode, printed, err = pressed_when_held(HOLD + HELD_WHILE_ANSWERING, tmp_path / "held", argv)
    assert returncode == 130 and "Traceback" not in printed + err
    assert [line for line in err.split("\n") if line.strip()][-1:] == [f"python -m minibert predict: interrupted; --out {out} not written"]
    assert list(out.parent.iterdir()) == []


@pytest.mark.slow
def test_sigkill_at_any_moment_then_resume_is_bit_identical(backbone, tmp_path):
    """A real question-answering fine-tune killed with SIGKILL at random moments, resumed each
    time: the model and the evaluations at the end are an uninterrupted run's, byte for byte."""
    import os
    from minibert.operations.checkpoint import Checkpoints
    from tiny_run import REPO, kill_at_random_moments
    squad_file(tmp_path / "train.json")
    flags = ["--init", str(backbone), "--train", str(tmp_path / "train.json"), "--dev", str(tmp_path / "train.json"),
             "--device", "cpu", *QA_FLAGS[:-4], "--steps", "60", "--lr", "1e-3", "--eval-every", "3"]
    from minibert.finetune import main
    assert main([*flags, "--out", str(tmp_path / "whole")]) == 0
    killed = tmp_path / "killed"
    command = [sys.executable, str(REPO / "train.py"), "finetune", *flags, "--out", str(killed)]
    kill_at_random_moments(command, killed / "checkpoints" / "latest", latest=0.2)  # once a checkpoint is complete
    assert Checkpoints(killed / "checkpoints").steps() and not (killed / "model.safetensors").exists()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command + ["--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert (killed / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()
    assert (killed / "predictions.json").read_text() == (tmp_path / "whole" / "predictions.json").read_text()
    whole, resumed = (json.loads((folder / "eval.json").read_text())["evaluations"] for folder in (tmp_path / "whole", killed))
    assert resumed == whole


def test_a_tokenizer_json_without_offsets_gives_way_to_the_vocab_txt_beside_it(tmp_path):
    """transformers saves tokenizer.json (which minibert reads without character offsets) beside
    the vocab.txt it was made from: question answering opens the vocab.txt, whose ids are the same;
    a folder with tokenizer.json alone is one line naming the fix."""
    pytest.importorskip("tokenizers")
    from test_tokenizer_json import wordpiece_folder
    from minibert.tokenizers import load_tokenizer
    from minibert.tokenizers.load import offsets_tokenizer
    folder = wordpiece_folder(tmp_path / "hf", SENTENCES * 20 + [" ".join(q for q, _ in QUESTIONS)] * 20, lowercase=True)
    if not (folder / "vocab.txt").exists():
        vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
        (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in sorted(vocab, key=vocab.get)))
    loaded = load_tokenizer(folder)
    assert not loaded.gives_offsets  # the tokenizer.json layout, first in line
    chosen = offsets_tokenizer(loaded, folder, SENTENCES)
    assert chosen.gives_offsets and all(chosen.tokenize_to_ids(s) == loaded.tokenize_to_ids(s) for s in SENTENCES)
    (folder / "vocab.txt").unlink()
    with pytest.raises(ValueError, match="vocab.txt"):
        offsets_tokenizer(load_tokenizer(folder), folder, SENTENCES)
