// Attention (inside.py's attention panel): every layer × head as a small picture, any of which opens large;
// the large one as a heatmap with its colour scale, and as lines in bertviz's manner, the chosen token's lit.
// The layer, head and token are the inside-a-layer panel's too.

// white at 0, dark blue at `top` (the picture's largest weight); the colour grows as √weight, so that
// weights a tenth of the largest still show
const sequential = (w, top) => `rgba(20,55,150,${Math.min(1, Math.sqrt(w / (top || 1)))})`;

function paint(canvas, weights, cell, top) {
  const T = weights.length, g = canvas.getContext("2d");
  canvas.width = canvas.height = T * cell;
  g.fillStyle = "#fff"; g.fillRect(0, 0, T * cell, T * cell);
  weights.forEach((row, q) => row.forEach((w, k) => { g.fillStyle = sequential(w, top); g.fillRect(k * cell, q * cell, cell, cell); }));
}

function switches(label, count, chosen, pick) {
  const group = el("span", {class: "pick", role: "group", "aria-label": label}, label + " ");
  for (let i = 0; i < count; i++) {
    const b = el("button", {type: "button", "aria-pressed": String(i === chosen), "data-pick": label, text: i});
    b.addEventListener("click", () => pick(i));
    group.append(b);
  }
  return group;
}

// the layer and head both panels show; a new layer asks for its inside, a new head is already there
function pickLayer(layer, from) {
  state.layer = layer;
  renderAttention(state.answer.attention);
  lookInside(state.position, layer).then(() => document.querySelector(`${from} [data-pick=layer][aria-pressed=true]`)?.focus());
}
function pickHead(head, from) {
  state.head = head;
  renderAttention(state.answer.attention);
  renderInside(state.inside);
  document.querySelector(`${from} [data-pick=head][aria-pressed=true]`)?.focus();
}

// the colour scale: a bar from 0 to the largest weight, ticked where the colour is a quarter, half and
// three quarters of full (weights of 1/16, 1/4 and 9/16 of the largest)
function colourScale(top) {
  const W = 160, bar = el("canvas", {width: W, height: 10, "aria-hidden": "true"}), g = bar.getContext("2d");
  for (let x = 0; x < W; x++) { g.fillStyle = sequential((x / (W - 1)) ** 2 * top, top); g.fillRect(x, 0, 1, 10); }
  const ticks = el("div", {style: `position:relative; width:${W}px; height:14px; font-size:10px`});
  for (const f of [0, 0.25, 0.5, 0.75, 1]) ticks.append(el("span", {style: `position:absolute; left:${f * W - 8}px`, text: fmt(f * f * top, 2)}));
  return el("div", {class: "scale", id: "colour-scale", "data-top": top}, "weight", el("div", {}, bar, ticks),
            el("span", {class: "muted", text: `(colour ∝ √weight; full at this head's largest, ${fmt(top, 3)})`}));
}

function heatmap(a, weights, top, room) {
  const T = a.tokens.length, q = state.position, cell = Math.max(4, Math.min(14, Math.floor(room / T)));
  const cols = el("div", {class: "cols", "aria-hidden": "true"});
  a.tokens.forEach((t, k) => cols.append(el("span", {style: `width:${cell}px`, "data-link": k, text: t})));
  const rows = el("div", {class: "rows", role: "group", "aria-label": "query token"});
  a.tokens.forEach((t, i) => {
    const b = el("button", {type: "button", style: `height:${cell}px; font-size:${Math.min(10, cell)}px`, "aria-pressed": String(i === q),
                            tabindex: i === q ? "0" : "-1", "data-query": i, "data-link": i, title: `query ${i}: ${t}`, text: t});
    b.addEventListener("click", () => lookInside(i, state.layer, `[data-query="${i}"]`));
    b.addEventListener("keydown", e => {
      const to = {ArrowDown: i + 1, ArrowUp: i - 1}[e.key];
      if (to === undefined || to < 0 || to >= T) return;
      e.preventDefault(); lookInside(to, state.layer, `[data-query="${to}"]`);
    });
    rows.append(b);
  });
  const canvas = el("canvas", {id: "heatmap", role: "img", "data-layer": state.layer, "data-head": state.head,
                               "aria-label": `attention of layer ${state.layer}, head ${state.head}, ${T} by ${T}; the marked query ${a.tokens[q]} ` +
                                 `attends most to ${a.tokens[weights[q].indexOf(Math.max(...weights[q]))]}`});
  paint(canvas, weights, cell, top);
  const cells = el("div", {class: "cells", style: `width:${T * cell}px`}, canvas, el("div", {class: "query", style: `top:${q * cell - 2}px; height:${cell}px`}));
  a.tokens.forEach((t, k) => cells.append(el("div", {class: "col", "data-link": k, style: `left:${k * cell}px; width:${cell}px`})));
  canvas.addEventListener("mousemove", e => {  // the cell under the pointer, in words, and its key lit in every panel
    const k = Math.floor(e.offsetX / cell), i = Math.floor(e.offsetY / cell);
    if (k < 0 || i < 0 || k >= T || i >= T) return;
    canvas.title = `query “${a.tokens[i]}” (${i}) → key “${a.tokens[k]}” (${k}): weight ${fmt(weights[i][k])}`;
    link(k);
  });
  canvas.addEventListener("mouseleave", () => link(null));
  return el("figure", {style: "margin:0"}, el("div", {class: "heat"}, el("div"), cols, rows, cells), colourScale(top));
}

// bertviz's line view: the tokens attending on the left, those attended to on the right, a line between
// for each weight (the darker, the more); the chosen token's lines lit, the others faint
function lines(a, weights, top) {
  const T = a.tokens.length, q = state.position, step = 14, W = 320, left = 115, right = 205, H = T * step + 8;
  const holder = el("div"); holder.innerHTML = "<svg></svg>";  // the HTML parser gives an <svg> its namespace
  const svg = holder.firstChild, ns = svg.namespaceURI;
  for (const [k, v] of Object.entries({id: "lines", width: W, height: H, role: "img", "data-layer": state.layer, "data-head": state.head,
                                        "aria-label": `lines of layer ${state.layer}, head ${state.head}: “${a.tokens[q]}” lit`})) svg.setAttribute(k, v);
  const add = (tag, attrs, text) => { const n = document.createElementNS(ns, tag); for (const k in attrs) n.setAttribute(k, attrs[k]); if (text !== undefined) n.textContent = text; svg.append(n); return n; };
  const y = i => 8 + i * step + step / 2;
  weights.forEach((row, i) => row.forEach((w, k) => {
    const lit = i === q;
    if (w < (lit ? 0.005 : 0.03)) return;
    add("line", {x1: left + 4, y1: y(i), x2: right - 4, y2: y(k), stroke: lit ? "#d4006a" : "#2a5db0", "stroke-width": lit ? 2.5 : 1.5,
                 "stroke-opacity": (lit ? 1 : 0.35) * Math.min(1, w / top), ...(lit ? {"data-key": k, "data-weight": w} : {})});
  }));
  a.tokens.forEach((t, i) => {
    for (const [x, anchor, side] of [[left, "end", "query"], [right, "start", "key"]]) {
      const text = add("text", {x, y: y(i) + 4, "text-anchor": anchor, class: i === q ? "picked" : "", "data-link": i, "data-side": side}, t.slice(0, 14));
      text.addEventListener("click", () => lookInside(i, state.layer));
    }
  });
  return svg;
}

// every layer × head, small; pressing one opens it large
function everyHead(a) {
  const layers = a.weights.length, heads = a.weights[0].length, T = a.tokens.length, cell = Math.max(1, Math.floor(72 / T));
  const grid = el("div", {class: "every", id: "every-head", style: `grid-template-columns: auto repeat(${heads}, auto)`});
  grid.append(el("span"), ...Array.from({length: heads}, (_, h) => el("span", {class: "label", text: `head ${h}`})));
  a.weights.forEach((layer, l) => {
    grid.append(el("span", {class: "label", text: `layer ${l}`}));
    layer.forEach((w, h) => {
      const c = el("canvas", {"aria-hidden": "true"});
      paint(c, w, cell, Math.max(...w.flat()));
      const b = el("button", {type: "button", "aria-pressed": String(l === state.layer && h === state.head), "data-layer": l, "data-head": h,
                              "aria-label": `open layer ${l}, head ${h}`}, c);
      b.addEventListener("click", () => {
        const newLayer = l !== state.layer;
        state.head = h;
        if (newLayer) pickLayer(l, "#panel-attention");
        else { renderAttention(a); renderInside(state.inside); }
        document.querySelector(`#every-head [data-layer="${l}"][data-head="${h}"]`)?.focus();
      });
      grid.append(b);
    });
  });
  return el("div", {class: "wide"}, grid);
}

function renderAttention(a) {
  const out = body("panel-attention"), T = a.tokens.length, layers = a.weights.length, heads = a.weights[0].length;
  state.position = Math.min(state.position ?? 0, T - 1);
  state.layer = Math.min(state.layer, layers - 1); state.head = Math.min(state.head, heads - 1);
  const weights = a.weights[state.layer][state.head], top = Math.max(...weights.flat()), q = state.position;
  out.append(el("p", {class: "pick"}, switches("layer", layers, state.layer, i => pickLayer(i, "#panel-attention")), " ",
                                      switches("head", heads, state.head, h => pickHead(h, "#panel-attention"))));
  out.append(el("p", {class: "muted", text: `Over ${a.shown}. Every layer and head (press one to open it):`}), everyHead(a));
  const row = weights[q].map((w, k) => [w, k]).sort((x, y) => y[0] - x[0]).slice(0, 3);
  out.append(el("p", {id: "attends-most"}, `Layer ${state.layer}, head ${state.head}: “${a.tokens[q]}” (${q}) attends most to ` +
    row.map(([w, k]) => `“${a.tokens[k]}” ${fmt(w, 2)}`).join(", ") + ". Rows: the token attending; columns: the token attended to; each row sums to 1."));
  const room = Math.min(720, Math.max(200, (out.clientWidth || 640) - 90));
  out.append(el("div", {class: "views"}, heatmap(a, weights, top, room), lines(a, weights, top)), codeRefs(a.code));
}
