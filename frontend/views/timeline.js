// Timeline: one lane per GPU stream (kernels, copies, sets) and per CPU thread (NVTX ranges
// and CUDA / HIP API calls, nested by depth), drawn on a canvas.  Wheel or the buttons zoom around
// the cursor / centre, dragging pans; every change of window fetches that window from
// /timeline, decimated by the server to what the canvas can show, so 100,000s of slices stay
// fast.  Hover shows the slice as text (names never go through HTML).

import {getJSON} from "../api.js";
import {h, replace, errorBox, loading, debounce} from "../dom.js";
import * as fmt from "../format.js";
import {runHeader} from "./common.js";
import {traceLink} from "./overview.js";

const ROW_H = 16;
const LANE_PAD = 4;
const LANE_MIN_H = 30;  // room for the two-line label (thread, process)
const MIN_SPAN_NS = 1000;  // zoom stops at 1 µs across the canvas
const COLOURS = {kernel: "#f08c00", memcpy: "#1c7ed6", memset: "#0ca678", cuda_api: "#868e96", osrt: "#c2255c", nvtx: "#7048e8",
  cpu_op: "#2f9e44", python: "#748ffc"};
// cuda_api holds the GPU runtime's calls whatever the vendor (CUDA, HIP, HSA); cpu_op and python
// are a PyTorch trace's operators and Python frames.
const CAT_LABELS = {kernel: "kernel", memcpy: "memcpy", memset: "memset", cuda_api: "GPU API call (CUDA / HIP)",
  osrt: "OS runtime call", nvtx: "NVTX range", cpu_op: "PyTorch operator", python: "Python function"};
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
        h("span", {class: "swatch-box", style: {background: colour}}), ` ${CAT_LABELS[cat]}`)),
      h("span", {class: "muted"}, " · wheel or +/- to zoom, drag to pan, hover for details"));
    this.labels = h("div", {class: "timeline-labels", "data-role": "timeline-lanes"});
    this.canvas = h("canvas", {class: "timeline-canvas", "data-role": "timeline"});
    this.tooltip = h("div", {class: "tooltip", "data-role": "tooltip", hidden: true});
    this.frame = h("div", {class: "timeline-frame"}, this.labels, h("div", {class: "timeline-plot"}, this.canvas, this.tooltip));
    this.slot = h("div", null, loading(`timeline of ${this.run}`));
    container.append(runHeader(ctx.view.title, ctx), toolbar, this.legend, this.slot);
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
    replace(this.labels, labels.length ? labels : h("div", {class: "muted"}, "No slice in this window."));
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
      g.fillStyle = cat === "nvtx" ? `hsl(${hue(name)}, 45%, 62%)` : (COLOURS[cat] || "#adb5bd");
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
    const d = this.data;
    for (const [k, v] of Object.entries({start: Math.round(this.t0), end: Math.round(this.t1), returned: d.returned,
      "in-window": d.in_window, decimated: d.decimated ? "1" : "0", drawn})) this.canvas.setAttribute(`data-${k}`, String(v));
    this.range.textContent = `${fmt.int(this.t0)} – ${fmt.int(this.t1)} ns (${fmt.duration(span)})`;
    this.status.textContent = d.decimated
      ? `${fmt.int(d.returned)} of ${fmt.int(d.in_window)} slices shown (merged per pixel bin: zoom in for all)`
      : `${fmt.int(d.returned)} slices`;
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
      h("div", {"data-role": "tip-duration"}, `${CAT_LABELS[categories[ev.cat[i]]] || categories[ev.cat[i]]} · ${fmt.duration(dur)}`),
      h("div", {"data-role": "tip-lane"}, `${lane.kind === "stream" ? "" : "thread "}${lane.thread} · ${lane.process}`),
      h("div", {class: "muted"}, `start ${fmt.int(ev.start_ns[i])} ns`),
      ev.merged[i] > 1 ? h("div", {class: "muted", "data-role": "tip-merged"}, `stands for ${fmt.int(ev.merged[i])} slices here: zoom in`) : null);
    this.tooltip.hidden = false;
    const plot = this.canvas.parentElement;
    this.tooltip.style.left = `${Math.min(px + 14, plot.clientWidth - 260)}px`;
    this.tooltip.style.top = `${py + 14}px`;
    this.tooltip.dataset.index = String(i);
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
      this.drag = {x: e.clientX, t0: this.t0, t1: this.t1};
      this.tooltip.hidden = true;
    });
    window.addEventListener("mouseup", () => { this.drag = null; });
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
