// A weight matrix as a table: rows = queries, columns = keys. Sticky labels, a zoom (cell size),
// a colour legend, and hovering a cell highlights its query and key labels and names the weight.
// opts: {rows, cols, value(i, j), caption, rowTitle, colTitle, cell (px), vmax (top of the colour scale;
//        default the largest weight shown), masked(i, j) (true: a masked cell, hatched, "masked" on hover),
//        onRow(i), onCol(j)}
function drawMatrix(box, opts) {
  const {rows, cols, value} = opts;
  let vmax = 0;
  const w = rows.map((_, i) => cols.map((_, j) => { const x = value(i, j); vmax = Math.max(vmax, x); return x; }));
  vmax = opts.vmax || vmax || 1;
  const cell = opts.cell || 24, numbers = cell >= 22 && cols.length <= 40;
  const t = el("table", {class: "m"});
  const headRow = t.createTHead().insertRow();
  const corner = el("th", {class: "corner"}, `${opts.rowTitle} \u2193  ${opts.colTitle} \u2192`);
  headRow.appendChild(corner);
  const colHeads = cols.map((c, j) => { const th = el("th", {"data-j": j}, c); headRow.appendChild(th); return th; });
  const body = t.createTBody(), rowHeads = [];
  rows.forEach((r, i) => {
    const tr = body.insertRow(), th = el("th", {"data-i": i}, r);
    rowHeads.push(th); tr.appendChild(th);
    cols.forEach((c, j) => {
      const x = w[i][j], td = tr.insertCell(), f = x / vmax;
      td.dataset.i = i; td.dataset.j = j; td.dataset.w = x;
      const off = opts.masked && opts.masked(i, j);
      td.title = `${r} \u2192 ${c}: ${x.toFixed(3)}${off ? " (masked)" : ""}`;
      if (off) td.classList.add("masked");
      if (off) return;  // hatched by its class, no number: the masked part of the matrix stands out
      td.style.background = shade(f);
      td.style.color = ink(f);
      if (numbers) td.textContent = x.toFixed(2).replace(/^0\./, ".");
    });
  });
  let lit = [];
  t.addEventListener("mouseover", e => {
    const c = e.target.closest("td, th");
    lit.forEach(x => x.classList.remove("hl")); lit = [];
    if (!c) return;
    const i = c.dataset.i, j = c.dataset.j;
    if (i !== undefined) { lit.push(rowHeads[+i]); if (opts.onRow && c.tagName === "TH") opts.onRow(+i); }
    if (j !== undefined) { lit.push(colHeads[+j]); if (opts.onCol && c.tagName === "TH") opts.onCol(+j); }
    lit.forEach(x => x.classList.add("hl"));
  });
  t.addEventListener("mouseleave", () => {
    lit.forEach(x => x.classList.remove("hl")); lit = [];
    if (opts.onRow) opts.onRow(-1);
  });
  const scroll = el("div", {class: "scroll"});
  scroll.style.setProperty("--cell", `${cell}px`);
  scroll.appendChild(t);
  box.replaceChildren(el("p", {class: "caption"}, opts.caption),
                      legend("attention weight", "0", opts.vmax ? String(vmax) : `${vmax.toFixed(3)} (the largest)`),
                      scroll);
  return {table: t, vmax};
}
