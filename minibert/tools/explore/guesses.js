// What each head guessed at the masked positions (guesses.py): the masked-LM head's top 5, ELECTRA's
// generator and discriminator, DistilBERT's teacher beside its student.

function renderMLM(m) {
  const out = body("panel-mlm");
  const scored = m.positions.filter(p => p.right !== undefined), right = scored.filter(p => p.right).length;
  if (scored.length) out.append(el("p", {id: "mlm-accuracy", "data-accuracy": m.accuracy},
    `${right} of ${scored.length} top guesses are the original token (${pct(m.accuracy)}); ` +
    `the MLM loss, the mean of the last column: ${fmt(scored.reduce((s, p) => s + p.loss, 0) / scored.length)}.`));
  const table = el("table", {}, el("tr", {}, ...["position", "original", "shown", "top 5 (probability)", "best guess", "−log P(original)"].map(h => el("th", {text: h}))));
  for (const p of m.positions) {
    const list = el("ol", {class: "topk"});
    for (const c of p.top) list.append(el("li", {"data-token": c.id, "data-prob": c.prob}, `${shown(c)} ${fmt(c.prob)}`));
    table.append(el("tr", {"data-position": p.position, "data-link": p.position},
      el("td", {class: "num", text: p.position}), el("td", {text: p.original ? shown(p.original) : "(yours)"}),
      el("td", {text: shown(p.shown)}), el("td", {}, list), el("td", {text: p.right === undefined ? "–" : (p.right ? "✓ right" : "✗ wrong")}),
      el("td", {class: "num", "data-loss": p.loss ?? "", text: fmt(p.loss)})));
  }
  out.append(m.positions.length ? el("div", {class: "wide"}, table) : el("p", {text: "No position was chosen this draw: draw again."}));
  out.append(codeRefs(m.code));
}

function renderElectra(e) {
  const out = body("panel-electra");
  const s = e.tally;
  if (s) out.append(el("p", {id: "electra-tally", "data-replaced": s.replaced, "data-caught": s.caught, "data-false-alarms": s.false_alarms, "data-originals": s.originals},
    el("strong", {text: `${s.replaced} replaced; the discriminator caught ${s.caught}, missed ${s.replaced - s.caught}; ` +
                        `${s.false_alarms} false alarm${s.false_alarms === 1 ? "" : "s"} among ${s.originals} originals`}),
    " (a call is “replaced” where P(replaced) > 0.5; a sample equal to the original counts as original)."));
  if (e.yours) out.append(el("p", {id: "electra-yours"}, "The generator filled your [MASK]s and the discriminator read the result. " +
    "What you hid is yours to know, so no call is right or wrong here, and there is no loss."));
  const truth = e.played && !e.yours;
  const head = ["position", "original", e.played ? "shown to the discriminator" : "", e.played ? "generator: P(sample) · its top 5" : "",
                truth ? "really replaced?" : "", e.played ? "P(replaced)" : "", "P(replaced), text as written"].filter(Boolean);
  const table = el("table", {}, el("tr", {}, ...head.map(h => el("th", {text: h}))));
  for (const t of e.tokens) {
    const cells = [el("td", {class: "num", text: t.position}), el("td", {text: shown(t.original)})];
    if (e.played) {
      const g = t.generator, called = t.p_replaced > 0.5;
      cells.push(el("td", {text: (t.sampled ? "⚄ " : "") + shown(t.shown)}),
                 el("td", {class: "muted"}, g ? `${short(g.p_sample)} · ` + g.top.map(c => `${shown(c)} ${short(c.prob)}`).join(", ") : ""));
      if (truth) cells.push(el("td", {text: t.replaced ? "yes, replaced" : "no, original"}));
      const call = truth ? (called ? (t.replaced ? "(caught)" : "(false alarm)") : t.replaced ? "(missed)" : "") : (t.sampled ? (called ? "says replaced" : "says original") : "");
      cells.push(el("td", {class: "num", "data-prob": t.p_replaced}, el("span", {class: "bar", style: `width:${60 * t.p_replaced}px`}), `${fmt(t.p_replaced)} ${call}`));
    }
    cells.push(el("td", {class: "num", "data-prob-written": t.p_written, text: fmt(t.p_written)}));
    table.append(el("tr", {"data-position": t.position, "data-link": t.position, "data-replaced": t.replaced ?? ""}, ...cells));
  }
  out.append(el("div", {class: "wide"}, table));
  const l = e.losses;
  if (l) out.append(el("p", {id: "electra-losses", "data-mlm": l.mlm, "data-rtd": l.rtd, "data-rtd-weight": l.rtd_weight},
    `loss = ${l.mlm_weight} × generator MLM ${fmt(l.mlm)} + ${l.rtd_weight} × detection ${fmt(l.rtd)} = ${fmt(l.mlm_weight * l.mlm + l.rtd_weight * l.rtd)}` +
    " (detection is a mean over every token, the generator's MLM over the masked ones only: the weight evens them out)"));
  out.append(codeRefs(e.code));
}

function renderDistil(d) {
  const out = body("panel-distil"), T = d.temperature, many = d.student_depth > 1;
  out.append(el("p", {text: `The student (${d.student_depth} layer${many ? "s" : ""}) began as ${many ? "copies" : "a copy"} of the teacher's ` +
    `layer${many ? "s" : ""} ${d.teacher_layers.join(", ")} (of its ${d.teacher_depth}). The soft-target loss compares the teacher's and the ` +
    `student's distributions softened at T = ${T} (logits ÷ T before the softmax), which lifts the teacher's second and third choices.`}));
  const l = d.losses;
  if (l) out.append(el("p", {id: "distil-losses", "data-soft": l.soft, "data-mlm": l.mlm, "data-cosine": l.cosine, "data-total": l.total},
    `loss = ${l.soft_weight} × soft targets ${fmt(l.soft)} + ${l.mlm_weight} × MLM ${fmt(l.mlm)} + ${l.cosine_weight} × cosine ${fmt(l.cosine)} = ${fmt(l.total)}`));
  // one card per masked position: the teacher's top 5 at T = 1 and at T, bars scaled to each column's largest, then the student's
  const bar = (p, top, cls = "") => el("span", {class: "bar " + cls, style: `width:${(40 * p / top).toFixed(1)}px`});
  const cards = el("div", {class: "cards"});
  for (const p of d.positions) {
    const top = key => Math.max(...p.teacher.map(t => t[key])), held = key => p.teacher.reduce((s, t) => s + t[key], 0);
    const table = el("table", {}, el("tr", {}, el("th", {text: "teacher"}), el("th", {text: "T = 1"}), el("th", {text: `T = ${T}`}),
                                     el("th", {text: "student"})));
    for (const t of p.teacher) table.append(el("tr", {"data-token": t.id, "data-plain": t.plain, "data-soft": t.soft, "data-student": t.student},
      el("td", {class: "tk", text: shown(t)}), el("td", {class: "num"}, bar(t.plain, top("plain")), short(t.plain)),
      el("td", {class: "num"}, bar(t.soft, top("soft")), short(t.soft)), el("td", {class: "num"}, bar(t.student, top("student"), "student"), short(t.student))));
    table.append(el("tr", {class: "muted", "data-rest": "top"}, el("td", {text: "these 5"}), ...["plain", "soft", "student"].map(k => el("td", {class: "num", text: pct(held(k))}))));
    table.append(el("tr", {class: "muted", "data-rest": "others"}, el("td", {text: `the other ${(d.vocabulary - 5).toLocaleString()}`}),
      ...["plain", "soft", "student"].map(k => el("td", {class: "num", text: pct(1 - held(k))}))));
    cards.append(el("div", {class: "card", "data-position": p.position, "data-link": p.position},
      el("strong", {text: `position ${p.position}` + (p.original ? `, hiding “${shown(p.original)}”` : "")}), table,
      el("div", {class: "muted"}, `the student's own top 5 at T = ${T}: ` + p.student.map(t => `${shown(t)} ${short(t.soft)}`).join(", "))));
  }
  out.append(el("p", {class: "muted", text: `Per masked position: the teacher's five likeliest tokens at T = 1 and at T = ${T}, and the student's ` +
    `probability for each at T; softening moves mass from these five to the other ${(d.vocabulary - 5).toLocaleString()} tokens.`}), cards, codeRefs(d.code));
}
