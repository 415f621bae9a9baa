// The lecture view: one layer, one head, one query token of a real model, and the lecture's chain
// with its numbers: q^i and every k^j -> alpha_ij = q^i . k^j * scale -> alpha'_ij = softmax_j ->
// b^i = sum_j alpha'_ij v^j -> the heads merged by W^o into o^i; then every query at once as the
// lecture's matrices (lecture_matrices.js). Every number is computed here from the stored q, k, v
// (exact float32), in float64. D.layers[n]: {q (H, Lq, dh), k (H, Lk, dh), v (H, Lk, dv), o (Lq, d_out),
// share (H, Lq), mask (Lq, Lk) or null, scale, merge (has W^o), bias, and for small examples a, wq, wk, wv, wo}.

// The chain for layer L, head h, query i: alpha (LK), alpha' (LK), b (DV), and the keys it may see.
function lectureChain(L, h, i) {
  const DH = L.q.shape[2], DV = L.v.shape[2], LK = L.k.shape[1];
  const q = vec(L.q, h, i), alpha = new Float64Array(LK), live = [];
  for (let j = 0; j < LK; j++) {
    const k = vec(L.k, h, j);
    let s = 0; for (let d = 0; d < DH; d++) s += q[d] * k[d];
    alpha[j] = s * L.scale;
    if (!L.mask || get(L.mask, i, j) > 0.5) live.push(j);
  }
  const p = new Float64Array(LK), b = new Float64Array(DV);
  if (live.length) {  // a query with no key to see keeps alpha' = 0 and b = 0
    const m = Math.max(...live.map(j => alpha[j]));
    let z = 0; for (const j of live) { p[j] = Math.exp(alpha[j] - m); z += p[j]; }
    for (const j of live) p[j] /= z;
  }
  for (let j = 0; j < LK; j++) {
    const v = vec(L.v, h, j);
    for (let d = 0; d < DV; d++) b[d] += p[j] * v[d];
  }
  return {q, alpha, p, b, live};
}

// How a layer scales its scores, in words: "no scaling" (the lecture's A = K^T Q), "x 1/sqrt(d)" or the number.
function scaleWords(L) {
  const DH = L.q.shape[2];
  if (L.scale === 1) return {short: "", long: "no scaling: \u03b1_ij = q^i \u00b7 k^j, as in the lecture's A = K^T Q"};
  const root = Math.abs(L.scale - 1 / Math.sqrt(DH)) < 1e-7 ? ` (1/\u221a${DH})` : "";
  return {short: ` \u00d7 ${fmt(L.scale, 4)}${root}`,
          long: `scaled: \u03b1_ij = q^i \u00b7 k^j \u00d7 ${fmt(L.scale, 4)}${root}`};
}

function main(D) {
  const Q = distinct(D.queries), K = distinct(D.keys);
  const st = {layer: 0, head: 0, query: D.pin, key: null};
  $("title").textContent = D.title;
  if (D.notes) $("notes").textContent = D.notes;

  D.layer_names.forEach((n, i) => $("layer").appendChild(el("option", {value: i}, n)));
  const heads = () => {  // the head menu of the layer shown (layers may have different head counts)
    const NH = D.layers[st.layer].q.shape[0];
    $("head").replaceChildren(...Array.from({length: NH}, (_, h) => el("option", {value: h}, `head ${h + 1}`)));
    st.head = Math.min(st.head, NH - 1);
  };
  $("layer").onchange = e => { st.layer = +e.target.value; st.key = null; heads(); draw(); };
  $("head").onchange = e => { st.head = +e.target.value; st.key = null; draw(); };
  Q.forEach((t, i) => {
    const b = el("button", {class: "tok", "data-i": i}, t);
    b.onclick = () => { st.query = i; st.key = null; draw(); };
    $("tokens").appendChild(b);
  });

  // A vector as a row of coloured cells (numbers inside when it is short, on hover otherwise).
  function strip(values, vmax, cls) {
    const box = el("span", {class: `strip ${cls || ""}`}), small = values.length <= 8;
    const w = small ? 44 : Math.max(2, Math.min(12, Math.floor(420 / values.length)));
    values.forEach((x, d) => {
      const c = el("span", {title: `[${d + 1}] ${fmt(x)}`, "data-v": x});
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
    const n = st.layer, L = D.layers[n], h = st.head, i = st.query, c = lectureChain(L, h, i);
    const NH = L.q.shape[0], LK = L.k.shape[1], DO = L.o.shape[1], sw = scaleWords(L);
    document.querySelectorAll("#tokens button").forEach(b => b.classList.toggle("sel", +b.dataset.i === i));
    $("layer").value = n; $("head").value = h;
    $("where").textContent = `${D.layer_names[n]}, head ${h + 1}, query ${i + 1} "${Q[i]}"`;
    if (st.key === null) st.key = c.live.length ? c.live.reduce((a, j) => (c.p[j] > c.p[a] ? j : a), c.live[0]) : 0;
    const masked = Array.from({length: LK}, (_, j) => !c.live.includes(j));

    // 1-2: the query against every key, the scores and the softmax
    $("step1").textContent = `1. The query against every key (${sw.long}), then the softmax over the keys: ` +
      "\u03b1'_ij = exp(\u03b1_ij) / \u03a3_j exp(\u03b1_ij)";
    const ks = Array.from({length: LK}, (_, j) => vec(L.k, h, j)), qk = absMax([c.q, ...ks]);
    $("qrow").replaceChildren(el("span", {class: "lab"}, `q^${i + 1} (${Q[i]})`), strip(c.q, qk));
    const t1 = el("table", {class: "chain", id: "scores"}), hd = t1.createTHead().insertRow();
    ["key j", "k^j", "q^i \u00b7 k^j", `\u03b1_ij = q^i\u00b7k^j${sw.short}`, "\u03b1'_ij = softmax", ""]
      .forEach(x => hd.appendChild(el("th", {}, x)));
    const pmax = Math.max(...c.p);
    const tb1 = t1.createTBody();
    for (let j = 0; j < LK; j++) {
      const tr = tb1.insertRow(); tr.dataset.j = j;
      tr.className = (j === st.key ? "sel" : "") + (masked[j] ? " masked" : "");
      td(tr, `${j + 1} ${K[j]}`, "lab");
      td(tr, strip(ks[j], qk));
      td(tr, masked[j] ? "masked" : fmt(c.alpha[j] / L.scale), "num dot");
      td(tr, masked[j] ? "masked" : fmt(c.alpha[j]), "num alpha");
      td(tr, fmt(c.p[j]), "num alphap");
      td(tr, masked[j] ? el("span", {class: "why"}, "masked: \u03b1'_ij = 0") : bar(c.p[j], pmax));
      tr.onclick = () => { st.key = j; draw(); };
    }
    $("scores-box").replaceChildren(t1);
    const hidden = masked.reduce((a, m) => a + m, 0);
    $("masked-note").textContent = !hidden ? "" : `${hidden} of the ${LK} keys are masked for q^${i + 1} ` +
      `(${c.live.length ? "e.g. a decoder's future tokens" : "no key is visible: b^i = 0"}): their \u03b1_ij is ` +
      "never used, the softmax runs over the other keys only, so their \u03b1'_ij = 0 and their values add nothing.";
    $("scores-legend").replaceChildren(legend("vector entries", fmt(-qk, 2), fmt(qk, 2),
      `linear-gradient(to right, ${diverge(-1, 1)}, #fff, ${diverge(1, 1)})`));

    // the dot product of the chosen key, term by term
    const j = st.key, k = ks[j], prod = Array.from(c.q, (x, d) => x * k[d]);
    $("dot-title").textContent = `q^${i + 1} \u00b7 k^${j + 1} (${Q[i]} \u00b7 ${K[j]}), term by term ` +
      `(click a row above to pick another key)`;
    const total = c.alpha[j] / L.scale;
    $("dot-box").replaceChildren(
      el("div", {class: "lab"}, `q^${i + 1}`), numbers(c.q, "dot-q"),
      el("div", {class: "lab"}, `k^${j + 1}`), numbers(k, "dot-k"),
      el("div", {class: "lab"}, "products"), numbers(prod, "dot-prod"),
      el("div", {class: "lab"}, `sum = ${fmt(total)}` +
        (L.scale === 1 ? " = \u03b1 (no scaling)" : `;${sw.short} = \u03b1 = ${fmt(c.alpha[j])}`) +
        (masked[j] ? `; k^${j + 1} is masked for this query: \u03b1'_ij = 0` : "")));

    // 3: the values weighted by alpha', summed into b^i
    const vs = Array.from({length: LK}, (_, j2) => vec(L.v, h, j2));
    const weighted = vs.map((v, j2) => Array.from(v, x => x * c.p[j2]));
    const vm = absMax(vs), wm = absMax([...weighted, c.b]);  // v^j on one scale, the weighted ones and b^i on another
    const t2 = el("table", {class: "chain", id: "values"}), hd2 = t2.createTHead().insertRow();
    ["key j", "\u03b1'_ij", "v^j", "\u03b1'_ij v^j"].forEach(x => hd2.appendChild(el("th", {}, x)));
    const tb2 = t2.createTBody();
    for (let j2 = 0; j2 < LK; j2++) {
      const tr = tb2.insertRow(); tr.dataset.j = j2;
      if (masked[j2]) tr.className = "masked";
      td(tr, `${j2 + 1} ${K[j2]}`, "lab"); td(tr, fmt(c.p[j2]), "num");
      td(tr, strip(vs[j2], vm)); td(tr, strip(weighted[j2], wm));
    }
    const last = tb2.insertRow(); last.className = "sum";
    td(last, `b^${i + 1} = \u03a3`, "lab"); td(last, fmt(c.p.reduce((a, x) => a + x, 0)), "num");
    td(last, ""); td(last, strip(c.b, wm));
    $("values-box").replaceChildren(t2, el("div", {class: "lab"}, `b^${i + 1}, head ${h + 1}:`), numbers(c.b, "bvec"));

    // 4: every head's b^i, merged by W^o into o^i (a layer without W^o: b^i is the output)
    const o = vec(L.o, i), shown = Math.min(DO, 12);
    if (!L.merge) {
      $("step4").textContent = NH === 1 ? "4. One head, no W^o: the output is b^i itself (the lecture's O = V A')"
        : "4. No W^o: the output is every head's b^i side by side";
      $("merge-note").textContent = "";
      $("merge-box").replaceChildren(el("div", {class: "lab"}, `o^${i + 1} = b^${i + 1} (${DO} numbers):`),
                                     numbers(Array.from(o).slice(0, shown), "ovec"));
    } else {
      $("step4").textContent = "4. Multi-head: W^o merges every head's b^i into the layer's output o^i";
      $("merge-note").textContent = "Click a head to follow its chain above.";
      const share = Array.from({length: NH}, (_, h2) => get(L.share, h2, i)), smax = Math.max(...share);
      const bs = Array.from({length: NH}, (_, h2) => (h2 === h ? c.b : lectureChain(L, h2, i).b)), bm = absMax(bs);
      const t3 = el("table", {class: "chain", id: "heads-table"}), hd3 = t3.createTHead().insertRow();
      ["head", `b^{${i + 1},h}`, "|W^o_h b^{i,h}|: what the head adds to o^i", ""]
        .forEach(x => hd3.appendChild(el("th", {}, x)));
      const tb3 = t3.createTBody();
      for (let h2 = 0; h2 < NH; h2++) {
        const tr = tb3.insertRow(); tr.dataset.h = h2;
        if (h2 === h) tr.className = "sel";
        td(tr, `head ${h2 + 1}`, "lab"); td(tr, strip(bs[h2], bm)); td(tr, fmt(share[h2]), "num");
        td(tr, bar(share[h2], smax));
        tr.onclick = () => { st.head = h2; st.key = null; draw(); };
      }
      $("merge-box").replaceChildren(t3,
        el("div", {class: "lab"}, `o^${i + 1} = W^o [b^{${i + 1},1}; \u2026; b^{${i + 1},${NH}}]${L.bias ? " + c" : ""}` +
                                  `  (${DO} numbers):`),
        strip(o, absMax([o])),
        el("div", {class: "lab"}, shown < DO ? `first ${shown} of ${DO}:` : ""),
        numbers(Array.from(o).slice(0, shown), "ovec"));
    }

    // 5: the lecture's matrices, every query at once
    lectureMatrices($("matrices-box"), D, L, h, i, Q, K, q2 => { st.query = q2; st.key = null; draw(); });
  }
  heads();
  draw();
}
start(main);
