"""`python -m minibert explore`: its answers are the project's own numbers (fill-mask's top-k,
detect's probabilities, the run's masks and copies), and its server refuses what it must."""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from minibert import detect_replaced, fill_mask
from minibert.__main__ import main
from minibert.runs.run import dupe_factor
from minibert.tools.explore import make_server, open_session
from minibert.tools.explore.answers import explore, explore_inside
from minibert.tools.explore.code_ran import CODE
from minibert.tools.explore.example import prepare, typed_example
from minibert.tools.explore.step import LOSS_TERMS
from minibert.tools.explore.overview import overview, source
from minibert.tools.explore.questions import ask
from tiny_run import REPO

MASKED_TEXT = "The small [MASK] eats the dog."
PLAIN_TEXT = "The small cat eats the dog."


@pytest.fixture(scope="module")
def sessions(family_runs):
    return {family: open_session(folder) for family, folder in family_runs.items()}


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "distilbert"])
def test_mlm_top_k_is_fill_masks(family, family_runs, sessions):
    answer = explore(sessions[family], MASKED_TEXT, 0)["mlm"]
    expected = fill_mask(family_runs[family], MASKED_TEXT, top_k=5)
    assert len(answer["positions"]) == len(expected) == 1
    for shown, candidates in zip(answer["positions"], expected):
        assert [c["id"] for c in shown["top"]] == [c.token_id for c in candidates]
        torch.testing.assert_close(torch.tensor([c["prob"] for c in shown["top"]]), torch.tensor([c.score for c in candidates]))


def test_mlm_loss_at_each_position_averages_to_the_runs_mlm_loss(sessions):
    session = sessions["roberta"]
    answer = explore(session, None, 0)
    losses = [p["loss"] for p in answer["mlm"]["positions"]]
    assert losses and all(p["right"] == (p["top"][0]["id"] == p["original"]["id"]) for p in answer["mlm"]["positions"])
    chosen = [t for t in answer["batch"]["tokens"] if t["fate"]]
    assert [t["position"] for t in chosen] == [p["position"] for p in answer["mlm"]["positions"]]
    assert {t["fate"] for t in chosen} <= {"mask", "random", "kept"}
    for t in chosen:  # the fate is what the model was shown
        assert (t["fate"] == "mask") == (t["shown"]["id"] == session.tokenizer.mask_id)
        assert (t["fate"] == "kept") == (t["shown"]["id"] == t["original"]["id"])


def test_electra_probabilities_are_detects(family_runs, sessions):
    answer = explore(sessions["electra"], PLAIN_TEXT, 0)["electra"]
    expected = detect_replaced(family_runs["electra"], PLAIN_TEXT)
    written = [t["p_written"] for t in answer["tokens"][1:-1]]  # detect leaves [CLS] and [SEP] out
    torch.testing.assert_close(torch.tensor(written), torch.tensor([j.probability for j in expected]))
    assert answer["played"] and answer["losses"]["rtd_weight"] == 50.0
    for t in answer["tokens"]:  # replaced means changed, and only a generator's sample can change a token
        assert t["replaced"] == (t["shown"]["id"] != t["original"]["id"])
        assert t["sampled"] or not t["replaced"]


def test_electra_attention_is_over_what_the_discriminator_read(sessions):
    """The attention panel shows the discriminator on its own input, the generator's samples in
    the masked places, not on [MASK]s it never reads."""
    from minibert.tools.attention_maps import attention_probabilities

    session = sessions["electra"]
    answer = explore(session, PLAIN_TEXT, 0)
    shown = [t["shown"]["id"] for t in answer["electra"]["tokens"]]
    assert session.tokenizer.mask_id not in shown
    assert answer["attention"]["tokens"] == [session.tokenizer.piece(i) for i in shown]
    ids = torch.tensor([shown])
    expected = attention_probabilities(session.encoder, {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                                         "token_type_ids": torch.zeros_like(ids)})
    torch.testing.assert_close(torch.tensor(answer["attention"]["weights"]), expected, atol=6e-4, rtol=0)  # rounded to 3 places


def test_draw_again_draws_a_new_mask_under_dynamic_masking(sessions):
    session = sessions["roberta"]
    fates = [[(t["fate"], t["shown"]["id"]) for t in explore(session, None, draw)["batch"]["tokens"]] for draw in (0, 1, 0)]
    assert fates[0] != fates[1] and fates[0] == fates[2]  # a new mask, and the same one for the same draw
    answer = explore(session, None, 1)["batch"]
    assert answer["masking"] == "dynamic" and "epoch 1" in answer["source"]


def test_draw_again_steps_through_the_static_copies(sessions):
    session = sessions["bert"]
    copies = dupe_factor(session.settings)
    answers = [explore(session, None, draw)["batch"] for draw in range(copies + 1)]
    assert [a["copy"] for a in answers] == [*range(copies), 0] and {a["copies"] for a in answers} == {copies}
    assert all(a["masking"] == "static" and f"copy {a['copy'] + 1} of {copies}" in a["source"] for a in answers)
    tokens = [[(t["shown"]["id"], t["fate"]) for t in a["tokens"]] for a in answers]
    assert tokens[0] == tokens[copies] and len({tuple(t) for t in tokens[:copies]}) > 1  # each copy its own cut and mask
    assert session.copy_rows().tolist() == session.data.train.examples.copy_starts.tolist()


def test_static_masks_redrawn_from_a_later_chunk_are_those_drawn_from_the_first(sessions, monkeypatch):
    """The explorer redraws a stored mask from the generator's state where its chunk began
    (Session.mask_states, which `prepare` fills): from there, draw_static_masks draws what it drew
    going through every chunk, and each copy's redrawn mask is the stored one."""
    from minibert.data import static_masks

    monkeypatch.setattr(static_masks, "EXAMPLES_PER_CHUNK", 4)
    train = sessions["bert"].data.train
    generator, states = torch.Generator().manual_seed(train.seed), []
    full = []
    for drawn in static_masks.draw_static_masks(train.examples, train.masking, seed=train.seed, generator=generator):
        full.append(drawn)
        states.append(generator.get_state())  # where the next chunk begins
    resumed = torch.Generator()
    resumed.set_state(states[1])
    again = list(static_masks.draw_static_masks(train.examples, train.masking, seed=train.seed, generator=resumed, first_chunk=2))
    assert len(full) > 3 and len(again) == len(full) - 2
    assert all((a == b).all() for x, y in zip(again, full[2:]) for a, b in zip(x, y))
    monkeypatch.undo()
    session = dataclasses.replace(sessions["bert"], mask_states={})
    prepare(session)  # what serve's thread finds ahead of the first Draw again: a state for each copy's chunk
    assert set(session.mask_states) == {int(row) // static_masks.EXAMPLES_PER_CHUNK for row in session.copy_rows()}
    assert all("older" not in explore(session, None, draw)["batch"]["source"] for draw in range(len(session.copy_rows())))


def test_each_static_copy_shows_the_corpus_s_first_example_masked_anew(sessions):
    """Every copy is cut from the corpus's first sentence on, and segment A is only ever cut short
    at its end (to one token, at a short target length): copy k's first example is copy 0's, perhaps
    longer or shorter, with its own mask."""
    session = sessions["bert"]
    answers = [explore(session, None, draw)["batch"] for draw in range(dupe_factor(session.settings))]
    first = [[t["original"]["id"] for t in a["tokens"] if t["segment"] == 0] for a in answers]
    fates = [[t["fate"] for t in a["tokens"]] for a in answers]
    for k in range(1, len(answers)):
        common = min(len(first[0]), len(first[k])) - 1  # segment A's [SEP] ends it
        assert first[k][:common] == first[0][:common] and common >= 2, k  # [CLS] and at least one token
        assert fates[k] != fates[0], k


def test_sentence_verdict_and_distillation_losses(sessions):
    sentence = explore(sessions["albert"], None, 0)["batch"]["sentence"]
    assert sentence["task"] == "sop" and sentence["label"] in (0, 1) and sentence["verdict"] in (0, 1)
    distil = explore(sessions["distilbert"], None, 0)["distil"]
    assert distil["teacher_layers"] == [0] and distil["temperature"] == 2.0
    assert all(distil["losses"][name] is not None for name in ("soft", "mlm", "cosine"))
    T = distil["temperature"]
    for position in distil["positions"]:  # the teacher's top 5 at T = 1, and the same tokens softened: p^(1/T), renormalized
        plain, soft = [t["plain"] for t in position["teacher"]], [t["soft"] for t in position["teacher"]]
        assert len(plain) == 5 and plain == sorted(plain, reverse=True) and sum(plain) <= 1 + 1e-6
        torch.testing.assert_close(torch.tensor(soft) / soft[0], (torch.tensor(plain) / plain[0]) ** (1 / T))
        assert soft[0] < plain[0]  # softening flattens
        student = [t["soft"] for t in position["student"]]
        assert student == sorted(student, reverse=True) and student[0] >= max(t["student"] for t in position["teacher"]) - 1e-7


def test_model_panel_counts_factorized_and_shared_parameters(sessions):
    session = sessions["albert"]
    model = overview(session)["model"]
    assert model["word_embeddings"] == model["V"] * model["E"] and model["E"] < model["H"]
    assert model["projection"] == model["E"] * model["H"] + model["H"]
    assert all(s["modules"] == 1 and s["applied"] == model["layers"] for s in model["sublayers"])
    assert model["encoder"] == sum(p.numel() for p in session.encoder.parameters())
    assert "def build_layers" in source("minibert.model:build_layers")["source"]
    with pytest.raises(ValueError, match="not one of the functions"):
        source("os:system")


def get(port: int, path: str, host: str | None = None) -> tuple[int, dict | str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    return response.status, json.loads(body) if response.getheader("Content-Type", "").startswith("application/json") else body


def post(port: int, path: str, body: str, content_type: str = "application/json", host: str | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", path, body=body.encode("utf-8"), headers={"Host": host or f"127.0.0.1:{port}", "Content-Type": content_type})
    response = connection.getresponse()
    answer = json.loads(response.read().decode())
    connection.close()
    return response.status, answer


def test_server_refuses_foreign_hosts_and_cuts_long_texts_and_keeps_answering(sessions):
    server = make_server(sessions["albert"])
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert get(port, "/", host=f"attacker.example:{port}")[0] == 403
        assert get(port, "/", host="127.0.0.1:1")[0] == 403
        assert post(port, "/api/explore", "{}", host=f"attacker.example:{port}")[0] == 403
        assert post(port, "/api/explore", "text=x", content_type="application/x-www-form-urlencoded")[0] == 415
        assert post(port, "/api/explore", "{not json")[0] == 400
        status, answer = post(port, "/api/explore", json.dumps({"text": "The big dog sees the cat. " * 400, "draw": 0}))
        assert status == 200 and len(answer["batch"]["tokens"]) == sessions["albert"].encoder.max_length
        assert "tokens; the model reads 32 with its special tokens" in answer["batch"]["notes"][0]
        assert get(port, "/api/explore?draw=x")[0] == 400
        status, answer = get(port, "/api/source?name=os:system")
        assert status == 400 and answer["error"].startswith("'os:system' is not one of")
        status, page = get(port, "/", host=f"localhost:{port}")
        assert status == 200 and 'id="panel-batch"' in page
        with ThreadPoolExecutor(2) as pool:  # concurrent questions, one model
            replies = list(pool.map(lambda draw: get(port, f"/api/explore?draw={draw}"), (0, 1)))
        assert [status for status, _ in replies] == [200, 200]
        assert replies[0][1]["batch"]["draw"] == 0 and replies[1][1]["batch"]["draw"] == 1
    finally:
        server.shutdown()
        server.server_close()


def test_out_writes_one_page_without_addresses(family_runs, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["explore", str(family_runs["electra"]), "--out", str(out), "--text", PLAIN_TEXT]) == 0
    assert list(tmp_path.iterdir()) == [out]
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"https?://", page) and "<link" not in page and "src=" not in page
    embedded = json.loads(re.search(r'<script id="answers" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert [e["text"] for e in embedded["examples"]] == [None, None, None, PLAIN_TEXT]
    assert embedded["texts"] == [{"text": None, "draws": 3}, {"text": PLAIN_TEXT, "draws": 1}]  # what the page lists
    assert embedded["examples"][0]["answer"]["electra"]["played"]


def test_bad_input_is_one_line(family_runs, capsys):
    assert main(["explore", str(family_runs["bert"]), "--text", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out FILE" in err


def test_ctrl_c_stops_the_server_in_one_line(family_runs):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "minibert", "explore", str(family_runs["roberta"]), "--no-browser"], cwd=REPO,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal starts it
    first = process.stdout.readline()
    port = int(re.search(r"127\.0\.0\.1:(\d+)/", first).group(1))
    assert get(port, "/api/overview")[0] == 200
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and out == "stopped\n" and err == "", err


# --- a question-answering model -----------------------------------------------------------------

QUESTION = "Who wrote the book?"
PASSAGE = "The book was written by Ann Smith in 1990s. It was a long time ago. And then some more words. Smith wrote the book."


@pytest.fixture(scope="module")
def qa_sessions(qa_models):
    return {name: open_session(folder) for name, folder in qa_models.items()}


@pytest.mark.parametrize("name", ["squad1", "squad2"])
def test_the_answer_is_predicts_and_each_windows_probabilities_sum_to_one(name, qa_sessions):
    """The chosen span is what spans.answered (python -m minibert predict) gives for the same
    question and passage; each window's start and end probabilities, over [CLS], the question
    and separators, and the passage tokens it holds, sum to 1 (a softmax over the window, not
    over the padding window_logits adds to a shorter window)."""
    from minibert.finetune.kinds.spans import answered
    from minibert.finetune.kinds.squad import QAExample, SquadData
    from minibert.finetune.kinds.windows import question_windows

    session = qa_sessions[name]
    answer = ask(session, QUESTION, PASSAGE)
    expected = answered(session.model, session.tokenizer, session.reading, SquadData("x", [QAExample("q", "", QUESTION, PASSAGE, [])]), 8)["q"]
    found = answer["answer"]
    assert (found["text"], found["start"]) == (expected.text, expected.start)
    assert found["probability"] == pytest.approx(expected.score)
    if found["start"] >= 0:
        assert PASSAGE[found["start"]:found["end"]] == found["text"]
    windows = answer["windows"]
    limits = answer["limits"]
    cut, _ = question_windows(session.tokenizer, [QAExample("q", "", QUESTION, PASSAGE, [])], limits["max_len"],
                              limits["max_query_len"], limits["doc_stride"], labelled=False)
    assert len(windows) == len(cut) > 1
    tokens = answer["passage"]["tokens"]
    for shown, window in zip(windows, cut):
        assert [(t["start"], t["end"]) for t in tokens[shown["first"]:shown["last"] + 1]] == [o for o in window.offsets if o]
        for side in ("start", "end"):
            assert shown["cls"][side] + shown["others"][side] + sum(shown[side]) == pytest.approx(1, abs=1e-5)
    assert all(w["overlap"] == limits["doc_stride"] for w in windows[1:])
    assert answer["nbest"][0]["text"] == found["text"] or name == "squad2"


def test_squad_2_shows_the_null_score_beside_the_best_span_and_the_decision(qa_sessions):
    answer = ask(qa_sessions["squad2"], QUESTION, PASSAGE)
    null, nbest = answer["null"], answer["nbest"]
    assert answer["limits"]["with_null"] and ask(qa_sessions["squad1"], QUESTION, PASSAGE)["null"] is None
    no_answer = next(e for e in nbest if e["start"] is None)
    best_span = next(e for e in nbest if e["start"] is not None)
    assert null["score"] == no_answer["score"] == pytest.approx(null["start_logit"] + null["end_logit"])
    assert null["odds"] == pytest.approx(null["score"] - best_span["score"])
    assert null["answered"] == (null["odds"] <= null["threshold"]) == (answer["answer"]["text"] != "")


def test_a_question_answering_page_shows_no_pretraining_panel_and_names_code_that_exists(qa_sessions):
    shown = overview(qa_sessions["squad1"])
    assert shown["task"] == "qa" and shown["run"] is None and shown["qa"]["limits"]["max_len"] == 32
    for part, names in ask(qa_sessions["squad1"], QUESTION, PASSAGE)["code"].items():
        for name in names:
            assert f"def {name.split(':')[1].split('.')[-1]}(" in source(name)["source"], name
    with pytest.raises(ValueError, match="question-answering model"):
        explore(qa_sessions["squad1"], PLAIN_TEXT, 0)
    with pytest.raises(ValueError, match="not a question-answering model"):
        ask(dataclasses.replace(qa_sessions["squad1"], reading=None), QUESTION, PASSAGE)


def test_the_answer_api_refuses_empty_and_long_texts_in_one_line(qa_sessions):
    server = make_server(qa_sessions["squad1"])
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from urllib.parse import urlencode
        for query, said in (({"passage": PASSAGE}, "the question is empty"), ({"question": QUESTION, "passage": " "}, "the passage is empty"),
                            ({"question": "who " * 65, "passage": PASSAGE}, "at most 64"),
                            ({"question": QUESTION, "passage": "ann " * 2001}, "at most 2,000")):
            status, answer = get(port, "/api/answer?" + urlencode(query))
            assert status == 400 and said in answer["error"] and "\n" not in answer["error"], answer
        status, answer = get(port, "/api/answer?" + urlencode({"question": QUESTION, "passage": PASSAGE}))
        assert status == 200 and answer["windows"]
        assert get(port, "/api/explore?text=x")[0] == 400
    finally:
        server.shutdown()
        server.server_close()


def test_out_writes_a_question_answering_page(qa_models, tmp_path, capsys):
    out = tmp_path / "page.html"
    assert main(["explore", str(qa_models["squad2"]), "--out", str(out), "--text", f"{QUESTION} [SEP] {PASSAGE}"]) == 0
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"https?://", page)
    embedded = json.loads(re.search(r'<script id="answers" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert [e["question"] for e in embedded["examples"]][1:] == [QUESTION] and embedded["examples"][1]["passage"] == PASSAGE
    assert embedded["examples"][0]["question"] == "Who wrote the book?"  # the fine-tune's dev file's first question
    assert main(["explore", str(qa_models["squad2"]), "--out", str(out), "--text", QUESTION]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "QUESTION [SEP] PASSAGE" in err


def test_ctrl_c_while_a_question_answering_model_loads_is_one_line(qa_models):
    """Half a second in, Python is still loading torch and the package (before any command code
    runs) or the model: either way one line, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "minibert", "explore", str(qa_models["squad1"]), "--no-browser"], cwd=REPO,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal starts it
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode in (0, 130) and out == "stopped\n" and err == "", err


# --- issue 64: typed texts on every run, spans, the code that ran, the teacher, the limit -------

SENTENCE = "The garbage collector frees memory."


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_a_plain_sentence_on_a_sentence_task_run_has_no_pair_to_judge(family, family_runs, sessions, tmp_path):
    """One segment: the objectives run without the sentence task, whose panel says there is no pair;
    a lower-case [mask] is the learner's mask; --out writes the page."""
    answer = explore(sessions[family], SENTENCE, 0)
    assert answer["batch"]["sentence"] == {"task": {"bert": "nsp", "albert": "sop"}[family], "pair": False}
    assert answer["mlm"]["positions"] and answer["batch"]["masking"] == "typed"
    assert "minibert.objectives.sentence:SentencePairTask.forward" not in answer["batch"]["code"]
    yours = explore(sessions[family], "The small [mask] eats the dog.", 0)
    assert yours["batch"]["masking"] == "yours" and len(yours["mlm"]["positions"]) == 1
    assert main(["explore", str(family_runs[family]), "--out", str(tmp_path / "p.html"), "--text", SENTENCE,
                 "--text", "the [mask] eats"]) == 0


def test_a_typed_pair_shows_the_heads_verdict_and_no_label(sessions):
    """The page cannot know whether a typed B followed A: it shows the head's verdict, whichever way round."""
    a, b = "The small cat eats the big dog near the river.", "The happy cow sees the quick horse in the field."
    for text in (f"{a} [SEP] {b}", f"{b} [sep] {a}"):
        said = explore(sessions["albert"], text, 1)["batch"]["sentence"]  # draw 1: a mask, so the objectives run
        assert said["pair"] and said["typed"] and "label" not in said and said["verdict"] in (0, 1)
        assert said["verdict_probability"] >= 0.5


def test_span_brackets_are_the_spans_drawn(sessions):
    """Each bracket is one span Masking.choose_spans drew (at most max_span whole words, adjacent or
    overlapping spans apart), together covering exactly the chosen tokens, draw after draw."""
    session = sessions["albert"]
    starts = session.tokenizer.word_starts
    for draw in range(6):
        for text in (None, "The small cat eats the big dog near the river, and the green hill sees the quick fox."):
            batch = explore(session, text, draw)["batch"]
            chosen = {t["position"] for t in batch["tokens"] if t["fate"]}
            covered = set()
            for span in batch["spans"]:
                positions = range(span["first"], span["last"] + 1)
                covered |= set(positions)
                words = sum(bool(starts[batch["tokens"][p]["original"]["id"]]) for p in positions[1:]) + 1
                assert words <= session.masking.max_span, (draw, span)
                assert all(span["number"] in batch["tokens"][p]["spans"] for p in positions)
            assert covered == chosen, draw
            lanes = {}
            for span in batch["spans"]:  # spans that share a lane do not overlap
                assert span["first"] > lanes.get(span["lane"], -1)
                lanes[span["lane"]] = span["last"]
    assert explore(sessions["bert"], None, 0)["batch"]["spans"] is None


def called_functions(monkeypatch) -> list[str]:
    """Wrap every function the panels may name where the code calls it from, and collect the calls."""
    import importlib

    from minibert.tools.explore import example, guesses, inside, step

    called = []
    for name in {n for panel in ("batch", "mlm", "electra", "distil", "attention", "inside") for n in CODE[panel]}:
        module_name, qualified = name.split(":")
        owner = importlib.import_module(module_name)
        *path, attribute = qualified.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner, attribute)

        def wrapper(*args, _name=name, _original=original, **kwargs):
            called.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(owner, attribute, wrapper)
        for user in (example, guesses, inside, step):  # where the explorer imported it by name
            if not path and hasattr(user, attribute):
                monkeypatch.setattr(user, attribute, wrapper)
    return called


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra"])
def test_each_panel_names_the_code_that_ran(family, sessions, monkeypatch):
    """Run text and a typed text: the functions the panels name are those that were called."""
    called = called_functions(monkeypatch)
    for text in (None, PLAIN_TEXT, "The cat eats. [SEP] The dog sleeps."):
        called.clear()
        answer = explore(sessions[family], text, 0)
        named = {name for panel in answer.values() if panel for name in panel["code"]}
        assert named == set(called), (text, named ^ set(called))
        batch = answer["batch"]["code"]
        assert ("minibert.data.static_masks:draw_static_masks" in batch) == (family == "bert" and text is None)
        assert ("minibert.data.masking:Masking.choose_spans" in batch) == (family == "albert")
        assert ("minibert.objectives.sentence:SentencePairTask.forward" in batch) == (
            family in ("bert", "albert") and (text is None or "[SEP]" in text))


def test_a_relative_teacher_is_found_from_another_folder(family_runs, tmp_path, monkeypatch):
    """run.json records --teacher checkpoints/bert as given: the explorer finds it from the folder the
    run was launched in, or (a run.json from before that was recorded) from the run folder's parents."""
    import shutil

    project = tmp_path / "project"
    shutil.copytree(family_runs["bert"], project / "checkpoints" / "bert")
    student = project / "checkpoints" / "distilbert"
    shutil.copytree(family_runs["distilbert"], student)
    run = json.loads((student / "run.json").read_text())
    monkeypatch.chdir(tmp_path)
    for launched in (str(project), None):
        record = {**run, "settings": {**run["settings"], "teacher": "checkpoints/bert"}, "launched_from": launched}
        (student / "run.json").write_text(json.dumps({k: v for k, v in record.items() if v is not None}))
        session = open_session(student)
        assert not session.notes and explore(session, PLAIN_TEXT, 0)["distil"] is not None


def test_training_records_the_folder_it_was_launched_from(family_runs):
    assert json.loads((family_runs["distilbert"] / "run.json").read_text())["launched_from"] == os.getcwd()


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_long_texts_and_emoji_are_cut_to_the_models_tokens_not_refused(family, sessions):
    session = sessions[family]
    limit = session.encoder.max_length
    long = explore(session, "Naming things is hard. " * 435, 0)["batch"]  # 10,005 characters
    assert len(long["tokens"]) == limit and "with its special tokens: the first" in long["notes"][0]
    emoji = explore(session, "😀🎉🚀" * 14, 0)["batch"]
    assert len(emoji["tokens"]) <= limit and all("\ufffd" not in t["original"]["text"] for t in emoji["tokens"])
    pair = explore(session, "a " * 100 + "[SEP] b b b", 0)["batch"]
    assert len(pair["tokens"]) == limit and "B to 3 of its 3" in pair["notes"][0]


def test_the_model_panel_names_the_embedding_parts_it_has():
    from minibert import Encoder, ModelConfig
    from minibert.tools.explore.overview import other_parts

    shape = dict(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    assert other_parts(Encoder(ModelConfig(**shape)).embeddings) == "positions, segments, LayerNorm"
    assert other_parts(Encoder(ModelConfig(**shape, position_encoding="rotary")).embeddings) == "segments, LayerNorm"


# --- issue 64: the connected view's numbers --------------------------------------------------------

PAIR = "The cat eats the fish near the river. [SEP] The dog sleeps in the sun all day long."


@pytest.mark.parametrize("family", ["bert", "albert", "electra", "distilbert"])
def test_the_loss_terms_add_up_to_what_the_objectives_compute(family, sessions):
    """The summed line's terms × weights add to its total, and the total is what the run's objectives
    give when called one by one on the same batch outside Pretrainer (its own encoder pass each, ELECTRA's
    sample drawn from the same seed); the masked-LM term is the mean of the per-position losses the
    MLM panel computes through probe.py, and its accuracy the share of right top guesses."""
    from minibert.objectives.sentence import SENTENCE_TASKS

    session = sessions[family]
    for text, draw in ((None, 0), (PAIR, 1), (PLAIN_TEXT, 1)):
        answer = explore(session, text, draw)
        loss = answer["batch"]["loss"]
        if loss is None:  # a typed text whose draw masked nothing
            continue
        assert sum(t["weight"] * t["value"] for t in loss["terms"]) == pytest.approx(loss["total"], rel=1e-5)
        if text is None:
            continue
        example = typed_example(session, text, draw)
        objectives = {name: o for name, o in session.pretrainer.objectives.items()
                      if name not in SENTENCE_TASKS or "sentence_label" in example.batch}
        assert [t["objective"] for t in loss["terms"]] == [n for n in objectives for _ in LOSS_TERMS[n]]
        batch, model = example.batch, session.pretrainer.model
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # ELECTRA samples with the example's seed
            torch.manual_seed(example.seed)
            output = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            total = sum(float(o(model, batch, output)[0]) for o in objectives.values())
        assert loss["total"] == pytest.approx(total, rel=1e-4)
        if answer["mlm"] is not None:
            mlm = answer["mlm"]["positions"]
            term = next(t for t in loss["terms"] if t["metric"] == "mlm_loss")
            assert term["value"] == pytest.approx(sum(p["loss"] for p in mlm) / len(mlm), rel=1e-4)
            assert answer["mlm"]["accuracy"] == pytest.approx(sum(p["right"] for p in mlm) / len(mlm)) == pytest.approx(loss["mlm_accuracy"])


def test_electras_tally_and_generator_are_the_objectives(sessions):
    """The summary line's counts agree with the objective's own recall and precision on the same batch
    and sample; the generator's probability for its sample is the one its top 5 gives that token."""
    session = sessions["electra"]
    for text, draw in ((None, 0), (PAIR, 1)):
        answer = explore(session, text, draw)
        electra, tally = answer["electra"], answer["electra"]["tally"]
        if text is not None:
            example, model = typed_example(session, text, draw), session.pretrainer.model
            batch = example.batch
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(example.seed)
                metrics = session.pretrainer.objectives["rtd"](model, batch)[1]
            assert tally["caught"] / max(1, tally["replaced"]) == pytest.approx(float(metrics["rtd_recall"]))
            called = tally["caught"] + tally["false_alarms"]
            assert tally["caught"] / max(1, called) == pytest.approx(float(metrics["rtd_precision"]))
        real = [t for t in electra["tokens"] if "replaced" in t]
        assert tally["replaced"] + tally["originals"] == len(real)
        assert tally["replaced"] == sum(t["replaced"] for t in real)
        sampled = [t for t in real if t["sampled"]]
        assert sampled and all(len(t["generator"]["top"]) == 5 for t in sampled)
        for t in sampled:
            top = [c["prob"] for c in t["generator"]["top"]]
            assert top == sorted(top, reverse=True) and sum(top) <= 1 + 1e-6 and 0 < t["generator"]["p_sample"] <= top[0] + 1e-7
            if t["shown"]["id"] in [c["id"] for c in t["generator"]["top"]]:
                assert t["generator"]["p_sample"] == pytest.approx(next(c["prob"] for c in t["generator"]["top"] if c["id"] == t["shown"]["id"]))


# --- the explorer reads what the chapter's functions return, never their local variables -----------

def with_locals_renamed(function):
    """`function` compiled again from its source with every local variable renamed (its arguments
    kept), at the same file and lines, in its module's namespace."""
    import ast
    import inspect
    import textwrap

    lines, first = inspect.getsourcelines(function)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    definition = tree.body[0]
    arguments = {a.arg for a in ast.walk(definition.args) if isinstance(a, ast.arg)}
    stored = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} - arguments
    for node in ast.walk(definition):
        if isinstance(node, ast.Name) and node.id in stored:
            node.id += "_renamed"
    namespace = dict(function.__globals__)
    exec(compile(tree, inspect.getsourcefile(function), "exec"), namespace)
    return namespace[function.__name__]


def chapter_functions():
    """(owner, name, function) of every plain function and method defined in the modules whose
    functions the pretraining panels name (no decorator, no closure): the code the explorer shows."""
    import importlib
    import inspect

    modules = {name.split(":")[0] for panel in ("batch", "mlm", "electra", "distil", "attention", "inside") for name in CODE[panel]}
    for module_name in sorted(modules):
        module = importlib.import_module(module_name)
        owners = [module] + [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module_name]
        for owner in owners:
            for name, function in list(vars(owner).items()):
                if (inspect.isfunction(function) and function.__code__.co_filename == module.__file__ and not function.__closure__
                        and not inspect.getsource(function).lstrip().startswith("@")):
                    yield owner, name, function


def without_code(answer):
    """An answer without the lists of the code that ran (which name functions by their code objects)."""
    if isinstance(answer, dict):
        return {k: without_code(v) for k, v in answer.items() if k != "code"}
    return [without_code(v) for v in answer] if isinstance(answer, list) else answer


@pytest.mark.parametrize("family", ["bert", "albert", "electra"])
def test_renaming_the_chapters_local_variables_changes_no_answer(family, sessions, monkeypatch):
    """The page shows what the project's functions return (and the documented hooks), never their
    local variables: with every local of every function in the modules the panels name renamed,
    each answer is what it was (ALBERT's spans included)."""
    session = sessions[family]
    texts = ((None, 0), (None, 1), ("The cat eats the fish near the river. [SEP] The dog sleeps in the sun.", 1))
    before = [without_code(explore(session, text, draw)) for text, draw in texts]
    renamed = 0
    for owner, name, function in chapter_functions():
        monkeypatch.setattr(owner, name, with_locals_renamed(function))
        renamed += 1
    assert renamed > 50
    after = [without_code(explore(session, text, draw)) for text, draw in texts]
    assert after == before


# --- masks that follow the text; the sentence task, ELECTRA and the loss on what a learner types ---

THREE_TEXTS = ("The quick fox jumps over the lazy dog near the river bank today.",
               "A small bird sings in the green garden every single morning now.",
               "My old car needs new tires before the long winter trip north.")


@pytest.mark.parametrize("family", ["bert", "electra", "distilbert"])
def test_masks_follow_the_text_and_the_draw(family, sessions):
    """Three texts at one draw get three masks; the same text and draw, the same mask and answer."""
    session = sessions[family]
    for draw in (0, 1):
        masked = [tuple(t["position"] for t in explore(session, text, draw)["batch"]["tokens"] if t["fate"]) for text in THREE_TEXTS]
        assert len(set(masked)) == 3, (draw, masked)
    assert without_code(explore(session, THREE_TEXTS[0], 1)) == without_code(explore(session, THREE_TEXTS[0], 1))


def test_electras_samples_follow_the_text(sessions):
    """The generator's samples are drawn with a seed from the text and the draw: unrelated sentences
    at draw 0 do not get one sample in the first masked place."""
    texts = [f"The {a} {b} sees the {c} near the {d}." for a, b, c, d in
             zip("red big old new sad odd shy wet".split(), "cat dog cow fox pig hen owl ram".split(),
                 "hill road barn lake tree gate wall pond".split(), "farm town sea wood park mill dam bay".split())]
    first = []
    for text in texts:
        tokens = explore(sessions["electra"], text, 0)["electra"]["tokens"]
        first.append(next(t["shown"]["id"] for t in tokens if t.get("sampled")))
    assert len(set(first)) >= 4, first


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_a_pair_with_your_own_masks_gets_the_heads_verdict(family, sessions):
    """The sentence task judges a pair whether or not its tokens are masked: with your [MASK]s its
    verdict is the head's own (the objective's logits on the pair), and no loss is summed."""
    from minibert.objectives.sentence import SENTENCE_TASKS

    session = sessions[family]
    text = "The cat sat on the [MASK]. [SEP] It was [mask] and warm."
    batch = explore(session, text, 0)["batch"]
    task = next(name for name in SENTENCE_TASKS if name in session.pretrainer.objectives)
    example = typed_example(session, text, 0)
    model = session.pretrainer.model
    with torch.no_grad():
        output = model.encoder(example.batch["input_ids"], example.batch["attention_mask"], example.batch["token_type_ids"])
        logits = session.pretrainer.objectives[task].head(output.sentence_vector())[0]
    assert batch["masking"] == "yours" and batch["loss"] is None
    assert batch["sentence"]["verdict"] == int(logits.argmax())
    assert batch["sentence"]["verdict_probability"] == pytest.approx(float(logits.softmax(-1).max()), rel=1e-5)


def test_electras_generator_fills_your_own_masks(sessions, family_runs):
    """On your [MASK]s ELECTRA's generator samples a token into each, and the discriminator judges the
    filled text (detect's probabilities on it); with nothing known of what was hidden, no tally or loss."""
    session = sessions["electra"]
    answer = explore(session, "The small [MASK] eats the [mask] dog.", 0)["electra"]
    assert answer["played"] and answer["yours"] and "tally" not in answer and "losses" not in answer
    sampled = [t for t in answer["tokens"] if t["sampled"]]
    assert len(sampled) == 2 and all(t["shown"]["id"] != session.tokenizer.mask_id and len(t["generator"]["top"]) == 5 for t in sampled)
    assert all("replaced" not in t for t in answer["tokens"])
    filled = torch.tensor([[t["shown"]["id"] for t in answer["tokens"]]])
    expected = session.model(filled, torch.ones_like(filled), torch.zeros_like(filled)).logits.sigmoid()[0]
    torch.testing.assert_close(torch.tensor([t["p_replaced"] for t in answer["tokens"]]), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_a_typed_pairs_loss_is_given_under_both_labels(family, sessions):
    """The page cannot know a typed pair's label: the sentence term and the total come under both,
    each what the run's pretrainer returns for the pair with that label."""
    session = sessions[family]
    loss = explore(session, PAIR, 1)["batch"]["loss"]
    example = typed_example(session, PAIR, 1)
    totals = []
    for label in (0, 1):
        with torch.no_grad():
            totals.append(float(session.pretrainer({**example.batch, "sentence_label": torch.tensor([label])})[0]))
    term = next(t for t in loss["terms"] if t["objective"] in ("nsp", "sop"))
    assert (loss["total"], loss["other_label_total"]) == pytest.approx(totals, rel=1e-5)
    assert loss["other_label_total"] - loss["total"] == pytest.approx(term["weight"] * (term["other_label_value"] - term["value"]), rel=1e-4)
    assert "other_label_total" not in explore(session, None, 0)["batch"]["loss"]  # the run's own pair has its label


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_typed_special_tokens_are_read_alike_and_named(family, sessions):
    """[CLS], [PAD], [UNK] and a second [SEP], typed in any case, are each read as that special token
    (as a tokenizer reads its special tokens' spellings), and the answer names them; masking never
    chooses one; the draw's count of chosen tokens is of the others."""
    session = sessions[family]
    tokenizer = session.tokenizer
    batch = explore(session, "The [cls] cat [PAD] eats [UNK] fish. [SEP] The dog [SEP] sleeps.", 0)["batch"]
    ids = [t["original"]["id"] for t in batch["tokens"]]
    for special in (tokenizer.cls_id, tokenizer.pad_id, tokenizer.unk_id):
        assert ids.count(special) == 1 + (special == tokenizer.cls_id), (special, ids)
    assert ids.count(tokenizer.sep_id) == 3 and batch["specials"] == ["[CLS]", "[PAD]", "[UNK]", "[SEP]"]
    special = [t for t in batch["tokens"] if t["special"]]
    assert not any(t["fate"] for t in special)
    assert batch["chosen"] == sum(bool(t["fate"]) for t in batch["tokens"]) and batch["maskable"] == len(batch["tokens"]) - len(special)


def test_distilberts_losses_add_to_the_total_and_the_student_has_one_segment_type(sessions):
    distil = explore(sessions["distilbert"], PLAIN_TEXT, 1)
    losses = distil["distil"]["losses"]
    assert losses["total"] == pytest.approx(sum(losses[k] * losses[k + "_weight"] for k in ("soft", "mlm", "cosine")), rel=1e-5)
    assert distil["distil"]["vocabulary"] == sessions["distilbert"].tokenizer.vocab_size
    assert distil["batch"]["segment_types"] == 0 and {t["segment"] for t in explore(sessions["distilbert"], PAIR, 0)["batch"]["tokens"]} == {0}


# --- one token through one layer, with the model's own numbers -------------------------------------

def hidden_states(session, ids: list[int], segments: list[int]) -> tuple:
    """The encoder's own layer outputs for one sequence, by a call of its own."""
    ids, segments = torch.tensor([ids]), torch.tensor([segments])
    with torch.no_grad():
        return session.encoder(ids, torch.ones_like(ids), segments, output_hidden_states=True).hidden_states


def read_ids(session, answer) -> list[int]:
    """The ids the kept model read: ELECTRA's discriminator the generator's samples, the others the masked text."""
    if answer["electra"] is not None:
        return [t.get("shown", t["original"])["id"] for t in answer["electra"]["tokens"]]
    return [t["shown"]["id"] for t in answer["batch"]["tokens"]]


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_inside_a_layer_ends_at_the_layers_hidden_state(family, sessions):
    """Followed through any layer at any token, the panel starts at the layer's input and ends at its
    output, each the encoder's own hidden state (computed here by a call of its own), to 1e-5."""
    session = sessions[family]
    answer = explore(session, PAIR, 1)
    ids, segments = read_ids(session, answer), [t["segment"] for t in answer["batch"]["tokens"]]
    states = hidden_states(session, ids, segments)
    assert answer["inside"]["position"] == next(t["position"] for t in answer["batch"]["tokens"] if t["fate"])
    for layer in range(session.encoder.config.num_layers):
        for position in (0, answer["inside"]["position"], len(ids) - 1):
            inside = explore_inside(session, PAIR, 1, position, layer)
            assert inside["tokens"] == [session.tokenizer.piece(i) for i in ids]
            torch.testing.assert_close(torch.tensor(inside["output"]), states[layer + 1][0, position], rtol=0, atol=1e-5)
            torch.testing.assert_close(torch.tensor(inside["stages"][0]["values"]), states[layer][0, position], rtol=0, atol=1e-5)


def stages_of(inside: dict) -> dict:
    return {s["id"]: s for s in inside["stages"]}


def test_inside_a_layers_stages_chain_as_the_sublayers_compute(sessions):
    """Each stage is what the one before it gives through the module the code line names (computed
    here with torch's functions and the layer's weights): the probabilities are the softmax of the
    scores, each head's scores its query against the keys, the heads side by side go through `out`,
    the residual adds, the LayerNorm normalizes, the feed-forward goes up, through its activation, down."""
    import torch.nn.functional as F

    session = sessions["albert"]
    inside = explore_inside(session, PAIR, 1, 3, 1)
    attention, feed_forward = session.encoder.layer(1)
    s = {k: torch.tensor(v["values"]) for k, v in stages_of(inside).items() if "values" in v}
    heads = stages_of(inside)["attention"]["heads"]
    for head in heads:
        torch.testing.assert_close(torch.tensor(head["scores"]).softmax(-1), torch.tensor(head["probs"]), rtol=0, atol=2e-6)
    assert stages_of(inside)["attention"]["rotary"] and inside["shared"] == {"attention": True, "feed_forward": True}
    own = next(h for h in heads)  # a token's own key: its score is its query · its key / √d
    assert own["scores"][3] == pytest.approx(sum(q * k for q, k in zip(own["q"], own["k"])) / len(own["q"]) ** 0.5, abs=1e-4)
    torch.testing.assert_close(torch.cat([torch.tensor(h["mix"]) for h in heads]), s["heads"], rtol=0, atol=1e-6)
    with torch.no_grad():
        torch.testing.assert_close(attention.fn.out(s["heads"]), s["projected"], rtol=0, atol=1e-5)
        torch.testing.assert_close(s["input"] + s["projected"], s["residual"], rtol=0, atol=1e-5)
        torch.testing.assert_close(F.layer_norm(s["residual"], s["residual"].shape, attention.norm.weight, attention.norm.bias,
                                                attention.norm.eps), s["norm_after"], rtol=0, atol=1e-5)
        torch.testing.assert_close(feed_forward.fn.up(s["norm_after"]), s["up"], rtol=0, atol=1e-5)
        torch.testing.assert_close(F.gelu(s["up"], approximate="tanh"), s["act"], rtol=0, atol=1e-5)
        torch.testing.assert_close(feed_forward.fn.down(s["act"]), s["down"], rtol=0, atol=1e-5)
        torch.testing.assert_close(s["norm_after"] + s["down"], s["residual_ffn"], rtol=0, atol=1e-5)
    layer0 = explore_inside(session, PAIR, 1, 3, 0)  # ALBERT's E -> H projection, before the first layer
    projection = layer0["projection"]
    assert len(projection["embedding"]) == session.encoder.config.embedding_size and projection["values"] == layer0["stages"][0]["values"]


def test_inside_a_pre_ln_layer_normalizes_first(family_runs, sessions, tmp_path):
    """Under pre-LN each sublayer's LayerNorm comes before its branch and the residual ends it, in the
    panel as in the model: the output is still the layer's hidden state."""
    from minibert import MaskedLM, save_pretrained

    bert = sessions["bert"]
    torch.manual_seed(0)
    folder = save_pretrained(MaskedLM(bert.encoder.config.replace(norm="pre", initializer_range=0.5)), tmp_path / "pre",
                             tokenizer=bert.tokenizer)
    session = open_session(folder)
    answer = explore(session, PLAIN_TEXT, 0, position=2, layer=1)
    assert [s["id"] for s in answer["inside"]["stages"]] == ["input", "norm_before", "attention", "heads", "projected", "residual",
                                                            "norm_before_ffn", "up", "act", "down", "residual_ffn"]
    states = hidden_states(session, read_ids(session, answer), [t["segment"] for t in answer["batch"]["tokens"]])
    torch.testing.assert_close(torch.tensor(answer["inside"]["output"]), states[2][0, 2], rtol=0, atol=1e-5)


def test_each_stage_names_the_line_that_computes_it(sessions):
    """Every stage's code line is a line of the file it names, holding the code the stage says."""
    from minibert.tools.explore.code_ran import source

    inside = explore(sessions["albert"], None, 0)["inside"]
    lines = [s["code"] for s in inside["stages"] if "values" in s] + list(stages_of(inside)["attention"]["code"].values())
    assert len(lines) >= 14
    for line in lines:
        assert line["found"], line  # STAGES names a piece of the line: it must still be in the code
        found = source(line["name"])
        assert found["source"].splitlines()[line["line"] - found["line"]].strip() == line["text"]
        assert (REPO / line["file"]).read_text().splitlines()[line["line"] - 1].strip() == line["text"]
    assert set(inside["code"]) <= set(CODE["inside"]) and "minibert.attention:attention_probs" in inside["code"]
    with pytest.raises(ValueError, match="layer must be a whole number from 0 to 1"):
        explore_inside(sessions["albert"], None, 0, 1, 2)
    with pytest.raises(ValueError, match="position must be a whole number"):
        explore_inside(sessions["albert"], None, 0, 999, 0)
