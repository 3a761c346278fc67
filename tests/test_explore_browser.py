"""`python -m minibert explore` in a real browser (headless Chromium, driven by selenium): the page a
learner sees shows the project's own numbers, answers its buttons, reaches every panel by keyboard,
and logs no error, served or written as one file.

Without Chromium, its driver or selenium these tests skip with one line; with
MINIBERT_BROWSER_TESTS=required (.ci/run sets it) they fail instead, so CI cannot pass untested.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
import torch

from minibert import detect_replaced, fill_mask
from minibert.tools.explore import make_server, open_session, write_page
from minibert.tools.explore.answers import explore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from explore_page import CHROMEDRIVER, CHROMIUM, headless_chromium, wait_until_answered  # noqa: E402

QA_PANELS = ("panel-qa-answer", "panel-qa-windows", "panel-qa-probs", "panel-qa-nbest")
PANELS = ("panel-batch", "panel-step", "panel-mlm", "panel-electra", "panel-distil", "panel-inside", "panel-attention", "panel-model", "panel-run")
MASKED_TEXT = "The small [MASK] eats the dog."
PLAIN_TEXT = "The small cat eats the dog."


def unavailable(reason: str):
    """Skip, or fail where the browser tests are required (CI)."""
    if os.environ.get("MINIBERT_BROWSER_TESTS") == "required":
        pytest.fail(f"MINIBERT_BROWSER_TESTS=required, but {reason}")
    pytest.skip(reason)


def test_a_missing_browser_fails_where_required_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("MINIBERT_BROWSER_TESTS", "required")
    with pytest.raises(pytest.fail.Exception, match="required, but no chromium"):
        unavailable("no chromium")
    monkeypatch.delenv("MINIBERT_BROWSER_TESTS")
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        unavailable("no chromium")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module, its console kept (goog:loggingPrefs) for the error checks."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        unavailable("selenium is not installed (pip install -e '.[dev]')")
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        unavailable(f"no {' or '.join(missing)} (apt-get install chromium chromium-driver)")
    driver = headless_chromium()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def sessions(browser, family_runs):
    return {family: open_session(folder) for family, folder in family_runs.items()}


@pytest.fixture(scope="module")
def pages(sessions):
    """family -> the address of its own explorer server, serving in a thread."""
    servers = {family: make_server(session) for family, session in sessions.items()}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {family: f"http://127.0.0.1:{server.server_address[1]}/" for family, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait_until_answered(driver)


def act(driver, button: str, text: str | None = None) -> None:
    """Type `text` (if any) and press a button, then wait for the answer it asks for."""
    driver.execute_script("window.exploreReady = false")
    if text is not None:
        box = driver.find_element("id", "text")
        box.clear()
        box.send_keys(text)
    driver.find_element("id", button).click()
    wait_until_answered(driver)


def console_errors(driver) -> list[str]:
    """What the page logged at error level since the last call (reading the log empties it)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def attribute(driver, selector: str, name: str) -> list[str]:
    return [e.get_attribute(name) for e in driver.find_elements("css selector", selector)]


def panel_texts(driver) -> dict[str, str]:
    return {panel: driver.find_element("id", panel).text for panel in PANELS}


def shown_panels(driver) -> list[str]:
    return [panel for panel in PANELS if driver.find_element("id", panel).is_displayed()]


# the panels a run has: ELECTRA's discriminator has no masked-LM head, only DistilBERT a teacher
NOT_SHOWN = {"electra": {"panel-mlm", "panel-distil"}, "distilbert": {"panel-electra"}}


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_page_loads_with_every_panel_and_no_console_error(family, browser, pages):
    console_errors(browser)
    open_page(browser, pages[family])
    texts = panel_texts(browser)
    expected = [p for p in PANELS if p not in NOT_SHOWN.get(family, {"panel-electra", "panel-distil"})]
    assert shown_panels(browser) == expected
    assert [a.get_attribute("hash") for a in browser.find_elements("css selector", "#skip a") if a.is_displayed()] == [f"#{p}" for p in expected]
    assert all(texts[panel].count("\n") >= 1 for panel in expected), texts  # a heading and a body, each panel
    # the curves read: named in words, ticked axes, the baselines labelled, drawn to the run's own last step
    figures = browser.find_elements("css selector", "#panel-run figure[data-metric]")
    accuracy = next(f for f in figures if f.get_attribute("data-metric") == "eval_mlm_accuracy")
    assert accuracy.find_element("css selector", "text[font-weight]").text == "held-out MLM accuracy (%)"
    assert {t.text.rsplit(" ", 1)[0] for t in accuracy.find_elements("css selector", "text[data-baseline]")} == {
        "always the most frequent token", "neighbour counts"}
    for figure in figures:
        last = max(step for step, _ in json.loads(figure.get_attribute("data-points")))
        x_ticks = [float(t.text.replace(",", "")) for t in figure.find_elements("css selector", "text[data-tick=x]")]
        assert len(figure.find_elements("css selector", "text[data-tick=y]")) >= 2 and x_ticks and max(x_ticks) <= last
    assert not any(browser.find_element("id", panel).is_displayed() for panel in QA_PANELS)
    assert "python train.py --variant " + family in browser.find_element("id", "loaded").text
    assert console_errors(browser) == []


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "distilbert"])
def test_typed_mask_shows_fill_masks_top_k(family, browser, pages, family_runs):
    open_page(browser, pages[family])
    act(browser, "run", MASKED_TEXT)
    expected = fill_mask(family_runs[family], MASKED_TEXT, top_k=5)[0]
    assert [int(i) for i in attribute(browser, "#panel-mlm li[data-token]", "data-token")] == [c.token_id for c in expected]
    shown = [float(p) for p in attribute(browser, "#panel-mlm li[data-prob]", "data-prob")]
    torch.testing.assert_close(torch.tensor(shown), torch.tensor([c.score for c in expected]))
    assert console_errors(browser) == []


def test_electra_probabilities_are_detects(browser, pages, family_runs):
    open_page(browser, pages["electra"])
    act(browser, "run", PLAIN_TEXT)
    shown = [float(p) for p in attribute(browser, "#panel-electra td[data-prob-written]", "data-prob-written")]
    expected = [j.probability for j in detect_replaced(family_runs["electra"], PLAIN_TEXT)]
    torch.testing.assert_close(torch.tensor(shown[1:-1]), torch.tensor(expected))  # detect leaves [CLS] and [SEP] out


def test_draw_again_draws_a_new_mask_under_dynamic_masking(browser, pages):
    open_page(browser, pages["roberta"])
    fates = [attribute(browser, "#panel-batch .tok", "data-fate")]
    act(browser, "draw-again")
    fates.append(attribute(browser, "#panel-batch .tok", "data-fate"))
    line = browser.find_element("id", "masking-line")
    assert line.get_attribute("data-masking") == "dynamic" and line.get_attribute("data-draw") == "1"
    assert fates[0] != fates[1]


def test_draw_again_steps_through_the_static_copies(browser, pages):
    open_page(browser, pages["bert"])
    copies = [browser.find_element("id", "masking-line").get_attribute("data-copy")]
    for _ in range(2):
        act(browser, "draw-again")
        copies.append(browser.find_element("id", "masking-line").get_attribute("data-copy"))
    assert copies == ["0", "1", "2"]
    assert browser.find_element("id", "masking-line").get_attribute("data-masking") == "static"


def test_tab_reaches_every_panel(browser, pages):
    """Pressing Tab from the top of the page, focus lands on each panel or on something inside it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_page(browser, pages["albert"])
    browser.execute_script("document.activeElement.blur()")
    panels, reached = set(shown_panels(browser)), set()
    for _ in range(400):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        panel = browser.execute_script("const s = document.activeElement.closest('section'); return s && s.id")
        reached.add(panel)
        if reached >= panels:
            break
    assert panels <= reached, panels - reached


def test_out_page_renders_the_same_panels_from_a_file(browser, pages, sessions, tmp_path):
    """--out's one file, opened from file:// with no server, draws what the served page draws."""
    open_page(browser, pages["electra"])
    served = panel_texts(browser)
    out = write_page(sessions["electra"], tmp_path / "page.html", [PLAIN_TEXT])
    console_errors(browser)
    open_page(browser, Path(out).resolve().as_uri())
    held = browser.find_element("id", "held").text  # what the file holds, which the server's page need not say
    assert held == "This page holds draws 0–2; the server draws any."
    assert {k: v.replace(held + "\n", "") for k, v in panel_texts(browser).items()} == served
    act(browser, "draw-again")  # the file holds a few draws of the run's text
    assert browser.find_element("id", "masking-line").get_attribute("data-draw") == "1"
    assert console_errors(browser) == []


# --- a question-answering model -----------------------------------------------------------------

QUESTION = "Who wrote the book?"
PASSAGE = "The book was written by Ann Smith in 1990s. It was a long time ago. And then some more words. Smith wrote the book."


@pytest.fixture(scope="module")
def qa_page(browser, qa_models):
    """The explorer on a tiny model fine-tuned on SQuAD 2.0: (its session, its address)."""
    session = open_session(qa_models["squad2"])
    server = make_server(session)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield session, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def ask_in_page(driver, question: str, passage: str | None = None) -> None:
    driver.execute_script("window.exploreReady = false")
    for box, text in (("question", question), ("passage", passage)):
        if text is not None:
            driver.find_element("id", box).clear()
            driver.find_element("id", box).send_keys(text)
    driver.find_element("id", "ask").click()


def test_a_typed_question_shows_its_windows_its_answer_and_the_n_best_list(browser, qa_page, tmp_path):
    """Typed as a learner types them, the question and passage are answered as predict answers
    them: the answer highlighted in the passage, a probability strip per window, the n-best list,
    the null score; the pretraining panels are not there. The page written with --out shows the same."""
    from minibert.finetune.kinds.spans import answered
    from minibert.finetune.kinds.squad import QAExample, SquadData

    session, url = qa_page
    console_errors(browser)
    open_page(browser, url)
    assert not any(browser.find_element("id", panel).is_displayed() for panel in PANELS if panel != "panel-model")
    assert "at most 64 tokens" in browser.find_element("id", "question-limit").text
    ask_in_page(browser, QUESTION, PASSAGE)
    wait_until_answered(browser)
    expected = answered(session.model, session.tokenizer, session.reading, SquadData("x", [QAExample("q", "", QUESTION, PASSAGE, [])]), 8)["q"]
    said = browser.find_element("id", "qa-said")
    assert said.get_attribute("data-answer") == expected.text and int(said.get_attribute("data-start")) == expected.start
    marks = browser.find_elements("id", "answer-span")
    assert [m.text for m in marks] == ([expected.text] if expected.text else [])
    rows = attribute(browser, "#nbest tr[data-probability]", "data-text")
    assert len(rows) >= 2 and "" in rows  # the spans and "no answer"
    assert len(browser.find_elements("css selector", "#panel-qa-probs .strip")) == len(browser.find_elements(
        "css selector", "#panel-qa-windows tr[data-window]")) > 1
    assert browser.find_element("id", "qa-null").get_attribute("data-answered") == str(bool(expected.text)).lower()
    served = {panel: browser.find_element("id", panel).text for panel in QA_PANELS}
    assert console_errors(browser) == []
    out = write_page(session, tmp_path / "page.html", [f"{QUESTION} [SEP] {PASSAGE}"])
    open_page(browser, Path(out).resolve().as_uri())
    ask_in_page(browser, QUESTION, PASSAGE)
    wait_until_answered(browser)
    assert {panel: browser.find_element("id", panel).text for panel in QA_PANELS} == served
    assert console_errors(browser) == []


def test_an_empty_question_is_one_line_and_no_answer_is_left_showing(browser, qa_page):
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(browser, qa_page[1])
    assert browser.find_elements("css selector", "#nbest tr[data-probability]")
    ask_in_page(browser, "   ")
    message = browser.find_element("id", "message")
    WebDriverWait(browser, 10).until(lambda d: "error" in message.get_attribute("class"))
    assert message.text == "the question is empty: type a question about the passage"
    assert not browser.find_elements("css selector", "#nbest, #answer-span, #panel-qa-probs .strip")
    assert "No answer for the question and passage as they stand" in browser.find_element("id", "panel-qa-answer").text


# --- issue 64: what a new learner types -----------------------------------------------------------

LEARNER_TEXTS = {"plain": "The garbage collector frees memory.", "pair": "The cat eats. [SEP] The dog sleeps.",
                 "mask": "The small [mask] eats the dog.", "long": "Naming things is hard. " * 435, "emoji": "😀🎉🚀🐍" * 10}


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_what_a_learner_types_is_answered_on_every_run(family, browser, pages, sessions):
    """A plain sentence, a pair, a lower-case [mask], 10,000 characters and a line of emoji: each
    answered (a long one cut, with a note), the limit in tokens stated beside the box."""
    open_page(browser, pages[family])
    limit = sessions[family].encoder.max_length
    assert f"at most {limit} tokens" in browser.find_element("id", "text-limit").text
    for kind, text in LEARNER_TEXTS.items():
        if kind == "long":  # typing 10,000 characters key by key takes long: paste them
            browser.execute_script("document.getElementById('text').value = arguments[0]", text)
            act(browser, "run")
        else:
            act(browser, "run", text)
        assert "your text" in browser.find_element("id", "panel-batch").text, kind
        chips = browser.find_elements("css selector", "#panel-batch .tok")
        assert len(chips) <= limit and "\ufffd" not in browser.find_element("id", "panel-batch").text, kind
        notes = browser.find_elements("css selector", "#panel-batch [data-note=cut]")
        if kind != "emoji":  # a line of emoji is cut or not as its bytes fall back to byte pieces
            assert bool(notes) == (kind == "long"), kind
        if kind == "mask":
            assert browser.find_element("id", "masking-line").get_attribute("data-masking") == "yours"
            assert not browser.find_element("id", "draw-again").is_enabled()
        sentence = browser.find_elements("id", "sentence")
        assert bool(sentence) == (family in ("bert", "albert")), kind
        if sentence and kind == "plain":
            assert sentence[0].get_attribute("data-pair") == "false" and "no pair to judge" in sentence[0].text
        if sentence and kind == "pair":
            assert "you typed this pair" in sentence[0].text or "no verdict" in sentence[0].text
    assert console_errors(browser) == []


def test_span_brackets_in_the_page_are_the_spans_drawn(browser, pages, sessions):
    open_page(browser, pages["albert"])
    for draw in range(3):
        answer = explore(sessions["albert"], None, draw)["batch"]
        drawn = {s["number"]: list(range(s["first"], s["last"] + 1)) for s in answer["spans"]}
        shown = {}
        for mark in browser.find_elements("css selector", "#panel-batch i.br"):
            position = int(mark.find_element("xpath", "ancestor::span[@data-position]").get_attribute("data-position"))
            shown.setdefault(int(mark.get_attribute("data-span")), []).append(position)
        assert shown == drawn, draw
        act(browser, "draw-again")


def test_an_error_clears_the_panels(browser, pages):
    """An answer that fails leaves no earlier answer looking current."""
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(browser, pages["bert"])
    assert browser.find_elements("css selector", "#panel-mlm li[data-token]")
    browser.execute_script("state.draw = 2e9")  # Draw again then asks for a draw the server refuses
    browser.find_element("id", "draw-again").click()
    message = browser.find_element("id", "message")
    WebDriverWait(browser, 10).until(lambda d: "error" in message.get_attribute("class"))
    assert message.text.startswith("draw must be a whole number") and "\n" not in message.text
    assert not browser.find_elements("css selector", "#panel-mlm li[data-token], #panel-batch .tok")
    assert "No answer for the text as it stands" in browser.find_element("id", "panel-batch").text


# --- issue 64: one connected view ------------------------------------------------------------------

LINKED = {"distilbert": ("#strip .tok", "#panel-mlm tr", "#panel-distil .card", "#panel-attention .col", "#panel-attention .rows button"),
          "electra": ("#strip .tok", "#panel-electra tr", "#panel-attention .col", "#panel-attention .rows button")}


def lit(driver) -> dict[str, set[str]]:
    """Per panel, the positions its lit elements carry."""
    found = {}
    for node in driver.find_elements("css selector", ".linked"):
        panel = node.find_element("xpath", "ancestor::section").get_attribute("id")
        found.setdefault(panel, set()).add(node.get_attribute("data-link"))
    return found


@pytest.mark.parametrize("family", ["distilbert", "electra"])
def test_a_token_hovered_or_focused_lights_in_every_panel(family, browser, pages):
    """The strip's chosen token, hovered with the mouse, then reached with Tab and the arrow keys: its
    MLM row, its teacher/student card, ELECTRA's row, its attention column and query button light up,
    nothing else; the strip's guess and verdict are the MLM table's."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_page(browser, pages[family])
    chips = browser.find_elements("css selector", "#strip [data-position]")
    index = next(i for i, c in enumerate(chips) if c.get_attribute("data-fate"))
    position = chips[index].get_attribute("data-position")
    panels = {"#strip": "panel-batch", "#panel-mlm": "panel-mlm", "#panel-distil": "panel-distil",
              "#panel-electra": "panel-electra", "#panel-attention": "panel-attention"}
    expected = {panels[selector.split()[0]]: {position} for selector in LINKED[family]}
    ActionChains(browser).move_to_element(chips[index]).perform()
    assert lit(browser) == expected
    for selector in LINKED[family]:
        assert browser.find_elements("css selector", f"{selector}.linked[data-link='{position}']"), selector
    ActionChains(browser).move_to_element(browser.find_element("css selector", "h1")).perform()
    assert lit(browser) == {}
    browser.execute_script("document.getElementById('panel-batch').focus()")
    ActionChains(browser).send_keys(Keys.TAB).perform()  # from the panel, Tab reaches the strip: its first token
    assert browser.execute_script("return document.activeElement.dataset.position") == "0"
    for _ in range(index):
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    assert browser.execute_script("return document.activeElement.dataset.position") == position
    assert lit(browser) == expected
    if family == "distilbert":  # the strip's verdict row is the MLM table's
        row = browser.find_element("css selector", f"#panel-mlm tr[data-link='{position}']")
        guess = row.find_element("css selector", "li").text.rsplit(" ", 1)[0]
        assert chips[index].find_element("css selector", ".guess").text.startswith(guess)
        assert (chips[index].find_element("css selector", ".verdict").text == "✓") == ("right" in row.text)


def test_the_summed_loss_line_adds_up_on_the_page(browser, pages):
    open_page(browser, pages["bert"])
    act(browser, "run", "The cat eats the fish near the river. [SEP] The dog sleeps in the sun all day long.")
    line = browser.find_element("id", "loss-sum")
    terms = line.find_elements("css selector", ".term")
    assert [t.get_attribute("data-objective") for t in terms] == ["mlm", "nsp"]
    for value, total in (("data-value", "data-total"), ("data-other-value", "data-other-total")):  # a typed pair: under both labels
        weighted = [float(t.get_attribute("data-weight")) * float(t.get_attribute(value) or t.get_attribute("data-value")) for t in terms]
        assert sum(weighted) == pytest.approx(float(line.get_attribute(total)), rel=1e-5)
    totals = [float(line.get_attribute(name)) for name in ("data-total", "data-other-total")]
    assert line.text.endswith(f"= {totals[0]:.3f} or {totals[1]:.3f}: the page cannot know which label your pair has.")
    assert "if B followed A" in terms[1].text and "if not" in terms[1].text
    assert "top guesses are the original token" in browser.find_element("id", "mlm-accuracy").text


@pytest.fixture(scope="module")
def wide_page(browser, sessions, tmp_path_factory):
    """A model of 64 positions (the default runs'), untrained, with a run's tokenizer: for the picture's width."""
    from minibert import MaskedLM, save_pretrained

    bert = sessions["bert"]
    folder = save_pretrained(MaskedLM(bert.encoder.config.replace(max_positions=64)), tmp_path_factory.mktemp("wide") / "m",
                             tokenizer=bert.tokenizer)
    server = make_server(open_session(folder))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_attention_pictures_fit_1400_px_for_64_tokens_and_switch(browser, wide_page):
    """A 64-token text: the T × T picture and every head's small picture fit a 1,400 px window without
    scrolling sideways; the layer and head switches and a query row pick what is drawn and marked."""
    browser.set_window_size(1400, 1000)
    try:
        from selenium.webdriver.support.ui import WebDriverWait

        browser.get(wide_page)  # a folder without a run: the page asks for a text
        WebDriverWait(browser, 30).until(lambda d: d.execute_script("return window.exploreReady === true"))
        browser.execute_script("document.getElementById('text').value = arguments[0]", "Naming things is hard. " * 40)
        act(browser, "run")
        rows = browser.find_elements("css selector", "#panel-attention .rows button")
        assert len(rows) == 64
        assert browser.execute_script("return document.documentElement.scrollWidth") <= browser.execute_script(
            "return document.documentElement.clientWidth") <= 1400
        heatmap = browser.find_element("id", "heatmap")
        assert heatmap.size["width"] == heatmap.size["height"] >= 64 * 4
        assert len(browser.find_elements("css selector", "#every-head canvas")) == 4  # the default runs' 2 layers × 2 heads
        browser.find_element("css selector", "[data-pick=head]:nth-of-type(2)").click()
        browser.find_element("css selector", "[data-pick=layer]:nth-of-type(2)").click()
        heatmap = browser.find_element("id", "heatmap")
        assert (heatmap.get_attribute("data-layer"), heatmap.get_attribute("data-head")) == ("1", "1")
        browser.find_element("css selector", "#panel-attention .rows button[data-query='5']").click()
        marker = browser.find_element("css selector", "#panel-attention .query")
        assert abs(marker.location["y"] - browser.find_element("css selector", "[data-query='5']").location["y"]) <= 3
        assert browser.find_element("css selector", "[data-query='5']").get_attribute("aria-pressed") == "true"
    finally:
        browser.set_window_size(1280, 1000)


def test_a_written_page_lists_the_texts_it_holds(browser, sessions, tmp_path):
    out = write_page(sessions["albert"], tmp_path / "page.html", [PLAIN_TEXT])
    open_page(browser, Path(out).resolve().as_uri())
    buttons = browser.find_elements("css selector", "#holds button")
    assert [b.get_attribute("data-text") for b in buttons] == ["", PLAIN_TEXT]
    browser.execute_script("window.exploreReady = false")
    buttons[1].click()
    wait_until_answered(browser)
    assert "your text" in browser.find_element("id", "panel-batch").text


# --- masks that follow the text; inside a layer; attention that reads; a page that fits ---------------

THREE_TEXTS = ("The quick fox jumps over the lazy dog near the river bank today.",
               "A small bird sings in the green garden every single morning now.",
               "My old car needs new tires before the long winter trip north.")


def test_three_typed_texts_get_three_masks_at_one_draw(browser, pages):
    open_page(browser, pages["bert"])
    masked = []
    for text in THREE_TEXTS:
        act(browser, "run", text)
        masked.append(tuple(c.get_attribute("data-position") for c in browser.find_elements("css selector", "#strip .tok[data-fate]:not([data-fate=''])")))
        assert browser.find_element("id", "masking-line").get_attribute("data-draw") == "0"
    assert len(set(masked)) == 3, masked


def hidden_state(session, answer, layer: int, position: int) -> torch.Tensor:
    """The encoder's own output of `layer` at `position`, for the ids its model read in `answer`."""
    tokens = answer["electra"]["tokens"] if answer["electra"] else answer["batch"]["tokens"]
    ids = torch.tensor([[t.get("shown", t["original"])["id"] for t in tokens]])
    segments = torch.tensor([[t["segment"] for t in answer["batch"]["tokens"]]])
    with torch.no_grad():
        return session.encoder(ids, torch.ones_like(ids), segments, output_hidden_states=True).hidden_states[layer + 1][0, position]


def inside_output(driver) -> tuple[torch.Tensor, int, int]:
    row = driver.find_element("id", "inside-output")
    return (torch.tensor(json.loads(row.get_attribute("data-values"))), int(row.get_attribute("data-layer")),
            int(row.get_attribute("data-position")))


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert"])
def test_inside_a_layer_ends_at_the_layers_hidden_state_in_the_page(family, browser, pages, sessions):
    """The panel's last stage is the layer's output: the encoder's own hidden state at the token, at
    the first masked token on load, then at another layer and at a token clicked in the strip."""
    console_errors(browser)
    open_page(browser, pages[family])
    answer = explore(sessions[family], None, 0)
    last = sessions[family].encoder.config.num_layers - 1  # DistilBERT's tiny student has one layer
    output, layer, position = inside_output(browser)
    assert (layer, position) == (0, answer["inside"]["position"])
    torch.testing.assert_close(output, hidden_state(sessions[family], answer, 0, position), rtol=0, atol=1e-5)
    browser.execute_script("window.exploreReady = false")
    browser.find_element("css selector", f"#panel-inside [data-pick=layer]:nth-of-type({last + 1})").click()
    wait_until_answered(browser)
    output, layer, position = inside_output(browser)
    assert layer == last
    torch.testing.assert_close(output, hidden_state(sessions[family], answer, last, position), rtol=0, atol=1e-5)
    browser.execute_script("window.exploreReady = false")
    browser.find_element("css selector", "#strip [data-position='3']").click()
    wait_until_answered(browser)
    output, layer, position = inside_output(browser)
    assert (layer, position) == (last, 3) and "picked" in browser.find_element("css selector", "#strip [data-position='3']").get_attribute("class")
    torch.testing.assert_close(output, hidden_state(sessions[family], answer, last, 3), rtol=0, atol=1e-5)
    stages = attribute(browser, "#panel-inside [data-stage]", "data-stage")
    assert stages[:2] == ["input", "attention-q"] and len(browser.find_elements("css selector", "#panel-inside button.line")) >= 12
    assert console_errors(browser) == []


def test_the_line_view_and_the_grid_switch_layer_and_head(browser, pages, sessions):
    """Pressing a small picture of the layer × head grid opens it in the heatmap and the line view (and
    the inside-a-layer panel); the chosen token's lines carry its row of weights."""
    console_errors(browser)  # what earlier tests logged
    open_page(browser, pages["albert"])
    answer = explore(sessions["albert"], None, 0)
    browser.execute_script("window.exploreReady = false")
    browser.find_element("css selector", "#every-head [data-layer='1'][data-head='1']").click()
    wait_until_answered(browser)
    for view in ("heatmap", "lines"):
        shown = browser.find_element("id", view)
        assert (shown.get_attribute("data-layer"), shown.get_attribute("data-head")) == ("1", "1"), view
    assert browser.find_element("css selector", "#every-head [aria-pressed=true]").get_attribute("data-layer") == "1"
    assert [b.text for b in browser.find_elements("css selector", "#panel-inside [data-pick=head][aria-pressed=true]")] == ["1"]
    assert inside_output(browser)[1] == 1
    position = answer["inside"]["position"]
    row = answer["attention"]["weights"][1][1][position]
    lit = {int(line.get_attribute("data-key")): float(line.get_attribute("data-weight")) for line in browser.find_elements("css selector", "#lines line[data-key]")}
    assert lit == {k: w for k, w in enumerate(row) if w >= 0.005}
    browser.find_element("css selector", "#panel-attention [data-pick=head]:nth-of-type(1)").click()
    assert browser.find_element("id", "lines").get_attribute("data-head") == "0"
    assert float(browser.find_element("id", "colour-scale").get_attribute("data-top")) == max(max(r) for r in answer["attention"]["weights"][1][0])
    assert console_errors(browser) == []


@pytest.mark.parametrize("family", ["64 positions", "electra", "distilbert"])
def test_no_sideways_scroll_at_700_px(family, browser, pages, request):
    """A pair of 64 tokens (the default runs' length) on a page 700 px wide: every picture and table
    fits or scrolls in its own box, and the page does not scroll sideways."""
    browser.set_window_size(700, 900)
    try:
        if family == "64 positions":  # a folder without a run: the page asks for a text
            from selenium.webdriver.support.ui import WebDriverWait

            browser.get(request.getfixturevalue("wide_page"))
            WebDriverWait(browser, 30).until(lambda d: d.execute_script("return window.exploreReady === true"))
        else:
            open_page(browser, pages[family])
        browser.execute_script("document.getElementById('text').value = arguments[0]", "The cat eats the fish near the river. " * 8 +
                               "[SEP] The dog sleeps in the warm sun all day long, as dogs do. " * 4)
        act(browser, "run")
        width = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert width[0] <= width[1] <= 700, width
    finally:
        browser.set_window_size(1280, 1000)


def test_the_strip_stays_in_view_while_the_panels_below_scroll(browser, pages):
    from selenium.webdriver.common.action_chains import ActionChains

    open_page(browser, pages["distilbert"])
    browser.execute_script("document.querySelector('#panel-distil .card').scrollIntoView()")
    chip = browser.find_element("css selector", "#strip .tok[data-fate]:not([data-fate=''])")
    assert browser.execute_script("const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight", chip)
    ActionChains(browser).move_to_element(chip).perform()
    card = browser.find_element("css selector", f"#panel-distil .card[data-link='{chip.get_attribute('data-position')}']")
    assert "linked" in card.get_attribute("class")


def test_a_written_page_draws_only_what_it_holds(browser, sessions, tmp_path):
    """A --text entry holds one draw: Draw again is off and the page says so; the run's static copies
    step to the last held one, and do not wrap round to the first."""
    console_errors(browser)  # what earlier tests logged
    out = write_page(sessions["bert"], tmp_path / "page.html", [PLAIN_TEXT])
    open_page(browser, Path(out).resolve().as_uri())
    copies = len(sessions["bert"].copy_rows())
    assert browser.find_element("id", "held").text == f"This page holds copies 1–3 of {copies}; python -m minibert explore shows every copy."
    for copy in ("1", "2"):
        act(browser, "draw-again")
        assert browser.find_element("id", "masking-line").get_attribute("data-copy") == copy
    assert not browser.find_element("id", "draw-again").is_enabled()
    browser.execute_script("window.exploreReady = false")
    browser.find_elements("css selector", "#holds button")[1].click()
    wait_until_answered(browser)
    assert browser.find_element("id", "held").text == "This page holds draw 0 only; the server draws any."
    assert not browser.find_element("id", "draw-again").is_enabled()
    browser.execute_script("window.exploreReady = false")
    browser.find_element("css selector", "#strip [data-position='1']").click()  # the file holds one token's inside
    wait_until_answered(browser)
    assert "python -m minibert explore follows any token" in browser.find_element("id", "inside-absent").text
    assert console_errors(browser) == []


def test_the_page_says_what_it_shows(browser, pages):
    """The draw's own count of chosen tokens beside the rule's average; byte pieces and a student's lack
    of segment types in the legend; the typed special tokens named; the heatmap's cells named in words;
    DistilBERT's loss totalled and its cards' other tokens counted; ELECTRA's generator filling your
    [MASK]s in the strip; ALBERT's head judging a pair with your [MASK]s."""
    from selenium.webdriver.common.action_chains import ActionChains

    console_errors(browser)  # what earlier tests logged
    open_page(browser, pages["distilbert"])
    act(browser, "run", "😀 The [cls] cat sees the dog. [SEP] The cow eats [unk] grass.")
    line = browser.find_element("id", "masking-line")
    chosen, maskable = line.get_attribute("data-chosen"), line.get_attribute("data-maskable")
    assert f"chose {chosen} of the {maskable} tokens" in line.text and "on average" in line.text
    legend = browser.find_element("id", "legend").text
    assert "a byte piece" in legend and "no segment embeddings: it tells B from A by [SEP] alone" in legend
    assert browser.find_element("id", "specials").get_attribute("data-specials") == "[CLS] [UNK]"
    losses = browser.find_element("id", "distil-losses")
    assert losses.text.endswith(f"= {float(losses.get_attribute('data-total')):.3f}")
    assert browser.find_element("css selector", "#panel-distil [data-rest=others] td").text == "the other 311"
    heatmap = browser.find_element("id", "heatmap")
    ActionChains(browser).move_to_element_with_offset(heatmap, -heatmap.size["width"] // 2 + 2, -heatmap.size["height"] // 2 + 2).perform()
    assert heatmap.get_attribute("title").startswith("query “[CLS]” (0) → key “[CLS]” (0): weight ")
    open_page(browser, pages["electra"])
    act(browser, "run", MASKED_TEXT)
    chip = browser.find_element("css selector", "#strip [data-fate=yours]")
    assert chip.find_element("css selector", ".guess").text.split()[-1] in ("replaced", "original")
    assert "generator filled your [MASK]s" in browser.find_element("id", "electra-yours").text
    open_page(browser, pages["albert"])
    act(browser, "run", "The cat sat on the [MASK]. [SEP] It was [mask] and warm.")
    assert browser.find_element("id", "sentence").get_attribute("data-verdict") in ("0", "1")
    assert console_errors(browser) == []
