// A question-answering model: the answer in the passage, the windows it is read in, each window's start
// and end probabilities, the n-best list (questions.py).
const passageText = (a, i) => a.passage.text.slice(a.passage.tokens[i].start, a.passage.tokens[i].end);

function renderQAAnswer(a) {
  const out = body("panel-qa-answer"), ans = a.answer, L = a.limits;
  const text = a.passage.text;
  const passage = el("div", {class: "passage", id: "qa-passage"});
  if (ans.start >= 0) passage.append(text.slice(0, ans.start), el("mark", {id: "answer-span", "data-start": ans.start, text: text.slice(ans.start, ans.end)}), text.slice(ans.end));
  else passage.append(text);
  const said = ans.start >= 0
    ? [`The model answers “`, el("strong", {id: "answer-text", text: ans.text}), `” (characters ${ans.start}–${ans.end} of the passage, ` +
       `probability ${fmt(ans.probability)} among the n-best, from window ${ans.window === null ? "?" : ans.window + 1}); highlighted below.`]
    : [el("strong", {id: "answer-text", text: "No answer"}), ": the model says the passage does not answer the question."];
  out.append(el("p", {id: "qa-said", "data-answer": ans.text, "data-start": ans.start}, ...said));
  const n = a.null;
  if (n) {
    const best = n.best_span_score === null ? "there is no span to weigh it against"
      : `the best span scores ${fmt(n.best_span_score)} (start + end logit); null odds = null − best span = ${fmt(n.odds)}, ` +
        `threshold ${fmt(L.null_threshold)} (--null-threshold)`;
    out.append(el("p", {id: "qa-null", "data-null-score": n.score, "data-odds": n.odds ?? "", "data-answered": String(n.answered)},
      `SQuAD 2.0: “no answer” scores ${fmt(n.score)} ([CLS]'s start logit ${fmt(n.start_logit)} + end logit ${fmt(n.end_logit)}, ` +
      `in the window most sure there is an answer); ${best}. Decision: ${n.answered ? "answer with the best span (odds ≤ threshold)" : "no answer (odds > threshold)"}.`));
  }
  out.append(passage);
  out.append(codeRefs([...a.code.nbest, ...(n ? a.code.null : [])]));
}

function renderQAWindows(a) {
  const out = body("panel-qa-windows"), L = a.limits, total = a.passage.tokens.length;
  out.append(el("p", {text: `The passage is ${total} tokens; the question ${a.question.tokens} (cut at ${L.max_query_len}). Each window is ` +
    `[CLS] question [SEP] passage piece [SEP], at most ${L.max_len} positions; consecutive windows share ${L.doc_stride} passage tokens (--doc-stride).`}));
  const table = el("table", {}, el("tr", {}, ...["window", "passage tokens", "how many", "shared with the window before", "positions in all"].map(h => el("th", {text: h}))));
  const rulers = el("div", {"aria-hidden": "true"});
  for (const w of a.windows) {
    table.append(el("tr", {"data-window": w.number, "data-first": w.first, "data-last": w.last, "data-overlap": w.overlap},
      el("td", {class: "num", text: w.number + 1}), el("td", {text: `${w.first}–${w.last}`}), el("td", {class: "num", text: w.last - w.first + 1}),
      el("td", {class: "num", text: w.number ? w.overlap : "–"}), el("td", {class: "num", text: w.length})));
    const ruler = el("div", {class: "ruler"});
    ruler.append(el("span", {style: `left:${100 * w.first / total}%; width:${100 * (w.last - w.first + 1) / total}%`, text: `window ${w.number + 1}`}));
    rulers.append(ruler);
  }
  out.append(el("div", {class: "wide"}, table), el("p", {class: "muted", text: "Where each window lies in the passage (first token at the left, last at the right):"}), rulers);
  out.append(codeRefs(a.code.windows));
}

function renderQAProbs(a) {
  const out = body("panel-qa-probs"), ans = a.answer;
  out.append(el("p", {}, "Each window's start and end probabilities: a softmax over the window's own positions, as the span head is trained. Over each token ",
    el("span", {class: "key-start", text: "a green bar: P(start)"}), ", under it ", el("span", {class: "key-end", text: "a red bar: P(end)"}),
    "; a bar's height is √P, full height P = 1 (a model unsure of the start draws low bars everywhere). Tokens shared with the window before are shaded blue; the chosen answer is yellow."));
  for (const w of a.windows) {
    const best = xs => xs.indexOf(Math.max(...xs));
    const bs = best(w.start), be = best(w.end);
    out.append(el("h3", {text: `Window ${w.number + 1}: passage tokens ${w.first}–${w.last}`}),
      el("p", {class: "muted", "data-window-sums": w.number},
        `Likeliest start “${passageText(a, w.first + bs)}” (${fmt(w.start[bs])}), end “${passageText(a, w.first + be)}” (${fmt(w.end[be])}). ` +
        `[CLS], “no answer here”: start ${fmt(w.cls.start)}, end ${fmt(w.cls.end)}; the question and separators: start ${fmt(w.others.start)}, end ${fmt(w.others.end)}.`));
    const strip = el("div", {class: "strip", role: "list", "data-window": w.number});
    w.start.forEach((ps, i) => {
      const k = w.first + i, t = a.passage.tokens[k], pe = w.end[i];
      const inAnswer = ans.start >= 0 && t.start < ans.end && t.end > ans.start;
      const chip = el("span", {class: "qtok" + (inAnswer ? " in-answer" : "") + (w.number && i < w.overlap ? " overlap" : ""), role: "listitem",
                               "data-token": k, "data-start-p": ps, "data-end-p": pe,
                               title: `token ${k} ${t.piece}: P(start) ${fmt(ps)} (logit ${fmt(w.start_logits[i])}), P(end) ${fmt(pe)} (logit ${fmt(w.end_logits[i])})`},
        el("span", {class: "p start"}, el("i", {style: `height:${(14 * Math.sqrt(ps)).toFixed(1)}px`})),
        passageText(a, k),
        el("span", {class: "p end"}, el("i", {style: `height:${(14 * Math.sqrt(pe)).toFixed(1)}px`})));
      strip.append(chip);
    });
    out.append(strip);
  }
  out.append(codeRefs(a.code.logits));
}

function renderQANbest(a) {
  const out = body("panel-qa-nbest"), L = a.limits;
  out.append(el("p", {text: `The ${L.n_best} best starts and ends of each window, every pair at most ${L.max_answer_len} tokens long scored start logit + end logit, ` +
    "the best spans over all windows (each span once); probability: a softmax over the list's scores." + (L.with_null ? " The empty row is “no answer”." : "")}));
  const table = el("table", {id: "nbest"}, el("tr", {}, ...["", "text", "start logit", "end logit", "score", "probability", "window"].map(h => el("th", {text: h}))));
  a.nbest.forEach((e, i) => table.append(el("tr", {"data-text": e.text, "data-start": e.start ?? "", "data-probability": e.probability},
    el("td", {class: "num", text: i + 1}), el("td", {text: e.start === null ? "(no answer)" : e.text}),
    el("td", {class: "num", text: fmt(e.start_logit)}), el("td", {class: "num", text: fmt(e.end_logit)}), el("td", {class: "num", text: fmt(e.score)}),
    el("td", {class: "num"}, el("span", {class: "bar", style: `width:${60 * e.probability}px`}), fmt(e.probability)),
    el("td", {class: "num", text: e.window === null ? "–" : e.window + 1}))));
  out.append(el("div", {class: "wide"}, table), codeRefs(a.code.nbest));
}

const QA_PANELS = ["panel-qa-answer", "panel-qa-windows", "panel-qa-probs", "panel-qa-nbest"];
function renderQA(a) {
  state.answer = a;
  renderQAAnswer(a); renderQAWindows(a); renderQAProbs(a); renderQANbest(a);
  window.exploreReady = true;
}
function clearQA(why) { for (const id of QA_PANELS) absent(id, why); }

async function askQuestion() {
  const question = document.getElementById("question").value, passage = document.getElementById("passage").value;
  say("…");
  try {
    if (!question.trim()) throw new Error("the question is empty: type a question about the passage");
    if (!passage.trim()) throw new Error("the passage is empty: paste the text the answer is to be found in");
    if (EMBEDDED) {
      const found = EMBEDDED.examples.find(x => x.question === question.trim() && x.passage === passage);
      if (!found) throw new Error("This page was written without a server: it holds only the questions it was written with. Run python -m minibert explore DIR for any question.");
      renderQA(found.answer);
    } else {
      renderQA(await getJSON("/api/answer?" + new URLSearchParams({question, passage})));
    }
    say("");
  } catch (e) { clearQA("No answer for the question and passage as they stand: see the message above."); say(e.message, true); }
}

