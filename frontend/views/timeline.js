// Timeline: one lane per GPU stream (kernels, copies, sets) and per CPU thread (NVTX ranges
// and CUDA / HIP API calls, nested by depth), drawn on a canvas.  Wheel or the buttons zoom around
// the cursor / centre, dragging pans; every change of window fetches that window from
// /timeline, decimated by the server to what the canvas can show, so 100,000s of slices stay
// fast.  Hover shows the slice as text (names never go through HTML); a click selects it (a
// kernel's links to its launch in the drawer).  A ruler above the lanes shows time since the
// capture's start in units that follow the zoom.

import {getJSON, columnReader} from "../api.js";
import {h, replace, errorBox, loading, debounce} from "../dom.js";
import * as fmt from "../format.js";
import {runHeader, runTerms} from "./common.js";
import {traceLink} from "./overview.js";

const ROW_H = 16;
const LANE_PAD = 4;
const LANE_MIN_H = 30;  // room for the two-line label (thread, process)
const MIN_SPAN_NS = 1000;  // zoom stops at 1 µs across the canvas
const COLOURS = {kernel: "#f08c00", memcpy: "#1c7ed6", memset: "#0ca678", cuda_api: "#868e96", osrt: "#c2255c", nvtx: "#7048e8",
  cpu_op: "#2f9e44", python: "#748ffc"};
// cuda_api holds the GPU runtime's calls whatever the vendor (CUDA, HIP, HSA): labelled in the
// run's own terms; cpu_op and python are a PyTorch trace's operators and Python frames.
const CAT_LABELS = {kernel: "kernel", memcpy: "memcpy", memset: "memset", cuda_api: "GPU API call",
  osrt: "OS runtime call", nvtx: "NVTX range", cpu_op: "PyTorch operator", python: "Python function"};
const LEGEND_NVTX_NAMES = 8;  // NVTX names the legend lists (coloured as their slices), most time first
const RULER_TICKS = 8;  // about this many labelled ticks across the plot
const TIME_UNITS = [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]];
// Categories only PyTorch traces have: in the legend once a window holds one.
const TRACE_SPECIFIC = new Set(["cpu_op", "python"]);

/** A window edge in whole ns (the route takes integers); null / undefined: the capture's edge. */
function whole(ns) {
  return ns === null || ns === undefined ? null : Math.round(ns);
}

function hue(text) {
  let x = 0;
  for (let i = 0; i < text.length; i++) x = (x * 31 + text.charCodeAt(i)) | 0;
  return Math.abs(x) % 360;
}

/** A slice's fill: NVTX ranges by their name (the legend lists the names with these colours). */
function sliceColour(cat, name) {
  return cat === "nvtx" ? `hsl(${hue(name)}, 45%, 62%)` : (COLOURS[cat] || "#adb5bd");
}

/** Ruler ticks of the window [t0, t1]: a 1-2-5 step, labelled as time since `origin` in the step's unit. */
export function rulerTicks(t0, t1, origin, count = RULER_TICKS) {
  const rough = Math.max(1, (t1 - t0) / count);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= rough);
  const [factor, unit] = TIME_UNITS.filter(([f]) => f <= step).pop() || TIME_UNITS[0];
  const decimals = Math.max(0, -Math.floor(Math.log10(step / factor) + 1e-9));
  const ticks = [];
  for (let t = Math.ceil((t0 - origin) / step) * step + origin; t <= t1; t += step) {
    const value = ((t - origin) / factor).toLocaleString("en-US", {minimumFractionDigits: decimals, maximumFractionDigits: decimals});
    ticks.push({ns: t, label: `${value} ${unit}`});
  }
  return {step, unit, ticks};
}

// A kernel slice's launch opens the kernel-detail drawer.
export const opensLaunches = true;

export function render(container, ctx) {
  const view = new TimelineView(container, ctx);
  view.start().catch((e) => console.error(e));
  return view;
}

class TimelineView {
  constructor(container, ctx) {
    this.ctx = ctx;
    this.run = ctx.state.run;
    this.data = null;
    this.rows = new Map();  // lane id -> rows (nesting depth + 1), only grows: the layout stays put
    this.t0 = ctx.state.start !== undefined ? Number(ctx.state.start) : null;
    this.t1 = ctx.state.end !== undefined ? Number(ctx.state.end) : null;
    this.fetchSeq = 0;
    this.drag = null;
    this.selected = null;  // {start, end, lane, depth, name, cat} of the clicked slice
    this.terms = runTerms(ctx);
    this.catLabels = {...CAT_LABELS, cuda_api: `${this.terms.api} API call`, nvtx: this.terms.range};
    this.status = h("span", {class: "muted", "data-role": "timeline-status"});
    this.range = h("span", {class: "mono small", "data-role": "timeline-range"});
    const btn = (label, title, role, fn) => h("button", {type: "button", title, "data-role": role, onclick: fn}, label);
    const toolbar = h("div", {class: "toolbar timeline-tools"},
      btn("+", "zoom in", "zoom-in", () => this.zoom(0.5)), btn("-", "zoom out", "zoom-out", () => this.zoom(2)),
      btn("Reset", "whole capture", "zoom-reset", () => this.reset()), this.range, this.status,
      h("span", {class: "spacer"}),
      h("a", {href: traceLink(this.run), download: "", class: "button-link", "data-role": "download-trace",
        title: "timeline.json.gz: Chrome trace-event JSON"}, "Download trace"),
      h("span", {class: "muted small"}, "opens in ui.perfetto.dev or chrome://tracing"));
    this.legend = h("div", {class: "legend timeline-legend", "data-role": "timeline-legend"}, Object.entries(COLOURS).map(([cat, colour]) =>
      h("span", {class: "legend-item", "data-cat": cat, hidden: TRACE_SPECIFIC.has(cat)},
        cat === "nvtx" ? null : h("span", {class: "swatch-box", style: {background: colour}}), ` ${this.catLabels[cat]}`,
        cat === "nvtx" ? [h("span", {class: "muted"}, " (coloured by name):"), h("span", {"data-role": "nvtx-names"})] : null)),
      h("span", {class: "muted"}, " · wheel or +/- to zoom, drag to pan, hover for details, click to select"));
    this.ruler = h("div", {class: "timeline-ruler", "data-role": "timeline-ruler"});
    this.selection = h("div", {class: "timeline-selection muted", "data-role": "timeline-selection"}, "Click a slice to select it.");
    this.labels = h("div", {class: "timeline-labels", "data-role": "timeline-lanes"});
    this.canvas = h("canvas", {class: "timeline-canvas", "data-role": "timeline"});
    this.tooltip = h("div", {class: "tooltip", "data-role": "tooltip", hidden: true});
    this.frame = h("div", {class: "timeline-frame"}, this.labels,
      h("div", {class: "timeline-plot"}, this.ruler, h("div", {class: "timeline-canvas-box"}, this.canvas, this.tooltip)));
    this.slot = h("div", null, loading(`timeline of ${this.run}`));
    container.append(runHeader(ctx.view.title, ctx), toolbar, this.legend, this.selection, this.slot);
    this.scheduleFetch = debounce(() => this.fetch(), 120);
    this.bindEvents();
  }

  async start() {
    await this.fetch();
  }

  maxEvents() {
    const width = this.canvas.clientWidth || 1200;
    return Math.min(20000, Math.max(2000, Math.round(width * 4)));
  }

  async fetch() {
    const seq = ++this.fetchSeq;
    let doc;
    try {
      doc = await getJSON(this.ctx.view.route, {run: this.run, start: whole(this.t0), end: whole(this.t1),
        max_events: this.maxEvents()});
    } catch (e) {
      if (this.ctx.isCurrent() && seq === this.fetchSeq) {
        replace(this.slot, errorBox(`Cannot load the timeline of ${this.run}: ${e.message}`, e.status ? `HTTP ${e.status}` : null));
      }
      return;
    }
    if (!this.ctx.isCurrent() || seq !== this.fetchSeq) return;
    const first = this.data === null;
    this.data = doc;
    if (this.t0 === null || this.t1 === null) [this.t0, this.t1] = [doc.start_ns, doc.end_ns];
    if (first) replace(this.slot, this.frame);
    this.showLegendOf(doc);
    this.layout();
    this.draw();
    this.ctx.update({start: String(Math.round(this.t0)), end: String(Math.round(this.t1))});
  }

  /** Show the PyTorch-only legend entries whose category this window holds (an nsys run has none). */
  showLegendOf(doc) {
    const present = new Set(Array.from(doc.events.cat, (code) => doc.categories[code]));
    for (const item of this.legend.querySelectorAll(".legend-item[data-cat]")) {
      if (present.has(item.dataset.cat)) item.hidden = false;
    }
    this.showNvtxNames(doc);
  }

  /** The NVTX names of this window with most time, each with its slices' colour. */
  showNvtxNames(doc) {
    const nvtx = doc.categories.indexOf("nvtx");
    const time = new Map();
    const ev = doc.events;
    for (let i = 0; i < ev.cat.length; i++) {
      if (ev.cat[i] === nvtx) time.set(ev.name[i], (time.get(ev.name[i]) || 0) + ev.end_ns[i] - ev.start_ns[i]);
    }
    const top = [...time].sort((a, b) => b[1] - a[1]).slice(0, LEGEND_NVTX_NAMES).map(([code]) => doc.names[code]);
    const slot = this.legend.querySelector("[data-role=nvtx-names]");
    replace(slot, top.length ? top.map((name) => h("span", {class: "legend-nvtx", "data-name": name, title: name},
      " ", h("span", {class: "swatch-box", style: {background: sliceColour("nvtx", name)}}), ` ${name}`))
      : h("span", {class: "muted"}, " none in this window"));
  }

  lanes() {
    // GPU streams first (by device, stream), then CPU threads (by process, thread).
    const lanes = [...this.data.lanes];
    lanes.sort((a, b) => (a.kind === b.kind ? 0 : a.kind === "stream" ? -1 : 1) ||
      (a.kind === "stream" ? (a.device - b.device) || (a.tid - b.tid) : (a.pid - b.pid) || (a.tid - b.tid)));
    return lanes;
  }

  layout() {
    const ev = this.data.events;
    for (let i = 0; i < ev.lane.length; i++) {
      const need = ev.depth[i] + 1;
      if ((this.rows.get(ev.lane[i]) || 0) < need) this.rows.set(ev.lane[i], need);
    }
    let y = 0;
    this.laneY = new Map();
    const labels = [];
    for (const lane of this.lanes()) {
      const rows = this.rows.get(lane.id);
      if (!rows) continue;  // no slice of this lane seen yet
      const height = Math.max(LANE_MIN_H, rows * ROW_H + LANE_PAD);
      this.laneY.set(lane.id, {y, height, lane});
      labels.push(h("div", {class: ["lane-label", lane.kind], style: {height: `${height}px`}, title: `${lane.thread}\n${lane.process}`,
        "data-lane-id": lane.id, "data-kind": lane.kind, "data-y": y, "data-height": height},
        h("span", {class: "lane-thread"}, lane.thread), h("span", {class: "lane-process muted"}, lane.process)));
      y += height;
    }
    this.height = Math.max(y, ROW_H);
    replace(this.labels, h("div", {class: "ruler-spacer"}),
      labels.length ? labels : h("div", {class: "muted"}, "No slice in this window."));
  }

  draw() {
    if (!this.data) return;
    const dpr = window.devicePixelRatio || 1;
    const width = this.canvas.parentElement.clientWidth || 900;
    this.canvas.style.width = `${width}px`;
    this.canvas.style.height = `${this.height}px`;
    this.canvas.width = Math.round(width * dpr);
    this.canvas.height = Math.round(this.height * dpr);
    const g = this.canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, this.height);
    const span = Math.max(1, this.t1 - this.t0);
    const scale = width / span;
    let odd = false;
    for (const {y, height} of this.laneY.values()) {
      g.fillStyle = (odd = !odd) ? "#f8f9fa" : "#ffffff";
      g.fillRect(0, y, width, height);
    }
    const {events: ev, names, categories} = this.data;
    g.font = "11px sans-serif";
    g.textBaseline = "middle";
    let drawn = 0;
    for (let i = 0; i < ev.start_ns.length; i++) {
      const lane = this.laneY.get(ev.lane[i]);
      if (!lane) continue;
      const x0 = (ev.start_ns[i] - this.t0) * scale;
      const x1 = (ev.end_ns[i] - this.t0) * scale;
      if (x1 < 0 || x0 > width) continue;
      const x = Math.max(0, x0), w = Math.max(1, Math.min(width, x1) - x);
      const y = lane.y + ev.depth[i] * ROW_H + 1;
      const cat = categories[ev.cat[i]];
      const name = names[ev.name[i]];
      g.fillStyle = sliceColour(cat, name);
      g.fillRect(x, y, w, ROW_H - 2);
      drawn++;
      if (w > 36) {
        g.save();
        g.beginPath();
        g.rect(x, y, w, ROW_H - 2);
        g.clip();
        g.fillStyle = "#fff";
        g.fillText(name, x + 3, y + (ROW_H - 2) / 2);
        g.restore();
      }
    }
    this.drawSelection(g, scale, width);
    this.drawRuler(scale, width);
    const d = this.data;
    for (const [k, v] of Object.entries({start: Math.round(this.t0), end: Math.round(this.t1), returned: d.returned,
      "in-window": d.in_window, decimated: d.decimated ? "1" : "0", drawn})) this.canvas.setAttribute(`data-${k}`, String(v));
    this.range.textContent = `${fmt.int(this.t0)} – ${fmt.int(this.t1)} ns (${fmt.duration(span)})`;
    this.status.textContent = d.decimated
      ? `${fmt.int(d.returned)} of ${fmt.int(d.in_window)} slices shown (merged per pixel bin: zoom in for all)`
      : `${fmt.int(d.returned)} slices`;
  }

  /** The selected slice outlined, and its flow: an arrow from the API call to the GPU work it launched. */
  drawSelection(g, scale, width) {
    const sel = this.selected;
    if (!sel) return;
    g.strokeStyle = "#212529";
    g.lineWidth = 2;
    for (const slice of [sel, sel.partner].filter(Boolean)) {
      const lane = this.laneY.get(slice.lane);
      if (!lane) continue;
      const x0 = Math.max(-2, (slice.start - this.t0) * scale), x1 = Math.min(width + 2, (slice.end - this.t0) * scale);
      if (x1 >= 0 && x0 <= width) g.strokeRect(x0, lane.y + slice.depth * ROW_H + 1, Math.max(2, x1 - x0), ROW_H - 2);
    }
    if (sel.partner) this.drawFlow(g, scale, ...(sel.cat === "cuda_api" ? [sel, sel.partner] : [sel.partner, sel]));
  }

  drawFlow(g, scale, call, work) {
    const a = this.laneY.get(call.lane), b = this.laneY.get(work.lane);
    if (!a || !b) return;
    const x0 = (call.start - this.t0) * scale, y0 = a.y + call.depth * ROW_H + ROW_H / 2;
    const x1 = (work.start - this.t0) * scale, y1 = b.y + work.depth * ROW_H + ROW_H / 2;
    g.strokeStyle = "#c92a2a";
    g.fillStyle = "#c92a2a";
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(x0, y0);
    g.lineTo(x1, y1);
    g.stroke();
    const angle = Math.atan2(y1 - y0, x1 - x0);  // the head points at the launched work
    g.beginPath();
    g.moveTo(x1, y1);
    g.lineTo(x1 - 8 * Math.cos(angle - 0.4), y1 - 8 * Math.sin(angle - 0.4));
    g.lineTo(x1 - 8 * Math.cos(angle + 0.4), y1 - 8 * Math.sin(angle + 0.4));
    g.closePath();
    g.fill();
    this.canvas.dataset.flow = `${Math.round(call.start)}->${Math.round(work.start)}`;
  }

  drawRuler(scale, width) {
    const origin = this.data.capture_ns[0];
    const {step, unit, ticks} = rulerTicks(this.t0, this.t1, origin);
    this.ruler.dataset.step = String(step);
    this.ruler.dataset.unit = unit;
    replace(this.ruler, ticks.map((t) => {
      const x = (t.ns - this.t0) * scale;
      return x < 0 || x > width ? null : h("span", {class: "tick", "data-ns": Math.round(t.ns), style: {left: `${x.toFixed(1)}px`}}, t.label);
    }), h("span", {class: "ruler-origin muted small"}, "time since the capture's start"));
  }

  setWindow(t0, t1) {
    const [lo, hi] = this.data ? this.data.capture_ns : [t0, t1];
    let span = Math.max(MIN_SPAN_NS, t1 - t0);
    const full = Math.max(MIN_SPAN_NS, hi - lo);
    span = Math.min(span, full * 1.05);
    t0 = Math.min(Math.max(t0, lo - full * 0.025), hi + full * 0.025 - span);
    this.t0 = t0;
    this.t1 = t0 + span;
    this.draw();
    this.scheduleFetch();
  }

  zoom(factor, anchorFrac = 0.5) {
    if (!this.data) return;
    const span = this.t1 - this.t0;
    const anchor = this.t0 + span * anchorFrac;
    const next = span * factor;
    this.setWindow(anchor - next * anchorFrac, anchor + next * (1 - anchorFrac));
  }

  reset() {
    if (!this.data) return;
    this.setWindow(this.data.capture_ns[0], this.data.capture_ns[1]);
  }

  hit(px, py) {
    if (!this.data) return -1;
    const width = this.canvas.clientWidth || 1;
    const span = this.t1 - this.t0;
    const t = this.t0 + (px / width) * span;
    const tol = (3 / width) * span;  // 3 px: thin slices stay hoverable
    let laneId = null, depth = 0;
    for (const [id, {y, height}] of this.laneY) {
      if (py >= y && py < y + height) {
        laneId = id;
        depth = Math.floor((py - y) / ROW_H);
      }
    }
    if (laneId === null) return -1;
    const ev = this.data.events;
    let best = -1, bestLen = Infinity;
    for (let i = 0; i < ev.start_ns.length; i++) {
      if (ev.lane[i] !== laneId || ev.depth[i] !== depth) continue;
      if (ev.start_ns[i] - tol <= t && t <= ev.end_ns[i] + tol) {
        const len = ev.end_ns[i] - ev.start_ns[i];
        const inside = ev.start_ns[i] <= t && t <= ev.end_ns[i];
        const score = inside ? len : len + span;  // prefer a slice under the cursor, then the shortest near it
        if (score < bestLen) [best, bestLen] = [i, score];
      }
    }
    return best;
  }

  showTip(i, px, py) {
    if (i < 0) {
      this.tooltip.hidden = true;
      return;
    }
    const {events: ev, names, categories} = this.data;
    const lane = this.laneY.get(ev.lane[i]).lane;
    const dur = ev.end_ns[i] - ev.start_ns[i];
    replace(this.tooltip,
      h("div", {class: "tip-name", "data-role": "tip-name"}, names[ev.name[i]]),
      h("div", {"data-role": "tip-duration"}, `${this.catLabels[categories[ev.cat[i]]] || categories[ev.cat[i]]} · ${fmt.duration(dur)}`),
      h("div", {"data-role": "tip-lane"}, `${lane.kind === "stream" ? "" : "thread "}${lane.thread} · ${lane.process}`),
      h("div", {class: "muted"}, `start ${fmt.int(ev.start_ns[i])} ns`),
      ev.merged[i] > 1 ? h("div", {class: "muted", "data-role": "tip-merged"}, `stands for ${fmt.int(ev.merged[i])} slices here: zoom in`) : null);
    this.tooltip.hidden = false;
    const plot = this.canvas.parentElement;
    this.tooltip.style.left = `${Math.min(px + 14, plot.clientWidth - 260)}px`;
    this.tooltip.style.top = `${py + 14}px`;
    this.tooltip.dataset.index = String(i);
  }

  /** Select slice i of the current window (-1: clear); a kernel gets a link to its launch. */
  select(i) {
    if (i < 0) {
      this.selected = null;
      replace(this.selection, "Click a slice to select it.");
      this.draw();
      return;
    }
    const {events: ev, names, categories} = this.data;
    const slice = (j) => ({start: ev.start_ns[j], end: ev.end_ns[j], lane: ev.lane[j], depth: ev.depth[j],
      name: names[ev.name[j]], cat: categories[ev.cat[j]], merged: ev.merged[j]});
    const sel = slice(i);
    sel.flow = ev.flow ? ev.flow[i] : -1;
    const partner = sel.flow >= 0 ? ev.flow.findIndex((f, j) => f === sel.flow && j !== i) : -1;
    sel.partner = partner >= 0 ? slice(partner) : null;
    this.selected = sel;
    delete this.canvas.dataset.flow;
    this.draw();
    const lane = this.laneY.get(sel.lane).lane;
    const link = h("span", {"data-role": "selection-launch"});
    replace(this.selection, h("strong", {"data-role": "selection-name"}, sel.name),
      h("span", {"data-role": "selection-info"}, ` · ${this.catLabels[sel.cat] || sel.cat} · ${fmt.duration(sel.end - sel.start)} · `,
        `starts ${fmt.duration(sel.start - this.data.capture_ns[0])} into the capture · ${lane.thread}`),
      sel.merged > 1 ? h("span", null, ` · stands for ${fmt.int(sel.merged)} slices: zoom in to pick one`) : null,
      this.flowText(sel), " ", link);
    for (const [k, v] of Object.entries({start: sel.start, end: sel.end, cat: sel.cat})) this.selection.dataset[k] = String(v);
    if (sel.cat === "kernel" && sel.merged <= 1) this.linkLaunch(sel, link);
  }

  /** What the selected slice's flow joins it to: the call that launched it, or the work it launched. */
  flowText(sel) {
    if (sel.flow < 0) return null;
    const p = sel.partner;
    if (!p) return h("span", {"data-role": "selection-flow"}, " · its flow's other end is outside this window (zoom out)");
    const what = `${p.name} (${this.catLabels[p.cat] || p.cat}, ${fmt.duration(p.start - this.data.capture_ns[0])})`;
    return h("span", {"data-role": "selection-flow", "data-partner-start": p.start, "data-partner-name": p.name},
      sel.cat === "cuda_api" ? ` · launched ${what}` : ` · launched by ${what}`);
  }

  /** The launch of a kernel slice (the kernels table's row starting when it starts), as a link to the drawer. */
  async linkLaunch(sel, slot) {
    const launch = await this.launchAt(sel.start, sel.end);
    if (this.selected !== sel || !this.ctx.isCurrent()) return;
    replace(slot, launch === null ? h("span", {class: "muted"}, "(no launch of the kernels table starts here)")
      : h("button", {type: "button", class: "link", "data-role": "open-launch", "data-launch-id": launch,
        onclick: () => this.ctx.openLaunch(launch)}, `launch #${fmt.int(launch)} in detail →`));
  }

  async launchAt(start, end) {
    if (!this.launchStarts) {
      this.launchStarts = getJSON("kernels", {run: this.run}).then((doc) => {
        const get = columnReader(doc);
        const rows = [];
        for (let i = 0; i < (doc.rows ?? 0); i++) rows.push([get("start_ns", i), get("end_ns", i), get("launch_id", i) ?? i]);
        return rows;
      });
    }
    let rows;
    try {
      rows = await this.launchStarts;
    } catch (e) {
      return null;
    }
    // Exact for integer ns; a tracer's fractional ns (rocprof-compute) land within 1 ns.
    const hit = rows.find(([s, e]) => Math.abs(s - start) < 1 && Math.abs(e - end) < 1);
    return hit ? hit[2] : null;
  }

  bindEvents() {
    const pos = (e) => {
      const r = this.canvas.getBoundingClientRect();
      return [e.clientX - r.left, e.clientY - r.top];
    };
    this.canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      const [px] = pos(e);
      this.zoom(e.deltaY > 0 ? 1.25 : 0.8, px / (this.canvas.clientWidth || 1));
    }, {passive: false});
    this.canvas.addEventListener("mousedown", (e) => {
      this.drag = {x: e.clientX, y: e.clientY, t0: this.t0, t1: this.t1};
      this.tooltip.hidden = true;
    });
    window.addEventListener("mouseup", (e) => {
      const click = this.drag && Math.abs(e.clientX - this.drag.x) < 3 && Math.abs(e.clientY - this.drag.y) < 3;
      this.drag = null;
      if (click && e.target === this.canvas) this.select(this.hit(...pos(e)));
    });
    this.canvas.addEventListener("mousemove", (e) => {
      const [px, py] = pos(e);
      if (this.drag) {
        const dt = ((e.clientX - this.drag.x) / (this.canvas.clientWidth || 1)) * (this.drag.t1 - this.drag.t0);
        this.setWindow(this.drag.t0 - dt, this.drag.t1 - dt);
        return;
      }
      this.showTip(this.hit(px, py), px, py);
    });
    this.canvas.addEventListener("mouseleave", () => { this.tooltip.hidden = true; });
    window.addEventListener("resize", debounce(() => this.draw(), 100));
  }
}
