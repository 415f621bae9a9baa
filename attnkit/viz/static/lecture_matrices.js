// The lecture view's step 5: one head of one layer as the lecture's matrices, every query at once, a
// token's vectors as columns: I = [a^1 a^2 ...], W^q, Q = W^q I, W^k, K, W^v, V, A = K^T Q (x scale),
// A' (softmax of each column), O = V A', and W^o with the merged output. I and the W's are shown only when
// the page stores them (small examples such as `attnkit lecture`'s). Uses lectureChain (lecture.js).
const MATRIX_NUMBERS = 24;  // columns up to which each cell shows its number (else colour and a tooltip)
const MATRIX_TOKENS = 128;  // past this many tokens the matrices are left out (the chain above shows one query)

// A matrix as a table with both axes named: rows (rowAxis) down, columns (colAxis) across.
// opts: {id, caption, rowAxis, colAxis, rows, cols, value(r, c), weights (0-1 colours), sel (column),
//        masked(r, c), sums (a row of column sums), choose(c) (a click on a column)}
function matrixTable(opts) {
  const {rows, cols, value} = opts, numbers = cols.length <= MATRIX_NUMBERS;
  const vals = rows.map((_, r) => cols.map((_, c) => value(r, c)));
  const vmax = Math.max(1e-9, ...vals.flat().map(Math.abs));
  const t = el("table", {class: "mx", id: opts.id});
  const head = t.createTHead().insertRow();
  head.appendChild(el("th", {class: "corner"}, `${opts.rowAxis} \u2193  ${opts.colAxis} \u2192`));
  cols.forEach((name, c) => {
    const th = el("th", {"data-c": c, class: c === opts.sel ? "sel" : ""}, name);
    if (opts.choose) { th.onclick = () => opts.choose(c); th.style.cursor = "pointer"; }
    head.appendChild(th);
  });
  const body = t.createTBody();
  rows.forEach((name, r) => {
    const tr = body.insertRow();
    tr.appendChild(el("th", {}, name));
    cols.forEach((_, c) => {
      const x = vals[r][c], hidden = opts.masked && opts.masked(r, c), cell = tr.insertCell();
      cell.dataset.r = r; cell.dataset.c = c;
      cell.className = `num${c === opts.sel ? " sel" : ""}${hidden ? " masked" : ""}`;
      cell.title = hidden ? `${name}, ${cols[c]}: masked (\u03b1' = 0)` : `${name}, ${cols[c]}: ${fmt(x)}`;
      if (hidden) { cell.textContent = numbers ? (opts.weights ? fmt(0) : "masked") : ""; return; }
      const f = opts.weights ? x : x / vmax;
      cell.style.background = opts.weights ? shade(f) : diverge(x, vmax);
      cell.style.color = opts.weights ? ink(f) : (Math.abs(f) > 0.55 ? "#fff" : "#222");
      if (numbers) cell.textContent = fmt(x);
    });
  });
  if (opts.sums) {
    const tr = body.insertRow(); tr.className = "sum";
    tr.appendChild(el("th", {}, "column sum"));
    cols.forEach((_, c) => {
      const cell = tr.insertCell(); cell.className = "num"; cell.dataset.c = c;
      cell.textContent = fmt(vals.reduce((a, row) => a + row[c], 0));
    });
  }
  const box = el("div", {class: "mbox"});
  box.append(el("p", {class: "caption"}, opts.caption), el("div", {class: "scroll"}, undefined));
  box.lastChild.appendChild(t);
  return box;
}

// Step 5 for layer L, head h; query i marked; choose(c) picks another query.
function lectureMatrices(box, D, L, h, i, Q, K, choose) {
  const LQ = L.q.shape[1], LK = L.k.shape[1], DH = L.q.shape[2], DV = L.v.shape[2];
  if (Math.max(LQ, LK) > MATRIX_TOKENS) {
    box.replaceChildren(el("p", {class: "note"}, `${Math.max(LQ, LK)} tokens: too many to show every query's ` +
                                                 "matrices; the chain above shows one query at a time."));
    return;
  }
  const idx = n => Array.from({length: n}, (_, r) => `${r + 1}`);
  const qs = Q.map((t, c) => `q^${c + 1} ${t}`), ksl = K.map((t, c) => `k^${c + 1} ${t}`);
  const chains = Array.from({length: LQ}, (_, c) => lectureChain(L, h, c));
  const masked = (j, c) => !chains[c].live.includes(j);
  const out = [];
  const row = (...boxes) => { const r = el("div", {class: "mrow"}); r.append(...boxes); out.push(r); };
  // one head: Q, W^q, A; several (the terminal's names): Q^2, W^{q,2}, A^2 for head 2
  const many = L.q.shape[0] > 1, sup = many ? `^${h + 1}` : "", sw = scaleWords(L);
  const wname = x => (many ? `W^{${x},${h + 1}}` : `W^${x}`);
  const common = {sel: i, choose};
  if (L.a) {  // the inputs, one column each
    row(matrixTable({...common, id: "m-I", caption: `I = [a^1 \u2026 a^${LQ}] (${L.a.shape[1]} \u00d7 ${LQ}): ` +
      "column i is token i's vector a^i", rowAxis: "entry", colAxis: "token a^i", rows: idx(L.a.shape[1]),
      cols: Q.map((t, c) => `a^${c + 1} ${t}`), value: (r, c) => get(L.a, c, r)}));
  }
  const parts = [["q", "Q", DH, LQ, qs, "query q^i"], ["k", "K", DH, LK, ksl, "key k^j"], ["v", "V", DV, LK,
    K.map((t, c) => `v^${c + 1} ${t}`), "value v^j"]];
  for (const [name, big, rows, n, cols, axis] of parts) {  // one row each: W^q and Q = W^q I, ...
    const w = L[`w${name}`], self = name === "q" ? common : {}, boxes = [];
    if (w) {
      boxes.push(matrixTable({id: `m-W${name}`, caption: `${wname(name)} (${rows} \u00d7 ${w.shape[2]})`,
        rowAxis: "row", colAxis: "column", rows: idx(rows), cols: idx(w.shape[2]),
        value: (r, c) => get(w, h, r, c)}));
    }
    boxes.push(matrixTable({...self, id: `m-${big}`, caption: `${big}${sup}${w ? ` = ${wname(name)} I` : ""} (${rows} ` +
      `\u00d7 ${n}): column ${name === "q" ? "i" : "j"} is ${axis}`, rowAxis: "entry", colAxis: axis, rows: idx(rows),
      cols, value: (r, c) => get(L[name], h, c, r)}));
    row(...boxes);
  }
  const anyMasked = chains.some(ch => ch.live.length < LK);
  row(matrixTable({...common, id: "m-A", caption: `A${sup} = ${many ? `(K${sup})^T` : "K^T"} Q${sup}${sw.short} (${LK} \u00d7 ${LQ}): row j is key ` +
    `k^j, column i is query q^i; ${L.scale === 1 ? "no scaling" : "scaled"}` +
    (anyMasked ? "; a masked key is never scored" : ""), rowAxis: "key k^j", colAxis: "query q^i",
    rows: ksl, cols: qs, value: (r, c) => chains[c].alpha[r], masked}),
  matrixTable({...common, id: "m-Ap", caption: `A'${sup} = softmax of each column of A${sup}: each column sums ` +
    `to 1${anyMasked ? "; a masked key gets \u03b1' = 0 (the softmax runs over the visible keys)" : ""}`,
    rowAxis: "key k^j", colAxis: "query q^i", rows: ksl, cols: qs, value: (r, c) => chains[c].p[r],
    weights: true, masked, sums: true}));
  row(matrixTable({...common, id: "m-O", caption: `O${sup} = V${sup} A'${sup} (${DV} \u00d7 ${LQ}): column i is b^i`,
    rowAxis: "entry", colAxis: "output b^i", rows: idx(DV), cols: Q.map((t, c) => `b^${c + 1} ${t}`),
    value: (r, c) => chains[c].b[r]}));
  if (L.merge && L.wo) {  // small examples: W^o and the layer's output in full
    const NH = L.q.shape[0], DO = L.wo.shape[0];
    row(matrixTable({id: "m-Wo", caption: `W^o (${DO} \u00d7 ${L.wo.shape[1]}): columns ` +
      `${Array.from({length: NH}, (_, h2) => `${h2 * DV + 1}-${(h2 + 1) * DV} take head ${h2 + 1}'s b^i`).join(", ")}`,
      rowAxis: "row", colAxis: "column", rows: idx(DO), cols: idx(L.wo.shape[1]), value: (r, c) => get(L.wo, r, c)}),
    matrixTable({...common, id: "m-out", caption: `O = W^o [O^1; \u2026; O^${NH}]${L.bias ? " + c" : ""} ` +
      `(${DO} \u00d7 ${LQ}): column i is the layer's output o^i, every head merged`, rowAxis: "entry",
      colAxis: "output o^i", rows: idx(DO), cols: Q.map((t, c) => `o^${c + 1} ${t}`), value: (r, c) => get(L.o, c, r)}));
  }
  box.replaceChildren(...out);
}
