// The token strip (strip.py): each token read, seen, guessed and judged, in a bar that stays in view;
// and the step: the masking rule for this draw, the loss summed, the sentence task's verdict.
const FATES = {mask: ["▣", "shown as [MASK]"], random: ["⇄", "replaced by a random token"],
               kept: ["=", "left as it was"], yours: ["▣", "your [MASK]"]};
const SENTENCE_PAIR = {nsp: "whether B is the text that followed A", sop: "whether A and B are in the order the document has them"};
const BYTE_PIECE = /^<0x[0-9A-F]{2}>$/;
const range = (first, last) => first === last ? `${first}` : `${first}–${last}`;

// how the mask was made for this draw, and how the rule reads on average
function maskingLine(b) {
  if (b.masking === "yours") return "Your [MASK]s are the masks: nothing is drawn.";
  const made = {static: `Static masking: copy ${b.copy + 1} of ${b.copies}, its mask stored when the examples were built.`,
                dynamic: `Dynamic masking: a new mask each time the text is served; this is draw ${b.draw}.`,
                typed: `Your text, masked now by the run's masking: draw ${b.draw}` +
                       (b.run_static ? " (the run's own examples carry stored masks; yours has none, so one is drawn)." : ".")}[b.masking];
  const even = b.replace_probs.join() === [0.8, 0.1, 0.1].join();
  return `${made} This draw chose ${b.chosen} of the ${b.maskable} tokens it could (${pct(b.chosen / Math.max(1, b.maskable))}); ` +
    `the rule chooses ${pct(b.mask_prob)} on average` + (b.spans ? `, as n-gram spans of up to ${b.max_span} ${b.whole_word ? "whole words" : "tokens"}` : "") +
    `. Of those, ${b.replace_probs.map(pct).join(" / ")} are shown as [MASK] / a random token / themselves` + (even ? " (BERT's 80/10/10)." : ".");
}

// what a page written with --out holds of the text shown, where that is less than the server shows
function heldLine(b, held) {
  if (!EMBEDDED || b.masking === "yours") return "";
  if (b.masking === "static") return `This page holds copies ${range(1, held)} of ${b.copies}; python -m minibert explore shows every copy.`;
  return held > 1 ? `This page holds draws ${range(0, held - 1)}; the server draws any.` : "This page holds draw 0 only; the server draws any.";
}

function sentenceLine(s) {
  const task = s.task.toUpperCase();
  if (!s.pair) return `${task} judges a pair (${SENTENCE_PAIR[s.task]}): one segment has no pair to judge, so its loss is left out. Type A [SEP] B.`;
  if (s.verdict === undefined) return `${task}: no verdict.`;
  const says = `the head says ${s.verdict_words} (P ${fmt(s.verdict_probability)})`;
  if (s.typed) return `${task}: ${says}; you typed this pair, so the page cannot know ${SENTENCE_PAIR[s.task]}. Swap A and B to see whether the verdict turns.`;
  return `${task} label: ${s.label_words}; ${says}: ${s.verdict === s.label ? "✓ right" : "✗ wrong"}, loss ${fmt(s.loss)}.`;
}

// what the model made of each token, for the strip: the masked-LM head's top guess, or ELECTRA's
// generator's sample and its discriminator's call
function verdicts(a) {
  const at = {};
  if (a.mlm) for (const p of a.mlm.positions) {
    const best = p.top[0];
    at[p.position] = {guess: `${shown(best)} ${short(best.prob)}`, guessTitle: `top guess ${shown(best)}, P ${fmt(best.prob)}`,
                      mark: p.right === undefined ? "" : p.right ? "✓" : "✗", right: p.right,
                      words: p.right === undefined ? "" : p.right ? "right" : `wrong (was ${shown(p.original)})`};
  }
  if (a.electra && a.electra.played) for (const t of a.electra.tokens) {
    const called = t.p_replaced > 0.5, g = t.generator;
    const v = at[t.position] = {guess: g ? `${shown(t.shown)} ${short(g.p_sample)}` : "",
      guessTitle: g ? `the generator sampled ${shown(t.shown)} (its P ${fmt(g.p_sample)})` : ""};
    if (t.replaced === undefined) {  // your [MASK]s: what was hidden is unknown, so a call is neither right nor wrong
      v.mark = g ? (called ? "says replaced" : "says original") : "";
      v.words = `the discriminator says P(replaced) ${fmt(t.p_replaced)}`;
    } else {
      v.right = called === t.replaced;
      v.mark = t.replaced ? (called ? "caught" : "missed") : (called ? "false alarm" : "");
      v.words = (t.replaced ? "replaced; " : "original; ") + `the discriminator says P(replaced) ${fmt(t.p_replaced)}` + (v.mark ? `: ${v.mark}` : "");
    }
  }
  return at;
}

function stripKeys(a) {
  const electra = a.electra && a.electra.played;
  return el("span", {class: "keys", "aria-hidden": "true"}, "read", el("span", {class: "seen", text: "seen"}),
            el("span", {class: "guess", text: electra ? "sample, call" : "guess, right?"}));
}

function renderBatch(a) {
  const b = a.batch, out = body("panel-batch"), judged = verdicts(a);
  out.append(el("p", {class: "muted", style: "margin:0"}, `Text: ${b.source}. ` +
    "Hover a token, or walk them with ← →, to light it everywhere; click it or press Enter to follow it inside a layer."));
  for (const note of b.notes) out.append(el("p", {class: "note", "data-note": "cut", text: "Cut: " + note + "."}));
  const lanes = b.spans ? Math.max(0, ...b.spans.map(s => s.lane + 1)) : 0;
  const row = el("div", {class: "tokens", role: "list", id: "strip", "aria-label": "the example, token by token"}, stripKeys(a));
  for (const t of b.tokens) {
    const j = judged[t.position] || {};
    const classes = ["tok", t.special ? "special" : "", t.segment ? "seg1" : "", t.fate ? "fate-" + t.fate : ""].join(" ");
    const label = `position ${t.position}: read ${t.original.piece}` + (t.fate ? `; ${FATES[t.fate][1]}` + (t.fate === "random" ? ` (${t.shown.piece})` : "") : "; not chosen") +
      `; segment ${t.segment}` + (t.spans.length ? `; span ${t.spans.join(" and ")}` : "") + (j.guessTitle ? `; ${j.guessTitle}` : "") + (j.words ? `; ${j.words}` : "");
    const chip = el("span", {class: classes, role: "listitem", tabindex: t.position ? "-1" : "0", "data-position": t.position, "data-link": t.position,
                             "data-fate": t.fate || "", "data-segment": t.segment, "data-spans": t.spans.join(" "), "data-right": j.right ?? "",
                             title: label, "aria-label": label},
                    t.original.piece,
                    el("span", {class: "seen", text: t.fate ? FATES[t.fate][0] + (t.fate === "random" ? " " + t.shown.piece : "") : ""}),
                    el("span", {class: "guess"}, j.guess || "", " ", el("b", {class: "verdict " + (j.right === undefined ? "" : j.right ? "right" : "wrong"), text: j.mark || ""})));
    if (lanes) {  // ALBERT: each span drawn, a bracket under its tokens; overlapping spans in a row of their own
      const marks = el("span", {class: "lanes", "aria-hidden": "true"});
      for (let lane = 0; lane < lanes; lane++) {
        const s = b.spans.find(s => s.lane === lane && s.first <= t.position && t.position <= s.last);
        marks.append(s ? el("i", {class: "br" + (s.first === t.position ? " start" : "") + (s.last === t.position ? " end" : ""),
                                  "data-span": s.number, title: `n-gram span ${s.number}`}) : el("i"));
      }
      chip.append(marks);
    }
    chip.addEventListener("click", () => lookInside(t.position, state.layer));
    row.append(chip);
  }
  row.addEventListener("keydown", e => {  // one tab stop for the strip; the arrow keys walk it, Enter follows a token inside
    const chips = [...row.querySelectorAll("[data-position]")], i = chips.indexOf(document.activeElement);
    if (i >= 0 && e.key === "Enter") { e.preventDefault(); lookInside(i, state.layer); return; }
    const to = {ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: chips.length - 1}[e.key];
    if (i < 0 || to === undefined) return;
    e.preventDefault();
    const next = chips[Math.max(0, Math.min(chips.length - 1, to))];
    chips[i].tabIndex = -1; next.tabIndex = 0; next.focus();
  });
  out.append(row);
  markPicked();
  // a panel reached by a link begins below the strip, not under it
  document.documentElement.style.setProperty("--strip", document.getElementById("panel-batch").offsetHeight + "px");
}

// the token the inside-a-layer panel follows (and the attention panel's query), ringed in the strip
function markPicked() {
  for (const chip of document.querySelectorAll("#strip .tok")) chip.classList.toggle("picked", Number(chip.dataset.position) === state.position);
}

// the key to what this draw shows, and only that
function legend(b, electra) {
  const fates = new Set(b.tokens.map(t => t.fate)), parts = [];
  if (fates.has("mask") || fates.has("yours")) parts.push("▣ shown as [MASK] (orange)");
  if (fates.has("random")) parts.push("⇄ a random token (pink, dashed)");
  if (fates.has("kept")) parts.push("= left as it was, still predicted (green, dotted)");
  parts.push("▁ or Ġ begins a word; ## or no mark continues one");
  if (b.tokens.some(t => BYTE_PIECE.test(t.original.piece)))
    parts.push("<0xF0> a byte piece: a character the vocabulary lacks, spelt as its UTF-8 bytes");
  if (b.sentence ? b.sentence.pair : b.tokens.some(t => t.segment) || b.tokens.filter(t => t.special).length > 2)
    parts.push(b.segment_types >= 2 ? "double underline: segment B (seg 1); A, with [CLS], is seg 0"
               : `this model has ${b.segment_types ? "one segment type" : "no segment embeddings"}: it tells B from A by [SEP] alone`);
  if (b.spans) parts.push("a bracket under each n-gram span drawn; overlapping spans take a second row");
  if (electra) parts.push("sample: the generator's token and its P; call: the discriminator's");
  return el("p", {class: "muted legend", id: "legend"}, ...parts.flatMap((p, i) => [i ? " · " : "", el("span", {text: p})]));
}

function renderStep(a) {
  const b = a.batch, out = body("panel-step");
  out.append(el("p", {id: "masking-line", "data-masking": b.masking, "data-copy": b.copy ?? "", "data-draw": b.draw,
                      "data-chosen": b.chosen, "data-maskable": b.maskable}, maskingLine(b)));
  const held = heldLine(b, heldDraws().length);
  if (held) out.append(el("p", {class: "note", id: "held", text: held}));
  if (b.specials.length) out.append(el("p", {class: "note", id: "specials", "data-specials": b.specials.join(" ")},
    `Read as special tokens, as a tokenizer reads their spellings: ${b.specials.join(", ")}. Masking never chooses one; ` +
    "only [MASK] (your mask) and the first [SEP] (the pair) mean more here."));
  out.append(legend(b, a.electra && a.electra.played));
  if (b.loss) out.append(lossLine(b.loss, b.sentence));
  else if (b.masking === "yours") out.append(el("p", {class: "muted", text: "No loss to sum: your [MASK]s hide tokens the page does not know."}));
  if (b.sentence) out.append(el("p", {id: "sentence", "data-pair": String(b.sentence.pair), "data-label": b.sentence.label ?? "",
                                      "data-verdict": b.sentence.verdict ?? ""}, sentenceLine(b.sentence)));
  out.append(codeRefs(b.code));
}

// the loss the step minimises for this example: each objective's terms, weighted, and their sum; a typed
// pair's sentence term and total under both labels, which the page cannot tell apart
function lossLine(l, sentence) {
  const line = el("p", {id: "loss-sum", "data-total": l.total, "data-other-total": l.other_label_total ?? ""}, "The loss a training step on this example minimises: ");
  const unknown = l.other_label_total !== undefined;
  l.terms.forEach((t, i) => {
    const both = t.other_label_value !== undefined;
    const value = both ? `${fmt(t.value)} if ${sentence.task === "sop" ? "in order" : "B followed A"}, ${fmt(t.other_label_value)} if ${sentence.task === "sop" ? "swapped" : "not"}` : fmt(t.value);
    line.append(i ? " + " : "", el("span", {class: "term", "data-objective": t.objective, "data-metric": t.metric, "data-weight": t.weight,
      "data-value": t.value, "data-other-value": t.other_label_value ?? ""}, `${t.weight} × ${t.words} ${both ? "(" + value + ")" : value}`));
  });
  line.append(unknown ? ` = ${fmt(l.total)} or ${fmt(l.other_label_total)}: the page cannot know which label your pair has.`
                      : ` = ${fmt(l.total)}` + (l.terms.length > 1 ? " (each term its objective's own loss, times the weight the run gave it)." : "."));
  return line;
}
