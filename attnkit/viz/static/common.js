// Shared by every attnkit page: data loading, colour scales, the legend and small DOM helpers.
// window.attnkitReady is false until the page has drawn (tests and screenshots wait for it).
window.attnkitReady = false;
const $ = id => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";

// An array stored by attnkit.viz.page.pack: byte planes, zlib, base64 -> {shape, data (Float64Array)}.
async function unpack(d) {
  const bytes = Uint8Array.from(atob(d.z), c => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  const planes = new Uint8Array(await new Response(stream).arrayBuffer());
  const size = d.dtype === "u2" ? 2 : 4, n = planes.length / size, buf = new Uint8Array(planes.length);
  for (let b = 0; b < size; b++) for (let i = 0; i < n; i++) buf[i * size + b] = planes[b * n + i];
  const view = new DataView(buf.buffer), data = new Float64Array(n);
  // rounded values k / 10^decimals (dividing by the integer 10^decimals gives the nearest double)
  const div = d.decimals === undefined ? 1 : 10 ** d.decimals;
  for (let i = 0; i < n; i++) {
    data[i] = (size === 2 ? view.getUint16(2 * i, true) : view.getFloat32(4 * i, true)) / div;
  }
  return {shape: d.shape, data};
}

// Every packed array in the page's data block, unpacked (recursively).
async function loadData() {
  const D = JSON.parse($("attnkit-data").textContent);
  const walk = async o => {
    if (Array.isArray(o)) { for (let i = 0; i < o.length; i++) o[i] = await walk(o[i]); return o; }
    if (o && typeof o === "object") {
      if (typeof o.z === "string" && o.shape) return unpack(o);
      for (const k of Object.keys(o)) o[k] = await walk(o[k]);
    }
    return o;
  };
  return walk(D);
}

// A (possibly nested) slice of an unpacked array: at(a, i, j) -> flat offset helper.
function offset(a, idx) {
  let off = 0;
  for (let d = 0; d < a.shape.length; d++) off = off * a.shape[d] + (idx[d] || 0);
  return off;
}
function get(a, ...idx) { return a.data[offset(a, idx)]; }
function vec(a, ...idx) {  // the last axis at the given leading indices
  const n = a.shape[a.shape.length - 1], o = offset(a, idx);
  return a.data.subarray(o, o + n);
}

// Weights 0 -> vmax: white -> blue -> dark blue. Text on a cell: dark on light, white on dark.
const STOPS = [[255, 255, 255], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
function shadeRGB(t) {  // -> [r, g, b]
  t = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
  return a.map((x, k) => Math.round(x + f * (b[k] - x)));
}
const shade = t => `rgb(${shadeRGB(t).join(",")})`;
const ink = t => (t > 0.45 ? "#fff" : "#222");
// Signed numbers: blue below 0, white at 0, red above, |x| / vmax.
function diverge(x, vmax) {
  const t = Math.max(-1, Math.min(1, x / (vmax || 1)));
  const c = t < 0 ? [33, 102, 172] : [178, 24, 43], f = Math.abs(t);
  return `rgb(${c.map(v => Math.round(255 + f * (v - 255))).join(",")})`;
}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svgEl(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
// Labels as the pictures show them: as given when all differ, else each with its position ("saw@2",
// "saw@4"; 1-based, as the lecture's a^1, q^1). The same rule as attnkit.viz.labels.tell_apart.
function distinct(labels) {
  const names = labels.map(String);
  return new Set(names).size === names.length ? names : names.map((t, i) => `${t}@${i + 1}`);
}
const fmt = (x, d = 3) => (Math.abs(x) < 0.5 * 10 ** -d ? 0 : x).toFixed(d);

// A colour legend: the bar, its ends and what the colour means.
function legend(what, lo, hi, css) {
  const box = el("div", {class: "legend"});
  const bar = el("span", {class: "bar"});
  bar.style.background = css || `linear-gradient(to right, ${[0, 0.33, 0.67, 1].map(shade).join(", ")})`;
  box.append(el("span", {}, what), el("span", {class: "num"}, lo), bar, el("span", {class: "num"}, hi));
  return box;
}

// Head colours: dark enough to read on white (no yellow), distinct for up to 12 heads, then repeating.
const HEAD_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                      "#17807e", "#7f7f7f", "#d35400", "#3949ab", "#827717", "#ad1457"];
const headColour = h => HEAD_COLOURS[h % HEAD_COLOURS.length];

// Run the page's main(D) once the data is in; any failure is shown on the page and logged as an error.
function start(main) {
  loadData().then(D => { main(D); window.attnkitReady = true; }).catch(e => {
    document.body.prepend(el("p", {class: "error"}, `This page could not be drawn: ${e}`));
    console.error(e);
    window.attnkitReady = true;
  });
}
