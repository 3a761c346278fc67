// What does not depend on the text (overview.py): the model's parameters part by part, and the run's
// settings and curves, each beside the default run's band.
function renderModel(m) {
  const out = body("panel-model");
  const rows = [["word embeddings V·E", `${m.V} × ${m.E}`, m.word_embeddings],
                ["projection E·H (+ bias)", m.E === m.H ? "none: E = H" : `${m.E} × ${m.H}`, m.projection],
                ["one V·H table instead", `${m.V} × ${m.H}`, m.unfactorized],
                ["other embedding parameters", m.other_parts, m.other_embeddings]];
  for (const s of m.sublayers) rows.push([`${s.name} sublayers`, `${s.modules} module(s) of ${s.each.toLocaleString()}, applied at ${s.applied} depths` +
                                           (s.modules < s.applied ? ": shared, counted once" : ""), s.counted]);
  rows.push(["pooler", "", m.pooler], ["encoder in all", "", m.encoder]);
  const table = el("table", {}, el("tr", {}, el("th", {text: "part"}), el("th", {text: "shape"}), el("th", {text: "parameters"})));
  for (const [part, shape, n] of rows) table.append(el("tr", {"data-part": part, "data-count": n},
    el("td", {text: part}), el("td", {text: shape}), el("td", {class: "num", text: n.toLocaleString()})));
  out.append(el("div", {class: "wide"}, table));
  const facts = el("dl");
  for (const [k, v] of Object.entries(m.facts)) facts.append(el("dt", {text: k}), el("dd", {text: v}));
  out.append(facts, codeRefs(m.code));
}


// a logged metric in words, and whether it is a share (drawn in %) or a loss (in nats)
const METRIC_WORDS = {loss: "loss, all objectives", mlm_loss: "MLM loss", mlm_accuracy: "MLM accuracy", nsp_loss: "NSP loss", nsp_accuracy: "NSP accuracy",
  sop_loss: "SOP loss", sop_accuracy: "SOP accuracy", rtd_loss: "detection loss", rtd_accuracy: "detection accuracy", rtd_auc: "detection AUC",
  rtd_masked_auc: "detection AUC at the masked tokens", rtd_precision: "detection precision", rtd_recall: "detection recall",
  replaced_fraction: "share of tokens replaced", kd_soft_loss: "soft-target loss", kd_cosine_loss: "hidden-state cosine loss"};
function metricWords(name) {
  const base = name.replace(/^eval_/, "");
  return (name.startsWith("eval_") ? "held-out " : "training ") + (METRIC_WORDS[base] || base.replace(/_/g, " "));
}
const isShare = name => /(accuracy|auc|precision|recall|fraction)$/.test(name);

function ticks(lo, hi, n = 4, whole = false) {  // round values from lo to hi, about n of them (whole: integers only)
  const span = (hi - lo) || Math.abs(hi) || 1, raw = span / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(whole ? 1 : 0, [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw));
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function curveSVG(c, baselines) {
  const W = 370, H = 210, L = 48, R = 10, TOP = 26, B = 36, share = isShare(c.metric);
  const xs = c.points.map(p => p[0]), x0 = Math.min(0, ...xs), x1 = Math.max(...xs, 1);  // from step 0 to the run's own last
  const band = c.band && c.band.steps.some(s => s <= x1) ? c.band : null;
  const inBand = band ? band.steps.map((s, i) => i).filter(i => band.steps[i] <= x1) : [];
  const ys = c.points.map(p => p[1]).concat(inBand.flatMap(i => [band.low[i], band.high[i]]));
  const lines = c.metric === "eval_mlm_accuracy" ? baselines : [];
  ys.push(...lines.map(b => b.value));
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (share) { y0 = Math.max(0, y0 - 0.05); y1 = Math.min(1, y1 + 0.05); } else { const pad = 0.05 * ((y1 - y0) || 1); y0 -= pad; y1 += pad; }
  const X = x => L + (W - L - R) * (x - x0) / (x1 - x0), Y = y => H - B - (H - B - TOP) * (y - y0) / ((y1 - y0) || 1);
  const holder = el("div"); holder.innerHTML = "<svg></svg>";  // the HTML parser gives an <svg> its namespace
  const svg = holder.firstChild, ns = svg.namespaceURI;
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${metricWords(c.metric)} against optimizer steps: ${c.points.map(p => p[0] + ": " + fmt(p[1])).join(", ")}`);
  const add = (tag, attrs, text) => { const n = document.createElementNS(ns, tag); for (const k in attrs) n.setAttribute(k, attrs[k]); if (text !== undefined) n.textContent = text; svg.append(n); return n; };
  const value = y => share ? `${Math.round(100 * y * 10) / 10}%` : `${Number(y.toPrecision(3))}`;
  for (const t of ticks(y0, y1)) {
    add("line", {x1: L, x2: W - R, y1: Y(t), y2: Y(t), stroke: "#eee"});
    add("text", {x: L - 4, y: Y(t) + 4, "text-anchor": "end", "data-tick": "y"}, value(t));
  }
  for (const t of ticks(x0, x1, 4, true)) {
    add("line", {x1: X(t), x2: X(t), y1: H - B, y2: H - B + 4, stroke: "#555"});
    add("text", {x: X(t), y: H - B + 15, "text-anchor": "middle", "data-tick": "x"}, t.toLocaleString());
  }
  add("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#555"});
  add("line", {x1: L, x2: L, y1: TOP, y2: H - B, stroke: "#555"});
  if (band && inBand.length) {
    const up = inBand.map(i => `${X(band.steps[i])},${Y(band.high[i])}`), down = inBand.map(i => `${X(band.steps[i])},${Y(band.low[i])}`).reverse();
    add("polygon", {points: up.concat(down).join(" "), fill: "#999", "fill-opacity": "0.3"});
  }
  for (const b of lines) {
    add("line", {x1: L, x2: W - R, y1: Y(b.value), y2: Y(b.value), stroke: "#777", "stroke-dasharray": "4 3"});
    add("text", {x: W - R - 2, y: Y(b.value) - 3, "text-anchor": "end", fill: "#555", "data-baseline": b.name}, `${b.words} ${value(b.value)}`);
  }
  add("polyline", {points: c.points.map(p => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none", stroke: "#2a5db0", "stroke-width": 2});
  if (c.points.length === 1) add("circle", {cx: X(c.points[0][0]), cy: Y(c.points[0][1]), r: 3, fill: "#2a5db0"});  // one record: a dot, not an invisible line
  add("text", {x: L, y: 14, "font-weight": "bold"}, `${metricWords(c.metric)} (${share ? "%" : c.metric.endsWith("cosine_loss") ? "1 − cosine" : "nats"})`);
  add("text", {x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle"}, "optimizer steps" + (band ? `; grey: the ${band.variant} default run` : ""));
  return svg;
}

function renderRun(r) {
  if (!r) return absent("panel-run", "No run.json and metrics.jsonl here: not a python train.py folder.");
  const out = body("panel-run");
  const curves = el("div", {class: "tokens"});
  for (const c of r.curves) curves.append(el("figure", {"data-metric": c.metric, "data-points": JSON.stringify(c.points)}, curveSVG(c, r.baselines)));
  out.append(curves);
  const details = el("details", {}, el("summary", {text: "Settings (run.json)"}));
  const table = el("table");
  for (const [k, v] of Object.entries(r.settings)) table.append(el("tr", {}, el("th", {text: k}), el("td", {text: JSON.stringify(v)})));
  details.append(table);
  out.append(details, codeRefs(r.code));
}

