// The lecture view: one layer, one head, one query token of a real model, and the lecture's chain
// with its numbers: q^i and every k^j -> alpha_ij = q^i . k^j * scale -> alpha'_ij = softmax_j ->
// b^i = sum_j alpha'_ij v^j -> the heads merged by W^o into o^i.
// Every number is computed here from the stored q, k, v (exact float32), in float64.

// The chain for layer n, head h, query i: alpha (LK), alpha' (LK), b (DV), and the keys it may see.
function lectureChain(D, n, h, i) {
  const DH = D.q.shape[3], DV = D.v.shape[3], LK = D.k.shape[2];
  const q = vec(D.q, n, h, i), alpha = new Float64Array(LK), live = [];
  for (let j = 0; j < LK; j++) {
    const k = vec(D.k, n, h, j);
    let s = 0; for (let d = 0; d < DH; d++) s += q[d] * k[d];
    alpha[j] = s * D.scale;
    if (!D.masks || get(D.masks, n, i, j) > 0.5) live.push(j);
  }
  const p = new Float64Array(LK), b = new Float64Array(DV);
  if (live.length) {  // a query with no key to see keeps alpha' = 0 and b = 0
    const m = Math.max(...live.map(j => alpha[j]));
    let z = 0; for (const j of live) { p[j] = Math.exp(alpha[j] - m); z += p[j]; }
    for (const j of live) p[j] /= z;
  }
  for (let j = 0; j < LK; j++) {
    const v = vec(D.v, n, h, j);
    for (let d = 0; d < DV; d++) b[d] += p[j] * v[d];
  }
  return {q, alpha, p, b, live};
}

function main(D) {
  const [NL, NH, LQ, DH] = D.q.shape, LK = D.k.shape[2], DO = D.o.shape[2];
  const Q = D.queries, K = D.keys, scale = D.scale;
  const st = {layer: 0, head: 0, query: D.pin, key: null};
  $("title").textContent = D.title;
  if (D.notes) $("notes").textContent = D.notes;

  D.layer_names.forEach((n, i) => $("layer").appendChild(el("option", {value: i}, n)));
  for (let h = 0; h < NH; h++) $("head").appendChild(el("option", {value: h}, `head ${h + 1}`));
  $("layer").onchange = e => { st.layer = +e.target.value; st.key = null; draw(); };
  $("head").onchange = e => { st.head = +e.target.value; st.key = null; draw(); };
  Q.forEach((t, i) => {
    const b = el("button", {class: "tok", "data-i": i}, t);
    b.onclick = () => { st.query = i; st.key = null; draw(); };
    $("tokens").appendChild(b);
  });

  const allowed = (n, i, j) => !D.masks || get(D.masks, n, i, j) > 0.5;
  const chain = (n, h, i) => lectureChain(D, n, h, i);

  // A vector as a row of coloured cells (numbers inside when it is short, on hover otherwise).
  function strip(values, vmax, cls) {
    const box = el("span", {class: `strip ${cls || ""}`}), small = values.length <= 8;
    const w = small ? 44 : Math.max(2, Math.min(12, Math.floor(420 / values.length)));
    values.forEach((x, d) => {
      const c = el("span", {title: `[${d}] ${fmt(x)}`, "data-v": x});
      c.style.background = diverge(x, vmax); c.style.width = `${w}px`;
      if (small) { c.textContent = fmt(x, 2); c.style.color = Math.abs(x) > 0.55 * vmax ? "#fff" : "#222"; }
      box.appendChild(c);
    });
    return box;
  }
  const absMax = arrs => Math.max(1e-9, ...arrs.map(a => Math.max(...Array.from(a, Math.abs))));
  const numbers = (values, id) => {
    const box = el("div", {class: "nums", id});
    values.forEach(x => box.appendChild(el("span", {class: "num"}, fmt(x))));
    return box;
  };
  const bar = (x, vmax) => {
    const b = el("span", {class: "wbar"}); b.style.width = `${Math.round(80 * x / (vmax || 1))}px`; return b;
  };
  const td = (tr, content, cls) => {
    const c = tr.insertCell(); if (cls) c.className = cls;
    if (content instanceof Node) c.appendChild(content); else if (content !== undefined) c.textContent = content;
    return c;
  };

  function draw() {
    const n = st.layer, h = st.head, i = st.query, c = chain(n, h, i);
    document.querySelectorAll("#tokens button").forEach(b => b.classList.toggle("sel", +b.dataset.i === i));
    $("layer").value = n; $("head").value = h;
    const where = `${D.layer_names[n]}, head ${h + 1}, query ${i + 1} "${Q[i]}"`;
    $("where").textContent = where;
    if (st.key === null) st.key = c.live.length ? c.live.reduce((a, j) => (c.p[j] > c.p[a] ? j : a), c.live[0]) : 0;

    // 1-2: the query against every key, the scores and the softmax
    const ks = Array.from({length: LK}, (_, j) => vec(D.k, n, h, j)), qk = absMax([c.q, ...ks]);
    $("qrow").replaceChildren(el("span", {class: "lab"}, `q^${i + 1} (${Q[i]})`), strip(c.q, qk));
    const t1 = el("table", {class: "chain", id: "scores"}), hd = t1.createTHead().insertRow();
    ["key j", "k^j", "q^i \u00b7 k^j", `\u03b1_ij = q^i\u00b7k^j \u00d7 ${fmt(scale, 4)}`, "\u03b1'_ij = softmax", ""]
      .forEach(x => hd.appendChild(el("th", {}, x)));
    const pmax = Math.max(...c.p);
    const tb1 = t1.createTBody();
    for (let j = 0; j < LK; j++) {
      const tr = tb1.insertRow(); tr.dataset.j = j;
      if (j === st.key) tr.className = "sel";
      const live = allowed(n, i, j);
      td(tr, `${j + 1} ${K[j]}`, "lab");
      td(tr, strip(ks[j], qk));
      td(tr, live ? fmt(c.alpha[j] / scale) : "masked", "num dot");
      td(tr, live ? fmt(c.alpha[j]) : "masked", "num alpha");
      td(tr, fmt(c.p[j]), "num alphap");
      td(tr, bar(c.p[j], pmax));
      tr.onclick = () => { st.key = j; draw(); };
    }
    $("scores-box").replaceChildren(t1);
    $("scores-legend").replaceChildren(legend("vector entries", fmt(-qk, 2),  fmt(qk, 2),
      `linear-gradient(to right, ${diverge(-1, 1)}, #fff, ${diverge(1, 1)})`));

    // the dot product of the chosen key, term by term
    const j = st.key, k = ks[j], prod = Array.from(c.q, (x, d) => x * k[d]);
    $("dot-title").textContent = `q^${i + 1} \u00b7 k^${j + 1} (${Q[i]} \u00b7 ${K[j]}), term by term ` +
      `(click a row above to pick another key)`;
    $("dot-box").replaceChildren(
      el("div", {class: "lab"}, `q^${i + 1}`), numbers(c.q, "dot-q"),
      el("div", {class: "lab"}, `k^${j + 1}`), numbers(k, "dot-k"),
      el("div", {class: "lab"}, "products"), numbers(prod, "dot-prod"),
      el("div", {class: "lab"}, `sum = ${fmt(c.alpha[j] / scale)};  \u00d7 ${fmt(scale, 4)} (1/\u221a${DH}) = ` +
         `\u03b1 = ${fmt(c.alpha[j])}`));

    // 3: the values weighted by alpha', summed into b^i
    const vs = Array.from({length: LK}, (_, j2) => vec(D.v, n, h, j2));
    const weighted = vs.map((v, j2) => Array.from(v, x => x * c.p[j2]));
    const vm = absMax(vs), wm = absMax([...weighted, c.b]);  // v^j on one scale, the weighted ones and b^i on another
    const t2 = el("table", {class: "chain", id: "values"}), hd2 = t2.createTHead().insertRow();
    ["key j", "\u03b1'_ij", "v^j", "\u03b1'_ij v^j"].forEach(x => hd2.appendChild(el("th", {}, x)));
    const tb2 = t2.createTBody();
    for (let j2 = 0; j2 < LK; j2++) {
      const tr = tb2.insertRow(); tr.dataset.j = j2;
      td(tr, `${j2 + 1} ${K[j2]}`, "lab"); td(tr, fmt(c.p[j2]), "num");
      td(tr, strip(vs[j2], vm)); td(tr, strip(weighted[j2], wm));
    }
    const last = tb2.insertRow(); last.className = "sum";
    td(last, `b^${i + 1} = \u03a3`, "lab"); td(last, fmt(c.p.reduce((a, x) => a + x, 0)), "num");
    td(last, ""); td(last, strip(c.b, wm));
    $("values-box").replaceChildren(t2, el("div", {class: "lab"}, `b^${i + 1}, head ${h + 1}:`), numbers(c.b, "bvec"));

    // 4: every head's b^i, merged by W^o into o^i
    const share = Array.from({length: NH}, (_, h2) => get(D.share, n, h2, i)), smax = Math.max(...share);
    const bs = Array.from({length: NH}, (_, h2) => (h2 === h ? c.b : chain(n, h2, i).b)), bm = absMax(bs);
    const t3 = el("table", {class: "chain", id: "heads-table"}), hd3 = t3.createTHead().insertRow();
    ["head", `b^{${i + 1},h}`, "|W^o_h b^{i,h}|: what the head adds to o^i", ""]
      .forEach(x => hd3.appendChild(el("th", {}, x)));
    const tb3 = t3.createTBody();
    for (let h2 = 0; h2 < NH; h2++) {
      const tr = tb3.insertRow(); tr.dataset.h = h2;
      if (h2 === h) tr.className = "sel";
      td(tr, `head ${h2 + 1}`, "lab"); td(tr, strip(bs[h2], bm)); td(tr, fmt(share[h2]), "num"); td(tr, bar(share[h2], smax));
      tr.onclick = () => { st.head = h2; st.key = null; draw(); };
    }
    const o = vec(D.o, n, i), shown = Math.min(DO, 12);
    $("merge-box").replaceChildren(t3,
      el("div", {class: "lab"}, `o^${i + 1} = W^o [b^{${i + 1},1}; \u2026; b^{${i + 1},${NH}}]${D.bias ? " + c" : ""}  (${DO} numbers):`),
      strip(o, absMax([o])),
      el("div", {class: "lab"}, shown < DO ? `first ${shown} of ${DO}:` : ""), numbers(Array.from(o).slice(0, shown), "ovec"));
  }
  draw();
}
start(main);
