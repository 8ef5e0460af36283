// Memory (PyTorch runs recorded with profile_memory=True, issue 33): per device the allocated and
// reserved memory over time as a step curve (decimated on export, exact peaks kept) with the peak
// marked and the operator that reached it; then torch-tb-profiler's per-operator memory statistics
// and the allocation events (address, size, operator, alloc / free times, lifetime), each filterable.
// Charts carry data-device / data-peak-allocated / data-peak-reserved, the peak marker data-at-ns.

import {h, s} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runView, stat} from "./common.js";

const W = 880, H = 260;
const BOX = {left: 76, right: W - 16, top: 18, bottom: H - 36};
const COLOURS = {allocated: "#1c7ed6", reserved: "#f08c00"};

const BY_OP_COLUMNS = [
  {key: "op", label: "Operator", kind: "name"},
  {key: "device", label: "Device", kind: "text"},
  {key: "calls", label: "Calls", kind: "int", title: "instances of the operator (as torch-tb-profiler counts them)"},
  {key: "self_increase_bytes", label: "Self increase", unit: "bytes", kind: "num", title: "bytes allocated minus freed in the operator itself"},
  {key: "self_alloc_bytes", label: "Self alloc size", unit: "bytes", kind: "num", title: "bytes allocated in the operator itself, frees not counted"},
  {key: "self_alloc_count", label: "Self allocs", kind: "int", title: "allocations in the operator itself"},
  {key: "increase_bytes", label: "Increase", unit: "bytes", kind: "num", title: "bytes allocated minus freed, with the operators inside it"},
  {key: "alloc_bytes", label: "Alloc size", unit: "bytes", kind: "num", title: "bytes allocated, with the operators inside it"},
  {key: "alloc_count", label: "Allocs", kind: "int", title: "allocations, with the operators inside it"},
];

export const render = runView({draw});

function draw(doc) {
  const peaks = Array.isArray(doc.peaks) ? doc.peaks : [];
  const curves = doc.curves || {};
  const devices = peaks.map((p) => p.device).sort(gpuFirst);
  return [headline(peaks.slice().sort((a, b) => gpuFirst(a.device, b.device))),
    ...devices.map((device) => chart(device, curves[device] || {}, peaks.find((p) => p.device === device), doc.first_ns)),
    devices.length ? legend() : h("p", {class: "muted", "data-role": "memory-no-curve"},
      "The trace's memory events carry no allocator totals (PyTorch before 1.10): no curve, the tables only."),
    h("h3", null, "Memory per operator"), byOpTable(doc.by_op || []),
    h("h3", null, "Allocations"), eventsTable(doc.events || {}, doc.events_total || 0, doc.first_ns)];
}

/** GPUs before the CPU, then by name. */
function gpuFirst(a, b) {
  return (a === "CPU") - (b === "CPU") || String(a).localeCompare(String(b));
}

function headline(peaks) {
  return h("div", {class: "totals", "data-role": "memory-headline"}, peaks.map((p) => {
    const share = p.capacity_bytes > 0 ? 100 * Math.max(p.peak_reserved_bytes, p.peak_allocated_bytes) / p.capacity_bytes : null;
    return stat(`Peak allocated · ${p.device}`, fmt.bytes(p.peak_allocated_bytes), "peak-allocated", p.peak_allocated_bytes,
      {note: `reserved ${fmt.bytes(p.peak_reserved_bytes)}${share === null ? "" : ` · ${fmt.pct(share)} % of ${fmt.bytes(p.capacity_bytes)}`}`});
  }));
}


/** The step curve "M x0 y0 H x1 V y1 ...": each value holds until the next event. */
function stepPath(xs, ys) {
  if (!xs.length) return "";
  let d = `M ${xs[0].toFixed(1)} ${ys[0].toFixed(1)}`;
  for (let i = 1; i < xs.length; i++) d += ` H ${xs[i].toFixed(1)} V ${ys[i].toFixed(1)}`;
  return d;
}

function chart(device, curve, peak, firstNs) {
  const ts = curve.ts_ns || [], allocated = curve.allocated_bytes || [], reserved = curve.reserved_bytes || [];
  const t0 = firstNs ?? (ts.length ? ts[0] : 0);
  const span = Math.max(1, (ts.length ? ts[ts.length - 1] : t0) - t0);
  const [yStep, top] = fmt.axisTicks(Math.max(peak ? peak.peak_reserved_bytes : 0, ...allocated, ...reserved));
  const [factor, unit] = fmt.scaleFor("bytes", top);
  const [tFactor, tUnit] = fmt.scaleFor("ns", span);
  const X = (t) => BOX.left + ((t - t0) / span) * (BOX.right - BOX.left);
  const Y = (b) => BOX.bottom - (b / top) * (BOX.bottom - BOX.top);
  const svg = s("svg", {class: "memory-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `memory of ${device} over time`, "data-role": "memory-chart", "data-device": device,
    "data-points": ts.length, "data-peak-allocated": peak ? peak.peak_allocated_bytes : null,
    "data-peak-reserved": peak ? peak.peak_reserved_bytes : null});
  const grid = s("g", {class: "grid"});
  for (let v = 0; v <= top + yStep / 2; v += yStep) {
    grid.append(s("line", {x1: BOX.left, x2: BOX.right, y1: Y(v), y2: Y(v), stroke: "#e9ecef"}),
      s("text", {x: BOX.left - 6, y: Y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#495057"}, `${fmt.num(v / factor)} ${unit}`));
  }
  for (let i = 0; i <= 5; i++) {
    const t = t0 + (span * i) / 5;
    const anchor = i === 0 ? "start" : i === 5 ? "end" : "middle";  // the end labels stay inside the chart
    grid.append(s("text", {x: X(t), y: BOX.bottom + 16, "text-anchor": anchor, "font-size": 11, fill: "#495057"},
      `${fmt.num((t - t0) / tFactor)} ${tUnit}`));
  }
  svg.append(grid,
    s("text", {x: BOX.left, y: 12, "font-size": 12, "font-weight": 600, fill: "#212529"}, device),
    s("path", {d: stepPath(ts.map(X), reserved.map(Y)), fill: "none", stroke: COLOURS.reserved, "stroke-width": 1.5,
      "data-role": "reserved-curve"}),
    s("path", {d: stepPath(ts.map(X), allocated.map(Y)), fill: "none", stroke: COLOURS.allocated, "stroke-width": 1.5,
      "data-role": "allocated-curve"}),
    s("line", {x1: BOX.left, x2: BOX.right, y1: BOX.bottom, y2: BOX.bottom, stroke: "#868e96"}));
  if (peak) svg.appendChild(peakMarker(peak, X, Y));
  return h("div", {class: "roofline-wrap memory-chart-wrap"}, svg);
}

function peakMarker(peak, X, Y) {
  const x = X(peak.at_ns), y = Y(peak.peak_allocated_bytes);
  const label = `peak ${fmt.bytes(peak.peak_allocated_bytes)}${peak.op ? ` in ${peak.op}` : ""}`;
  const right = x > (BOX.left + BOX.right) / 2;
  return s("g", {"data-role": "memory-peak", "data-at-ns": peak.at_ns, "data-op": peak.op || null},
    s("circle", {cx: x, cy: y, r: 5, fill: "#e03131", stroke: "#fff", "stroke-width": 1.5}),
    s("text", {x: right ? x - 9 : x + 9, y: Math.max(BOX.top + 10, y - 8), "text-anchor": right ? "end" : "start",
      "font-size": 11, fill: "#c92a2a", "data-role": "memory-peak-label"}, label),
    s("title", null, `${label}\n${peak.call_stack || ""}`));
}

function legend() {
  return h("ul", {class: "legend-list inline", "data-role": "memory-legend"},
    h("li", null, h("span", {class: "swatch-box", style: {background: COLOURS.allocated}}), " Allocated (by tensors)"),
    h("li", null, h("span", {class: "swatch-box", style: {background: COLOURS.reserved}}), " Reserved (by the caching allocator)"),
    h("li", null, h("span", {class: "swatch-box", style: {background: "#e03131"}}), " Peak allocated"));
}

function byOpTable(rows) {
  const get = (key, i) => rows[i][key];
  const table = new DataTable({
    columns: BY_OP_COLUMNS, rows: rows.length, get, noun: "operators", role: "memory-by-op",
    defaultSort: "self_increase_bytes:desc", filterPlaceholder: "Filter by operator or device…",
    filterText: (i) => `${rows[i].op}\n${rows[i].device}`,
    rowAttrs: (i) => ({"data-op": rows[i].op, "data-device": rows[i].device}),
  });
  return table.element;
}

function eventsTable(cols, total, firstNs) {
  const n = cols.addr ? cols.addr.length : 0;
  const at = (key, i) => (cols[key] ? cols[key][i] : null);
  const since = (key) => (i) => (at(key, i) >= 0 ? at(key, i) - (firstNs || 0) : null);
  const columns = [
    {key: "op", label: "Operator", kind: "name"},
    {key: "device", label: "Device", kind: "text"},
    {key: "addr", label: "Address", kind: "text", display: (i) => `0x${Number(at("addr", i)).toString(16)}`},
    {key: "bytes", label: "Size", unit: "bytes", kind: "num", title: "bytes allocated (a free of no allocation in the trace: its bytes)"},
    {key: "alloc", label: "Allocated at", unit: "ns", kind: "num", value: since("alloc_ns"), title: "time since the first memory event"},
    {key: "free", label: "Freed at", unit: "ns", kind: "num", value: since("free_ns"), title: "— : not freed within the trace"},
    {key: "lifetime_ns", label: "Lifetime", unit: "ns", kind: "num", value: (i) => (at("lifetime_ns", i) >= 0 ? at("lifetime_ns", i) : null)},
  ];
  const table = new DataTable({
    columns, rows: n, get: at, noun: "allocations", role: "memory-events", defaultSort: "bytes:desc",
    filterPlaceholder: "Filter by operator, device or address…",
    filterText: (i) => `${at("op", i)}\n${at("device", i)}\n0x${Number(at("addr", i)).toString(16)}`,
    rowAttrs: (i) => ({"data-op": at("op", i), "data-addr": at("addr", i)}),
  });
  return [table.element, total > n ? h("p", {class: "muted small", "data-role": "memory-events-cut"},
    `The first ${fmt.int(n)} of ${fmt.int(total)} allocations (in time order) are listed.`) : null];
}
