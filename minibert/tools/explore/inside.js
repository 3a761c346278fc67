// Inside a layer (inside.py): one token followed through one layer, stage by stage, each stage a small
// picture of the model's own numbers (a vector as a strip of cells, scores over the keys as bars), its key
// numbers, and the line of code that computed it.

const STAGE_WORDS = {  // what each stage is, and a few words under it
  input: ["x, the layer's input", p => `hidden state ${p.layer}`], norm_before: ["LayerNorm(x)", () => "pre-LN: before attention"],
  heads: ["heads side by side", p => `${p.heads} × ${p.head_dim}`], projected: ["a = out(heads)", () => "projected back"],
  residual: ["x + a", () => "the residual add"], norm_after: ["LayerNorm", () => "post-LN: after the add"],
  norm_before_ffn: ["LayerNorm", () => "pre-LN: before the feed-forward"], up: ["up", () => "H → intermediate"],
  act: ["activation", p => p.activation], down: ["down", () => "intermediate → H"], residual_ffn: ["+ residual", () => "the add around the feed-forward"],
  norm_after_ffn: ["LayerNorm", () => "post-LN: after the add"], projection: ["E → H", () => "the embedding projected"],
};

// blue below zero, red above, white at zero; `t` in [-1, 1]
const diverging = t => t < 0 ? `rgba(42,93,176,${Math.min(1, -t)})` : `rgba(200,40,40,${Math.min(1, t)})`;

function stats(values) {
  const n = values.length, mean = values.reduce((s, v) => s + v, 0) / n;
  const sd = Math.sqrt(values.reduce((s, v) => s + (v - mean) ** 2, 0) / n), norm = Math.sqrt(values.reduce((s, v) => s + v * v, 0));
  return `${n} numbers · ‖·‖ ${fmt(norm, 2)} · mean ${fmt(mean, 3)} · sd ${fmt(sd, 3)} · from ${fmt(Math.min(...values), 2)} to ${fmt(Math.max(...values), 2)}`;
}

// a vector as a strip of cells (rows of 128 at most), its largest magnitude at full colour
function vectorPicture(values, room, label) {
  const n = values.length, across = Math.min(n, 128), rows = Math.ceil(n / across);
  const cell = Math.max(2, Math.min(12, Math.floor(room / across))), high = 12;
  const canvas = el("canvas", {width: across * cell, height: rows * high, role: "img",
                               "aria-label": `${label}: ${n} numbers from ${fmt(Math.min(...values), 2)} to ${fmt(Math.max(...values), 2)}`});
  const g = canvas.getContext("2d"), scale = Math.max(...values.map(Math.abs)) || 1;
  values.forEach((v, i) => { g.fillStyle = diverging(v / scale); g.fillRect((i % across) * cell, Math.floor(i / across) * high, cell, high); });
  canvas.addEventListener("mousemove", e => {
    const i = Math.floor(e.offsetY / high) * across + Math.floor(e.offsetX / cell);
    if (i < n) canvas.title = `${label}, number ${i}: ${fmt(values[i], 4)} (full colour: ±${fmt(scale, 3)})`;
  });
  return canvas;
}

// a row of numbers over the keys as bars (below the line where negative); the token's own key in pink
function barsPicture(values, tokens, own, room, label) {
  const T = values.length, w = Math.max(3, Math.min(16, Math.floor(room / T))), high = 44;
  const top = Math.max(...values.map(Math.abs)) || 1, signed = values.some(v => v < 0), base = signed ? high / 2 : high;
  const canvas = el("canvas", {width: T * w, height: high, role: "img", "aria-label": `${label} over the ${T} keys`});
  const g = canvas.getContext("2d");
  g.fillStyle = "#f6f6f6"; g.fillRect(0, 0, T * w, high);
  values.forEach((v, k) => {
    const h = (signed ? high / 2 : high) * Math.abs(v) / top;
    g.fillStyle = k === own ? "#d4006a" : "#2a5db0";
    g.fillRect(k * w + 0.5, v >= 0 ? base - h : base, Math.max(1, w - 1), h);
  });
  canvas.addEventListener("mousemove", e => {
    const k = Math.floor(e.offsetX / w);
    if (k >= 0 && k < T) { canvas.title = `${label}, key ${k} “${tokens[k]}”: ${fmt(values[k], 4)}`; link(k); }
  });
  canvas.addEventListener("mouseleave", () => link(null));
  return canvas;
}

const strongest = (values, tokens, n = 3) => values.map((v, k) => [v, k]).sort((a, b) => b[0] - a[0]).slice(0, n)
  .map(([v, k]) => `“${tokens[k]}” ${fmt(v, 3)}`).join(" · ");

// the code line a stage names: file:line and the line itself; pressed, the function's source
function codeLine(line) {
  const button = el("button", {type: "button", class: "line", "aria-expanded": "false", "data-name": line.name, "data-line": line.line},
                    `${line.file.replace(/^minibert\//, "")}:${line.line}  ${line.text}`);
  const pre = el("pre", {class: "source", hidden: ""});
  button.addEventListener("click", async () => {
    if (pre.hidden && !pre.textContent) {
      try { const s = await fetchSource(line.name); pre.textContent = `# ${s.file}, line ${s.line}\n` + s.source; }
      catch (e) { pre.textContent = e.message; }
    }
    pre.hidden = !pre.hidden;
    button.setAttribute("aria-expanded", String(!pre.hidden));
  });
  return el("div", {}, button, pre);
}

function stageRow(id, what, under, picture, nums, line, extra = {}) {
  return el("div", {class: "stage " + (extra.class || ""), "data-stage": id, ...(extra.attrs || {})},
            el("div", {class: "what"}, what, el("small", {text: under})),
            el("div", {}, picture, el("div", {class: "nums", text: nums}), line ? codeLine(line) : ""));
}

function renderInside(p) {
  const out = body("panel-inside");
  const narrow = out.clientWidth < 720, room = Math.max(160, (out.clientWidth || 640) - (narrow ? 10 : 200));
  const select = el("select", {id: "inside-token", "aria-label": "the token followed"});
  const read = state.answer ? state.answer.batch.tokens : [];  // the token as written, and what the model read there where that differs
  p.tokens.forEach((t, i) => select.append(el("option", {value: i, text: `${i}: ${read[i] && read[i].original.piece !== t ? `${read[i].original.piece} (read as ${t})` : t}`})));
  select.value = String(p.position);
  select.addEventListener("change", () => lookInside(Number(select.value), state.layer));
  const token = el("label", {for: "inside-token", text: "token "});
  if (p.error) return out.append(el("p", {class: "pick"}, token, select), el("p", {class: "note", id: "inside-absent", text: p.error}));
  out.append(el("p", {class: "pick"}, token, select, " ",
    switches("layer", p.layers, p.layer, i => pickLayer(i, "#panel-inside")), " ", switches("head", p.heads, state.head, h => pickHead(h, "#panel-inside"))));
  const facts = [p.norm === "pre" ? "pre-LN: each sublayer normalizes its input, and the residual ends it" : "post-LN (BERT's order): each sublayer adds its residual, then normalizes"];
  if (p.shared.attention || p.shared.feed_forward) facts.push(`every depth applies the same ${p.shared.attention && p.shared.feed_forward ? "attention and feed-forward" : p.shared.attention ? "attention" : "feed-forward"} weights (ALBERT's sharing): layer ${p.layer} reruns layer 0's modules`);
  out.append(el("p", {class: "muted", id: "inside-facts", text: facts.join("; ") + "."}));
  const last = p.stages.length - 1;
  const vector = (s, i, what, under) => stageRow(s.id, what, under + (i === last ? ` · = output, hidden state ${p.layer + 1}` : ""),
    vectorPicture(s.values, room, what), stats(s.values), s.code,
    i === last ? {class: "output", attrs: {id: "inside-output", "data-values": JSON.stringify(s.values), "data-layer": p.layer, "data-position": p.position}} : {});
  if (p.projection) {
    out.append(stageRow("embedding", "embedding", `E = ${p.projection.embedding.length}, before the first layer`,
                        vectorPicture(p.projection.embedding, room, "embedding"), stats(p.projection.embedding)));
    out.append(vector(p.projection, -1, ...STAGE_WORDS.projection.map(w => typeof w === "function" ? w(p) : w)));
  }
  p.stages.forEach((s, i) => {
    if (s.id === "attention") return out.append(...attentionRows(p, s, room));
    const [what, under] = STAGE_WORDS[s.id];
    out.append(vector(s, i, what, under(p)));
  });
  out.append(codeRefs(p.code));
}

// the attention sublayer at the token, for the chosen head: q, k, v; its scores over the keys; the mask; the
// softmax; the weighted sum of the values
function attentionRows(p, s, room) {
  const h = Math.min(state.head, s.heads.length - 1), head = s.heads[h], T = p.tokens.length, me = p.position;
  const padding = s.real_keys.filter(real => !real).length;
  const rows = [el("h3", {text: `Attention, head ${h} of ${s.heads.length}` + (s.rotary ? " (q and k turned by position: rotary)" : "")})];
  for (const [part, words] of [["q", "query"], ["k", "key"], ["v", "value"]])
    rows.push(stageRow(`attention-${part}`, `${part}, the ${words}`, `head ${h}: ${head[part].length} numbers`, vectorPicture(head[part], room, `${words}, head ${h}`),
                       stats(head[part]), part === "q" ? (s.rotary ? s.code.rotary : s.code.qkv) : null, {class: "head"}));
  rows.push(stageRow("attention-scores", "scores q·k/√d", `over ${T} keys, ×${fmt(s.scale, 3)}`, barsPicture(head.scores, p.tokens, me, room, "score"),
                     `largest: ${strongest(head.scores, p.tokens)}`, s.code.scores, {class: "head"}));
  rows.push(stageRow("attention-mask", "the mask", padding ? `${padding} padding keys` : "no padding", el("span"),
                     padding ? `${padding} padding keys get the lowest float, so the softmax gives them exactly 0` :
                     "every key is a real token: nothing is masked (no causal mask: every token sees every other)", s.code.mask, {class: "head"}));
  rows.push(stageRow("attention-probs", "softmax", "each row sums to 1", barsPicture(head.probs, p.tokens, me, room, "probability"),
                     `most attended: ${strongest(head.probs, p.tokens)} · sum ${fmt(head.probs.reduce((a, b) => a + b, 0), 3)}`, s.code.softmax,
                     {class: "head", attrs: {"data-probs": JSON.stringify(head.probs)}}));
  rows.push(stageRow("attention-mix", "Σ p · v", `head ${h}'s mix of the values`, vectorPicture(head.mix, room, `head ${h}'s weighted sum`),
                     stats(head.mix), s.code.mix, {class: "head"}));
  return rows;
}
