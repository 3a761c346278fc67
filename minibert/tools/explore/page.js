// The page's core: what it holds or asks the server for, the state every panel shares (the text, the
// draw, the token followed, the layer, the head), and what a hovered token lights. The other scripts
// draw the panels; server.py puts them all in one <script>, this one last.
const EMBEDDED = JSON.parse(document.getElementById("answers").textContent);
const state = {text: null, draw: 0, position: 0, layer: 0, head: 0, answer: null, inside: null, asked: 0, task: "pretraining"};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}
const fmt = (x, d = 3) => (x === null || x === undefined) ? "–" : Number(x).toFixed(d);
const pct = x => (100 * x).toFixed(1) + "%";
const short = p => p >= 0.01 ? p.toFixed(2) : p.toPrecision(1);  // a probability in few characters: 0.38, 0.004
const shown = t => (t.text && t.text.trim()) ? t.text : t.piece;
function body(id) { const b = document.querySelector(`#${id} .body`); b.replaceChildren(); return b; }
function absent(id, why) { body(id).append(el("p", {class: "muted", text: why})); }
function say(text, error = false) { const m = document.getElementById("message"); m.textContent = text; m.className = error ? "error" : "muted"; }

async function answered(response) {
  const data = await response.json().catch(() => ({error: response.status === 414
    ? "the text is too long to send in one request: shorten it" : `${response.status} ${response.statusText}`}));
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}
const getJSON = path => fetch(path).then(answered);
const postJSON = (path, data) => fetch(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(data)}).then(answered);
async function fetchSource(name) {
  if (EMBEDDED) return EMBEDDED.sources[name];
  return getJSON("/api/source?name=" + encodeURIComponent(name));
}

function codeRefs(names) {
  const box = el("div", {class: "code-refs"}, "The code that did it: ");
  if (!names.length) box.append(el("span", {class: "muted", text: "none of the functions this panel shows ran for this answer."}));
  for (const name of names) {
    const ref = name.replace(/^minibert\./, "minibert/").replace(/\.(?=[^:]*:)/g, "/").replace(":", ".py:");
    const button = el("button", {type: "button", "aria-expanded": "false", "data-name": name, text: ref});
    const pre = el("pre", {class: "source", hidden: ""});
    button.addEventListener("click", async () => {
      if (pre.hidden && !pre.textContent) {
        try { const s = await fetchSource(name); pre.textContent = `# ${s.file}, line ${s.line}\n` + s.source; }
        catch (e) { pre.textContent = e.message; }
      }
      pre.hidden = !pre.hidden;
      button.setAttribute("aria-expanded", String(!pre.hidden));
    });
    box.append(button, pre);
  }
  return box;
}

// hovering or focusing a token lights it in every panel: whatever carries its position in data-link
function link(position) {
  for (const node of document.querySelectorAll(".linked")) node.classList.remove("linked");
  if (position !== null) for (const node of document.querySelectorAll(`[data-link="${position}"]`)) node.classList.add("linked");
}
for (const [on, off] of [["mouseover", "mouseout"], ["focusin", "focusout"]]) {
  document.addEventListener(on, e => { const t = e.target.closest && e.target.closest("[data-link]"); if (t) link(t.dataset.link); });
  document.addEventListener(off, e => { if (e.target.closest && e.target.closest("[data-link]")) link(null); });
}

function showTask(task) {
  state.task = task;
  for (const node of document.querySelectorAll("[data-task]")) node.hidden = node.dataset.task !== task;
}
// a panel whose part the run does not have (ELECTRA's, DistilBERT's, the masked-LM head on ELECTRA) is not shown
function showPanel(id, shown) {
  document.getElementById(id).hidden = !shown;
  document.querySelector(`#skip a[href="#${id}"]`).parentNode.hidden = !shown;
}

// a page written with --out: the answers it holds for the text shown, one per draw, in draw order
const heldDraws = () => EMBEDDED ? EMBEDDED.examples.filter(x => x.text === state.text) : [];

function renderAnswer(a) {
  state.answer = a; state.inside = a.inside; state.position = a.inside.position; state.layer = a.inside.layer;
  renderBatch(a);
  renderStep(a);
  for (const [id, part, render] of [["panel-mlm", a.mlm, renderMLM], ["panel-electra", a.electra, renderElectra], ["panel-distil", a.distil, renderDistil]]) {
    showPanel(id, !!part);
    if (part) render(part);
  }
  renderInside(a.inside);
  renderAttention(a.attention);
  document.getElementById("draw-again").disabled = a.batch.masking === "yours" || (!!EMBEDDED && state.draw + 1 >= heldDraws().length);
  window.exploreReady = true;
}
const ANSWER_PANELS = ["panel-batch", "panel-step", "panel-mlm", "panel-electra", "panel-distil", "panel-inside", "panel-attention"];

async function ask() {
  say("…");
  state.asked += 1;
  try {
    if (EMBEDDED) {
      const held = heldDraws()[state.draw];
      if (!held) throw new Error("This page was written without a server: it holds only the texts and draws it was written with. Run python -m minibert explore DIR for any text.");
      renderAnswer({...held.answer, inside: held.layers[Math.min(state.layer, held.layers.length - 1)]});
    } else {
      renderAnswer(await postJSON("/api/explore", {text: state.text, draw: state.draw, layer: state.layer}));
    }
    const cut = state.answer.batch.notes;
    say(cut.length ? "Cut: " + cut.join("; ") + "." : "");
  } catch (e) {  // no panel keeps an answer to another text, looking current
    for (const id of ANSWER_PANELS) absent(id, "No answer for the text as it stands: see the message above.");
    document.getElementById("draw-again").disabled = true;
    say(e.message, true);
    window.exploreReady = true;
  }
}

// follow another token, or another layer, inside: the server answers that panel alone; a written page
// holds every layer at one token
async function lookInside(position, layer, focus) {
  state.position = position; state.layer = layer;
  const asked = state.asked += 1;
  window.exploreReady = false;
  markPicked();
  renderAttention(state.answer.attention);
  if (focus) document.querySelector(focus)?.focus();
  let panel;
  try {
    if (EMBEDDED) {
      const held = heldDraws()[state.draw], at = held.layers[0];
      panel = at.position === position ? held.layers[layer] : {error: `This page holds the inside of the layers at token ${at.position} ` +
        `(“${at.token}”) only: python -m minibert explore follows any token.`, tokens: at.tokens, position};
    } else {
      panel = await postJSON("/api/inside", {text: state.text, draw: state.draw, position, layer});
    }
  } catch (e) { panel = {error: e.message, tokens: state.inside.tokens, position}; }
  if (asked !== state.asked) return;  // a later question is under way
  if (!panel.error) state.inside = panel;
  renderInside(panel);
  window.exploreReady = true;
}

// a page written with --out answers only the texts it holds: it lists them, each a button that shows it
function listTexts(texts) {
  const holds = document.getElementById("holds"), list = el("ul");
  for (const t of texts) {
    const b = el("button", {type: "button", "data-text": t.text ?? "", text: t.text === null ? "the run's own text" : `“${t.text.length > 80 ? t.text.slice(0, 80) + "…" : t.text}”`});
    b.addEventListener("click", () => { document.getElementById("text").value = t.text ?? ""; state.text = t.text; state.draw = 0; ask(); });
    list.append(el("li", {}, b, ` (${t.draws} draw${t.draws === 1 ? "" : "s"}${t.draws > 1 ? ": Draw again steps through them" : ""})`));
  }
  holds.replaceChildren(el("span", {text: "This page was written without a server (--out) and holds the answers for these texts only:"}), list);
  holds.hidden = false;
}

async function start() {
  const o = EMBEDDED ? EMBEDDED.overview : await getJSON("/api/overview");
  const made = o.task === "qa" ? "a question-answering model (python train.py finetune)"
    : o.variant ? "python train.py --variant " + o.variant : "a Hugging Face folder";
  document.getElementById("loaded").textContent = `${o.checkpoint}: ${made}; weights from ${o.weights}.` +
    (o.notes.length ? " Note: " + o.notes.join("; ") + "." : "");
  renderModel(o.model);
  if (o.task === "qa") {
    showTask("qa");
    const L = o.qa.limits;
    document.getElementById("question-limit").textContent = `(at most ${L.max_query_len} tokens)`;
    document.getElementById("passage-limit").textContent = `(at most ${L.max_passage_tokens.toLocaleString()} tokens; ` +
      `read in windows of ${L.max_len} tokens with the question, overlapping by ${L.doc_stride})`;
    const first = EMBEDDED ? [EMBEDDED.examples[0].question, EMBEDDED.examples[0].passage] : o.qa.example;
    [document.getElementById("question").value, document.getElementById("passage").value] = first;
    return askQuestion();
  }
  renderRun(o.run);
  document.getElementById("text-limit").textContent = `(at most ${o.model.max_length} tokens with the special ones; a longer text is cut, with a note)`;
  if (EMBEDDED) listTexts(EMBEDDED.texts);
  if (EMBEDDED && !EMBEDDED.examples.some(x => x.text === null)) state.text = EMBEDDED.examples[0].text;
  document.getElementById("text").value = state.text || "";
  await ask();
}

document.getElementById("form").addEventListener("submit", e => {
  e.preventDefault();
  state.text = document.getElementById("text").value.trim() || null; state.draw = 0; ask();
});
document.getElementById("qa-form").addEventListener("submit", e => { e.preventDefault(); askQuestion(); });
document.getElementById("draw-again").addEventListener("click", () => { state.draw += 1; ask(); });
start().catch(e => say(e.message, true));
