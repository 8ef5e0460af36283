// An icicle graph (a flame graph drawn top down) of a call tree: each frame a box as wide as its
// weight, its callees below it.  Reusable: the Python stacks of a PyTorch trace (stacks.js), and
// any tree of {id, parent, name, weights} (a VTune top-down tree where a report has one).
//
// flameGraph({nodes, weights: [{key, label, unit}], weight, onSelect(id, path)}) -> {element}
//   nodes: [{id, parent (-1 for a root), name, weights: {key: number}}], parents before children.
// A toggle picks the weight; the search box highlights frames whose name holds the text; a click on
// a frame zooms into it (it fills the width) and calls onSelect; the breadcrumb zooms back out.

import {h, s, replace, debounce} from "../dom.js";
import * as fmt from "../format.js";

const WIDTH = 1200;  // SVG user units; the SVG scales to its box
const ROW = 18;
const MIN_DRAWN = 0.3;  // boxes narrower than this are left out (their weight stays in their parent's box)
const LABEL_MIN = 36;  // boxes narrower than this get no label (the title shows the name)

/** children[id]: the ids under it, heaviest first for `key` (a stable order: ties by id). */
function childrenOf(nodes, key) {
  const children = new Map([[-1, []]]);
  for (const n of nodes) children.set(n.id, []);
  for (const n of nodes) (children.get(n.parent) || children.get(-1)).push(n);
  for (const list of children.values()) list.sort((a, b) => (b.weights[key] || 0) - (a.weights[key] || 0) || a.id - b.id);
  return children;
}

/** Boxes {node, x, w, depth} under `top` (-1: every root) laid out in WIDTH units. */
function layout(children, top, byId, key) {
  const first = top < 0 ? children.get(-1) : [byId.get(top)];
  const total = first.reduce((sum, n) => sum + (n.weights[key] || 0), 0);
  const boxes = [];
  if (!(total > 0)) return {boxes, total};
  const scale = WIDTH / total;
  const place = (list, x, depth) => {
    for (const n of list) {
      const w = (n.weights[key] || 0) * scale;
      if (w >= MIN_DRAWN) {
        boxes.push({node: n, x, w, depth});
        place(children.get(n.id) || [], x, depth + 1);
      }
      x += w;
    }
  };
  place(first, 0, 0);
  return {boxes, total};
}

/** The ids from a root down to `id`. */
function lineage(byId, id) {
  const out = [];
  for (let n = byId.get(id); n; n = byId.get(n.parent)) out.unshift(n.id);
  return out;
}

// A box's colour: warm hues by name (the same function keeps its colour when zooming).
function hue(name) {
  let x = 0;
  for (let i = 0; i < name.length; i++) x = (x * 31 + name.charCodeAt(i)) >>> 0;
  return 10 + (x % 45);
}

export function flameGraph({nodes, weights, weight, onSelect = () => {}}) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const state = {key: weight || weights[0].key, zoom: -1, query: ""};
  const svgSlot = h("div", {class: "flame-box"});
  const crumbs = h("nav", {class: "flame-crumbs", "data-role": "flame-crumbs", "aria-label": "zoom path"});
  const total = h("span", {class: "flame-total", "data-role": "flame-total"});
  const search = h("input", {type: "search", class: "filter", placeholder: "Search frames…",
    "aria-label": "search frames", "data-role": "flame-search",
    oninput: debounce(() => { state.query = search.value.trim().toLowerCase(); highlight(); }, 120)});
  const toggles = weights.map((w) => h("button", {type: "button", class: "flame-weight", "data-role": "flame-weight",
    "data-weight": w.key, title: w.title || null, onclick: () => { state.key = w.key; draw(); }}, w.label));
  let children = null;

  function draw() {
    children = childrenOf(nodes, state.key);
    for (const b of toggles) b.classList.toggle("active", b.dataset.weight === state.key);
    const {boxes, total: sum} = layout(children, state.zoom, byId, state.key);
    const unit = weights.find((w) => w.key === state.key).unit;
    const roots = children.get(-1).reduce((acc, n) => acc + (n.weights[state.key] || 0), 0);
    total.dataset.value = roots;
    replace(total, `Total ${weights.find((w) => w.key === state.key).label}: ${fmt.human(roots, unit)}`,
      state.zoom >= 0 ? ` · zoomed frame: ${fmt.human(sum, unit)} (${fmt.pct(roots > 0 ? 100 * sum / roots : null)} %)` : "");
    const depth = boxes.reduce((d, b) => Math.max(d, b.depth + 1), 1);
    const svg = s("svg", {class: "flame", "data-role": "flame", "data-width": WIDTH, viewBox: `0 0 ${WIDTH} ${depth * ROW}`,
      width: WIDTH, height: depth * ROW, role: "img",  // scaled to the box as a whole (CSS): text keeps its shape
      "aria-label": `call tree weighted by ${state.key}`});
    for (const b of boxes) svg.appendChild(box(b, unit, roots));
    replace(svgSlot, boxes.length ? svg : h("p", {class: "muted", "data-role": "flame-empty"},
      `No frame has any ${weights.find((w) => w.key === state.key).label} weight.`));
    drawCrumbs();
    highlight();
  }

  function box(b, unit, roots) {
    const n = b.node;
    const value = n.weights[state.key] || 0;
    const title = `${n.name}\n${fmt.human(value, unit)} (${fmt.pct(roots > 0 ? 100 * value / roots : null)} % of all)`;
    const g = s("g", {transform: `translate(${b.x},${b.depth * ROW})`},
      s("title", null, title),
      s("rect", {width: b.w, height: ROW - 1, "data-path": n.id, "data-name": n.name, rx: 1,
        style: {fill: `hsl(${hue(n.name)}, 85%, 62%)`},
        onclick: () => { state.zoom = n.id; draw(); onSelect(n.id, lineage(byId, n.id)); }}));
    if (b.w >= LABEL_MIN) {
      const chars = Math.floor((b.w - 6) / 6.2);
      const label = n.name.length > chars ? n.name.slice(0, Math.max(1, chars - 1)) + "…" : n.name;
      g.appendChild(s("text", {x: 3, y: ROW - 5, "pointer-events": "none"}, label));
    }
    return g;
  }

  function drawCrumbs() {
    const path = state.zoom >= 0 ? lineage(byId, state.zoom) : [];
    replace(crumbs, h("button", {type: "button", class: "crumb", onclick: () => { state.zoom = -1; draw(); onSelect(null, []); }},
      "All frames"),
    path.map((id) => [h("span", {class: "muted"}, " › "), h("button", {type: "button", class: "crumb", title: byId.get(id).name,
      onclick: () => { state.zoom = id; draw(); onSelect(id, lineage(byId, id)); }}, byId.get(id).name)]));
  }

  function highlight() {
    const q = state.query;
    for (const r of svgSlot.querySelectorAll("rect[data-path]")) {
      const hit = Boolean(q) && r.dataset.name.toLowerCase().includes(q);
      r.classList.toggle("match", hit);
      r.classList.toggle("dim", Boolean(q) && !hit);
    }
  }

  const element = h("div", {class: "flame-graph", "data-role": "flame-graph"},
    h("div", {class: "toolbar"}, h("span", {class: "flame-toggles", role: "group", "aria-label": "weight"}, toggles),
      search, total),
    crumbs, svgSlot);
  draw();
  return {element, redraw: draw};
}
