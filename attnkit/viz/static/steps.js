// Decoding step by step. D.kind "ar": a walk per menu entry (greedy, then the walks forced on the command line),
// a row per step (the decoder's input, the candidates, the token written); a click on a candidate not written
// shows its continuation (D.alternatives["step,token"]: the walk forced to it there, greedy after). D.kind "nat":
// the length classifier's lengths, then each length tried pass by pass (masked positions, tokens written).
const piece = (D, i) => (D.pieces[i] === undefined ? `#${i}` : D.pieces[i]);
const pct = p => fmt(p, 3);

function tokenSpan(text, cls) { return el("span", {class: `tk ${cls || ""}`}, text); }

function arPage(D) {
  const menu = $("walk");
  D.walks.forEach((w, i) => menu.appendChild(el("option", {value: i}, w.name)));
  menu.onchange = () => draw(+menu.value);

  function candidates(t, s, greedy) {  // only the greedy walk's candidates have a continuation stored
    const box = el("span", {class: "cands"});
    s.top.forEach(([id, p]) => {
      const b = el("button", {class: `tok${id === s.c ? " sel" : ""}`, "data-step": t, "data-token": id,
                              title: `p = ${pct(p)}`});
      const bar = el("span", {class: "wbar"}); bar.style.width = `${Math.round(40 * p)}px`;
      b.append(`${piece(D, id)} `, el("span", {class: "num"}, pct(p)), " ", bar);
      const alt = greedy && D.alternatives[`${t},${id}`] !== undefined;
      if (alt) b.onclick = () => whatIf(t, id);
      else b.disabled = true;
      box.appendChild(b);
    });
    return box;
  }

  function draw(k) {
    const w = D.walks[k], body = $("steps").tBodies[0];
    $("walk-text").textContent = `translation: ${w.text}`;
    body.replaceChildren();
    const inputs = [D.start, ...w.steps.map(s => s.c)];
    w.steps.forEach((s, t) => {
      const tr = body.insertRow(); tr.dataset.step = t;
      if (s.f) tr.classList.add("forced");
      tr.insertCell().textContent = t + 1;
      const inp = tr.insertCell();
      inputs.slice(0, t + 1).forEach((id, j) => inp.appendChild(tokenSpan(piece(D, id), j === t ? "new" : "")));
      tr.insertCell().appendChild(candidates(t, s, k === 0));
      const out = tr.insertCell();
      out.appendChild(tokenSpan(piece(D, s.c), "out"));
      out.append(s.f ? ` forced (p = ${pct(s.p)})` : ` ${pct(s.p)}`);
    });
    $("whatif-box").replaceChildren();
  }

  function whatIf(t, id) {
    const alt = D.alternatives[`${t},${id}`], free = D.walks[0].steps, box = $("whatif-box");
    const later = alt.steps.slice(1), differ = later.filter((s, j) => !free[t + 1 + j] || free[t + 1 + j].c !== s.c);
    const tbl = el("table", {class: "chain", id: "whatif-steps"}), head = tbl.createTHead().insertRow();
    ["step", "greedy wrote", "this walk writes", "p"].forEach(h => head.appendChild(el("th", {}, h)));
    const body = tbl.createTBody();
    const n = Math.max(alt.steps.length, free.length - t);
    for (let j = 0; j < n; j++) {
      const s = alt.steps[j], g = free[t + j], tr = body.insertRow();
      tr.insertCell().textContent = t + j + 1;
      tr.insertCell().textContent = g ? piece(D, g.c) : "";
      const c = tr.insertCell(); c.textContent = s ? piece(D, s.c) : "";
      tr.insertCell().textContent = s ? pct(s.p) : "";
      if (s && s.f) tr.classList.add("forced");
      else if (s && (!g || g.c !== s.c)) tr.classList.add("differs");
    }
    box.replaceChildren(
      el("p", {class: "lab", id: "whatif-summary"}, `step ${t + 1} forced to ${piece(D, id)} (p = ` +
         `${pct(alt.steps[0].p)}): ${differ.length} of the ${later.length} later steps write another token than ` +
         `the greedy walk`),
      el("p", {class: "lab"}, `translation: ${alt.text}`), tbl);
  }
  draw(0);
}

function natPage(D) {
  const lengths = $("lengths");
  if (D.lengths.length) {
    const tbl = el("table", {class: "chain", id: "length-table"}), head = tbl.createTHead().insertRow();
    ["length", "probability (length classifier)", ""].forEach(h => head.appendChild(el("th", {}, h)));
    const body = tbl.createTBody();
    // the classes in the classifier's order: the first D.candidates.length of them were each decoded
    D.lengths.forEach(([t, clamped, p], k) => {  // S + the class's offset, and the length decoded (clamped)
      const tr = body.insertRow(), bar = el("span", {class: "wbar"});
      bar.style.width = `${Math.round(120 * p)}px`;
      tr.insertCell().textContent = t === clamped ? t : `${t} \u2192 ${clamped} (clamped)`;
      const c = tr.insertCell(); c.append(el("span", {class: "num"}, pct(p)), " ", bar);
      tr.insertCell().textContent = k >= D.candidates.length ? "" : (k === D.chosen ? "tried, kept" : "tried");
      if (k === D.chosen) tr.classList.add("sel");
    });
    lengths.append(el("p", {class: "note"}, "The length classifier reads the encoder's output and gives each " +
      "length a probability; the most likely lengths are each decoded, the best-scoring translation kept."), tbl);
  } else {
    lengths.append(el("p", {class: "note"}, "This model writes one long row and cuts it at the first END."));
  }
  const menu = $("cand");
  D.candidates.forEach((c, i) => menu.appendChild(el("option", {value: i},
    `${c.length} tokens${i === D.chosen ? " (kept)" : ""}`)));
  menu.value = D.chosen;
  $("passes").closest(".scroll").before(legend("a token written on that pass: its probability", "0", "1"),
    el("p", {class: "note"}, `Hatched: a position given the start token ${piece(D, D.mask)} (masked, to be written); ` +
       "the other positions keep their token."));
  menu.onchange = () => draw(+menu.value);

  function draw(k) {
    const c = D.candidates[k], body = $("passes").tBodies[0];
    $("cand-text").textContent = `${c.length} tokens, mean log-probability ${fmt(c.score)}: ${c.text}`;
    body.replaceChildren();
    const head = body.insertRow(); head.appendChild(el("th", {}, "position"));
    for (let i = 0; i < c.length; i++) head.appendChild(el("th", {}, String(i + 1)));
    let before = Array(c.length).fill(D.mask);
    c.passes.forEach((p, n) => {
      const masked = new Set(p.masked), inp = body.insertRow(), out = body.insertRow();
      inp.dataset.pass = n; out.dataset.pass = n;
      inp.className = "input"; out.className = "output";
      inp.appendChild(el("th", {}, n === 0 ? `pass 1 input: a row of start tokens` :
        `pass ${n + 1} input: ${masked.size} re-masked`));
      out.appendChild(el("th", {}, `pass ${n + 1} writes`));
      for (let i = 0; i < c.length; i++) {
        const a = inp.insertCell();
        a.textContent = masked.has(i) ? piece(D, D.mask) : piece(D, before[i]);
        if (masked.has(i)) a.className = "masked-in";
        const b = out.insertCell();
        b.textContent = piece(D, p.tokens[i]);
        b.title = `p = ${pct(p.probs[i])}`;
        if (masked.has(i)) { b.className = "written"; b.style.background = shade(p.probs[i]); b.style.color = ink(p.probs[i]); }
      }
      before = p.tokens;
    });
  }
  draw(D.chosen);
}

start(D => {
  $("title").textContent = D.title;
  if (D.notes) $("notes").textContent = D.notes;
  const src = el("p", {class: "lab", id: "source"}, "source (the encoder's input): ");
  D.source.forEach(t => src.appendChild(tokenSpan(t)));
  $("notes").after(src);
  (D.kind === "nat" ? natPage : arPage)(D);
});
