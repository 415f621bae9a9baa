// The attention page: the model view (every layer x head as a thumbnail), the head view (lines from
// queries to keys, one colour per head) and the matrix of the layer and heads chosen.
// Past LINES_ALL tokens, lines are drawn for one token at a time (point at it, or click to pin it).
// attentionView(D) draws (or redraws, for another set of weights: the decoder page's tabs) into the page's
// elements; D.mask (Lq, Lk; 1 = may attend), when given, marks masked cells (grey thumbnails, hatched matrix).
const LINES_ALL = 32;
const MASKED_RGB = [208, 208, 208];

function attentionView(D) {
  const W = D.weights, Q = distinct(D.queries), K = distinct(D.keys);
  const [NL, NH, LQ, LK] = W.shape;
  const w = (n, h, i, j) => W.data[((n * NH + h) * LQ + i) * LK + j];
  const masked = (i, j) => !!D.mask && get(D.mask, i, j) < 0.5;
  const long = Math.max(LQ, LK) > LINES_ALL;
  // long inputs start with one query's lines kept (D.pin: the first that is not a special token)
  const st = {layer: 0, on: new Array(NH).fill(true), focus: null, pinned: long ? {kind: "q", index: D.pin} : null};
  $("title").textContent = D.title;

  // ---- model view: one canvas per (layer, head), 0 -> 1 (absolute, the default) or 0 -> its own largest weight
  const grid = $("thumbs"), px = 72 / Math.max(LQ, LK);  // a thumbnail is 72 px on its long side
  grid.replaceChildren(); $("layer").replaceChildren(); $("heads").replaceChildren(); $("lines-note").textContent = "";
  st.scale = $("scale").value = "absolute";
  grid.style.gridTemplateColumns = `auto repeat(${NH}, auto)`;
  grid.appendChild(el("span"));
  for (let h = 0; h < NH; h++) grid.appendChild(el("span", {class: "lab"}, `head ${h + 1}`));
  const thumbs = [];
  for (let n = 0; n < NL; n++) {
    grid.appendChild(el("span", {class: "lab"}, D.layer_names[n]));
    thumbs.push([]);
    for (let h = 0; h < NH; h++) {
      const c = el("canvas", {width: LK, height: LQ, "data-layer": n, "data-head": h,
                              title: `${D.layer_names[n]}, head ${h + 1}: click to open in the head view`});
      // at least 12 px a side: a cross-attention over 3 source tokens stays visible beside its header
      c.style.width = `${Math.max(12, Math.round(LK * px))}px`; c.style.height = `${Math.max(12, Math.round(LQ * px))}px`;
      c.onclick = () => openHead(n, h);
      grid.appendChild(c); thumbs[n].push(c);
    }
  }
  function paintThumbs() {  // the colours follow the scale menu
    thumbs.forEach((row, n) => row.forEach((c, h) => {
      const ctx = c.getContext("2d"), img = ctx.createImageData(LK, LQ);
      let m = 1;
      if (st.scale === "own") {
        m = 0;
        for (let i = 0; i < LQ; i++) for (let j = 0; j < LK; j++) m = Math.max(m, w(n, h, i, j));
      }
      c.dataset.top = m;
      for (let i = 0; i < LQ; i++) for (let j = 0; j < LK; j++) {
        img.data.set([...(masked(i, j) ? MASKED_RGB : shadeRGB(w(n, h, i, j) / (m || 1))), 255], 4 * (i * LK + j));
      }
      ctx.putImageData(img, 0, 0);
    }));
    $("thumbs-legend").replaceChildren(st.scale === "own" ? legend("each thumbnail: weight", "0", "its largest weight")
      : legend("every thumbnail: weight", "0", "1"));
    if (D.mask) $("thumbs-legend").appendChild(el("p", {class: "note"}, "Grey: masked (a key this query may not " +
      "see, a future token); its weight is 0."));
  }
  paintThumbs();
  $("scale").onchange = e => { st.scale = e.target.value; paintThumbs(); drawTable(); };

  function openHead(n, h) {
    st.layer = n; st.on.fill(false); st.on[h] = true;
    $("layer").value = n; syncBoxes(); draw();
    $("head-view").scrollIntoView({block: "start"});
  }

  // ---- head view controls
  D.layer_names.forEach((name, i) => $("layer").appendChild(el("option", {value: i}, name)));
  $("layer").onchange = e => { st.layer = +e.target.value; draw(); };
  const boxes = [];
  for (let h = 0; h < NH; h++) {
    const l = el("label"), c = el("input", {type: "checkbox", "data-head": h}), sw = el("span", {class: "swatch"});
    c.checked = true; sw.style.background = headColour(h);
    c.onchange = () => { st.on[h] = c.checked; draw(); };
    l.append(c, sw, `head ${h + 1}`); $("heads").appendChild(l); boxes.push(c);
  }
  const syncBoxes = () => boxes.forEach((c, h) => { c.checked = st.on[h]; });
  $("all").onclick = () => { st.on.fill(true); syncBoxes(); draw(); };
  $("none").onclick = () => { st.on.fill(false); syncBoxes(); draw(); };
  const zoom = $("zoom");
  zoom.value = Math.max(8, Math.min(28, Math.floor(640 / Math.max(LQ, LK))));
  zoom.oninput = () => drawTable();
  if (long) $("lines-note").textContent = `${Math.max(LQ, LK)} tokens: lines are drawn for one token at a time. ` +
    `Point at a ${D.sides[0]} or a ${D.sides[1]} (click it to keep its lines).`;

  // ---- lines: one side queries, the other keys (D.left says which goes left)
  const keysLeft = D.left === "keys";
  function drawLines() {
    const svg = $("lines"); svg.replaceChildren();
    const row = Math.max(LQ, LK) > 40 ? 16 : 22, chars = a => Math.max(...a.map(t => t.length));
    const L = keysLeft ? K : Q, R = keysLeft ? Q : K;
    const left = 14 + 7.8 * Math.max(chars(L), D.sides[keysLeft ? 1 : 0].length / 1.4);
    // the side names (12 px sans) sit above the labels: each side as wide as its longest label or its name
    const right = left + 200, top = 4, width = right + 16 + 7.8 * Math.max(chars(R), D.sides[keysLeft ? 0 : 1].length / 1.3);
    svg.setAttribute("width", width);
    svg.setAttribute("height", top + row * Math.max(LQ, LK) + 6);
    // the side names sit above the scrolling lines, so they stay in view however long the input
    const head = $("lines-head");
    head.setAttribute("width", width); head.setAttribute("height", 20);
    head.replaceChildren(svgEl("text", {x: left, y: 14, "text-anchor": "end", class: "side"}, D.sides[keysLeft ? 1 : 0]),
                         svgEl("text", {x: right, y: 14, class: "side"}, D.sides[keysLeft ? 0 : 1]));
    const f = st.focus || st.pinned;  // pointing wins over the kept token
    const y = k => top + row * k + row / 2;
    for (let h = 0; h < NH; h++) {
      if (!st.on[h]) continue;
      for (let i = 0; i < LQ; i++) {
        if (f && f.kind === "q" && f.index !== i) continue;
        if (!f && long) continue;
        for (let j = 0; j < LK; j++) {
          if (f && f.kind === "k" && f.index !== j) continue;
          const x = w(st.layer, h, i, j);
          if (x < 0.01) continue;
          const [yl, yr] = keysLeft ? [y(j), y(i)] : [y(i), y(j)];
          svg.appendChild(svgEl("line", {x1: left + 6, y1: yl, x2: right - 6, y2: yr, stroke: headColour(h),
            "stroke-width": 2, "stroke-opacity": x, "data-q": i, "data-k": j, "data-h": h}));
        }
      }
    }
    const label = (t, k, kind, side) => {
      const e = svgEl("text", {x: side === "L" ? left : right, y: y(k) + 4, "data-kind": kind, "data-index": k,
                               "text-anchor": side === "L" ? "end" : "start"}, t);
      if (f) e.setAttribute("class", f.kind === kind && f.index === k ? "on" : (f.kind === kind ? "dim" : ""));
      e.onmouseenter = () => { st.focus = {kind, index: k}; drawLines(); };
      e.onmouseleave = () => { st.focus = null; drawLines(); };
      e.onclick = () => {
        const same = st.pinned && st.pinned.kind === kind && st.pinned.index === k;
        st.pinned = same ? null : {kind, index: k}; drawLines();
      };
      svg.appendChild(e);
    };
    L.forEach((t, k) => label(t, k, keysLeft ? "k" : "q", "L"));
    R.forEach((t, k) => label(t, k, keysLeft ? "q" : "k", "R"));
  }

  // ---- matrix of the layer: one head, or the mean of the heads ticked
  function drawTable() {
    const heads = [...Array(NH).keys()].filter(h => st.on[h]), box = $("matrix");
    if (!heads.length) { box.replaceChildren(el("p", {class: "caption"}, "no head selected")); return; }
    const name = D.layer_names[st.layer];
    drawMatrix(box, {
      rows: Q, cols: K, cell: +zoom.value, rowTitle: D.sides[0], colTitle: D.sides[1],
      vmax: st.scale === "absolute" ? 1 : undefined,
      value: (i, j) => heads.reduce((s, h) => s + w(st.layer, h, i, j), 0) / heads.length,
      masked: D.mask ? masked : undefined,
      caption: heads.length === 1 ? `${name}, head ${heads[0] + 1}`
        : `${name}, mean of heads ${heads.map(h => h + 1).join(", ")}`,
      onRow: i => { st.focus = i < 0 ? null : {kind: "q", index: i}; drawLines(); },
      onCol: j => { st.focus = {kind: "k", index: j}; drawLines(); },
    });
  }

  function draw() {
    thumbs.forEach((r, n) => r.forEach((c, h) => c.classList.toggle("sel", n === st.layer && st.on[h])));
    drawLines(); drawTable();
  }
  draw();
}
