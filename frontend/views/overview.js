// Overview: the run's advice (cards with the numbers behind each finding), headline
// figures, GPU busy % per device with its utilisation over time, the longest idle gaps
// with what the CPU was doing then, and the trace download.  Report strings are text.

import {routeURL} from "../api.js";
import {h, s} from "../dom.js";
import * as fmt from "../format.js";
import {runView, runTerms, stat} from "./common.js";
import {adviceSection} from "./advice.js";

export const render = runView({draw});

function draw(doc, ctx) {
  const run = ctx.state.run;
  const devices = Array.isArray(doc.devices) ? doc.devices : [];
  return [
    headline(doc.headline || {}, devices, Boolean(doc.has_trace), runTerms(ctx)),
    adviceSection(doc.advice, "No finding: no rule's evidence is in this run."),
    doc.has_trace ? utilisationSection(doc.utilisation || {}, devices) : h("p", {class: "muted", "data-role": "no-trace"},
      noTraceText(runTerms(ctx))),
    doc.has_trace ? gapsSection(Array.isArray(doc.idle_gaps) ? doc.idle_gaps : [], ctx) : null,
    doc.has_trace ? attributionSection(Array.isArray(doc.idle_attribution) ? doc.idle_attribution : []) : null,
    doc.timeline ? traceSection(doc.timeline, run) : null,
    notesSection(Array.isArray(doc.notes) ? doc.notes : [])];
}

function noTraceText(t) {
  const traces = t.amd ? "rocprof traces (`rocprofv3 --kernel-trace --hip-trace`)"
    : t.vendor === "NVIDIA" ? "Nsight Systems traces (`nsys profile`)" : "GPU traces (Nsight Systems, rocprof, the PyTorch profiler)";
  return `No GPU timeline in this ${t.toolName} run: busy / idle time and idle gaps come from ${traces}.`;
}

// The counters' time-weighted figures (the headline of a counter profiler's run: Nsight Compute,
// rocprof-compute), shown where the run has them.
const COUNTER_CARDS = [
  ["SM throughput", "sm_throughput_pct_time_weighted", "sm-throughput"],
  ["Memory throughput", "memory_throughput_pct_time_weighted", "memory-throughput"],
  ["Achieved occupancy", "achieved_occupancy_pct_time_weighted", "achieved-occupancy"],
];

/** The headline cards the run's kind can fill: GPU busy / idle and copies need a GPU timeline (a
 * trace), kernel time launches; a figure the run could have but lacks says what to capture. */
function headline(hl, devices, hasTrace, t) {
  const busy = hl.gpu_busy_pct;
  const launches = hl.kernel_launches;
  const timed = !fmt.isMissing(hl.total_kernel_time_ms);
  const items = [
    hasTrace ? stat("GPU busy", fmt.isMissing(busy) ? fmt.MISSING : `${busy < 1 ? fmt.num(busy, 2) : fmt.pct(busy)} %`, "gpu-busy", busy,
      {title: "GPU busy time (kernels, copies, sets) over the capture span"}) : null,
    hasTrace ? stat("GPU idle", fmt.isMissing(hl.gpu_idle_ms) ? fmt.MISSING : fmt.duration(hl.gpu_idle_ms * 1e6), "gpu-idle", hl.gpu_idle_ms) : null,
    stat("Kernel launches", fmt.int(launches), "kernel-launches", launches),
    timed ? stat("Kernel time", fmt.duration(hl.total_kernel_time_ms * 1e6), "kernel-time", hl.total_kernel_time_ms)
      : launches > 0 ? notCaptured("Kernel time", "kernel-time", durationHint(t)) : null,
    hasTrace ? stat("Copies / busy", fmt.isMissing(hl.memcpy_share_of_busy_pct) ? fmt.MISSING : `${fmt.pct(hl.memcpy_share_of_busy_pct)} %`,
      "memcpy-share", hl.memcpy_share_of_busy_pct, {title: "time a memcpy ran / GPU busy time"}) : null,
    ...COUNTER_CARDS.filter(([, key]) => !fmt.isMissing(hl[key])).map(([label, key, role]) =>
      stat(label, `${fmt.pct(hl[key])} %`, role, hl[key], {title: `${label}, averaged over the launches weighted by their duration`})),
  ];
  for (const d of devices) {
    items.push(stat(`GPU ${d.device} busy, first→last op`, fmt.isMissing(d.active_busy_pct) ? fmt.MISSING : `${fmt.pct(d.active_busy_pct)} %`,
      `active-busy-${d.device}`, d.active_busy_pct, {title: `${d.name || ""}: busy time between the first and last GPU operation`}));
  }
  return h("div", {class: "totals", "data-role": "headline"}, items);
}

/** A card for a figure the run's kind can have but its report lacks: what to capture instead of a value. */
function notCaptured(label, role, hint) {
  return h("div", {class: "stat not-captured"}, h("div", {class: "stat-label"}, label),
    h("div", {class: "stat-value muted", "data-role": role}, "not captured"),
    h("div", {class: "stat-note small muted"}, hint));
}

/** Where launch durations come from, in the run's own tool's terms. */
function durationHint(t) {
  if (t.amd) return "no dispatch has a duration: rocprof's kernel trace times each one (rocprofv3 --kernel-trace)";
  if (t.vendor === "NVIDIA") return "no launch has a duration: collect gpu__time_duration.sum (ncu --section SpeedOfLight, in every set)";
  return "no launch has a duration in this report";
}

const SPARK_W = 900, SPARK_H = 70;

function sparkline(util, device) {
  const idx = [];
  for (let i = 0; i < (util.device || []).length; i++) if (util.device[i] === device) idx.push(i);
  if (!idx.length) return null;
  const t0 = util.bin_start_ns[idx[0]], t1 = util.bin_end_ns[idx[idx.length - 1]];
  const x = (t) => ((t - t0) / Math.max(1, t1 - t0)) * SPARK_W;
  const y = (p) => SPARK_H - (Math.max(0, Math.min(100, p || 0)) / 100) * SPARK_H;
  let d = `M 0 ${SPARK_H}`;
  for (const i of idx) d += ` L ${x(util.bin_start_ns[i]).toFixed(1)} ${y(util.busy_pct[i]).toFixed(1)} L ${x(util.bin_end_ns[i]).toFixed(1)} ${y(util.busy_pct[i]).toFixed(1)}`;
  d += ` L ${SPARK_W} ${SPARK_H} Z`;
  return s("svg", {class: "sparkline", viewBox: `0 0 ${SPARK_W} ${SPARK_H}`, preserveAspectRatio: "none",
    "data-role": "utilisation", "data-device": device, "data-bins": idx.length, role: "img",
    "aria-label": `GPU ${device} busy % over the capture`},
    s("path", {d, class: "spark-fill"}),
    [25, 50, 75].map((p) => s("line", {x1: 0, x2: SPARK_W, y1: y(p), y2: y(p), class: "spark-grid"})));
}

/** The busy % scale beside a sparkline: 100 at the top, 0 at the bottom. */
function yTicks() {
  return h("div", {class: "spark-y muted small", "data-role": "spark-y-ticks"},
    [100, 75, 50, 25, 0].map((p) => h("span", {"data-pct": p}, `${p} %`)));
}

function utilisationSection(util, devices) {
  return h("section", {"data-role": "utilisation-section"}, h("h3", null, "GPU busy over the capture"),
    devices.map((d) => h("div", {class: "spark-row"},
      h("div", {class: "spark-label"}, `GPU ${d.device}${d.name ? ` · ${d.name}` : ""}: busy ${fmt.duration(d.busy_ns)} of ${fmt.duration(d.span_ns)} (${fmt.pct(d.busy_pct)} %), idle ${fmt.duration(d.idle_ns)}; kernels ${fmt.duration(d.kernel_ns)}, copies ${fmt.duration(d.memcpy_ns)}, sets ${fmt.duration(d.memset_ns)}`),
      h("div", {class: "spark-plot"}, yTicks(), sparkline(util, d.device)),
      h("div", {class: "spark-axis muted small", "data-role": "spark-x-axis"}, h("span", null, "0 s"),
        h("span", null, `busy % per bin (${fmt.int(binsOf(util, d.device))} bins over the capture; lines at 25, 50, 75 %)`),
        h("span", null, fmt.duration(d.span_ns))))));
}

function binsOf(util, device) {
  return (util.device || []).filter((x) => x === device).length;
}

function gapsSection(gaps, ctx) {
  const t = runTerms(ctx);
  const rows = gaps.map((g) => h("tr", {"data-rank": g.rank, "data-device": g.device},
    h("td", {class: "numeric"}, fmt.int(g.rank)),
    h("td", {class: "numeric", "data-col": "duration_ns", "data-value": g.duration_ns}, fmt.duration(g.duration_ns)),
    h("td", {class: "numeric mono small", "data-col": "start_ns"}, fmt.int(g.start_ns)),
    h("td", {"data-col": "nvtx_range"}, g.nvtx_range ? h("span", {class: "kname", title: `${g.nvtx_range}\n${g.nvtx_thread}`}, g.nvtx_range) : fmt.MISSING),
    h("td", {"data-col": "cuda_api", title: g.cuda_api_thread || null}, g.cuda_api || fmt.MISSING,
      g.cuda_api ? h("span", {class: "muted small"}, ` ${fmt.duration(g.cuda_api_overlap_ns)}`) : null),
    h("td", {"data-col": "osrt_call"}, g.osrt_call || fmt.MISSING),
    h("td", {"data-col": "starts_in_sync"}, g.starts_in_sync ? "yes" : ""),
    h("td", null, h("button", {type: "button", class: "link", "data-role": "show-gap",
      onclick: () => {
        const pad = Math.max(1000, Math.round((g.end_ns - g.start_ns) * 0.25));
        ctx.navigate({view: "timeline", start: String(g.start_ns - pad), end: String(g.end_ns + pad)});
      }}, "timeline →"))));
  return h("section", null, h("h3", null, `Longest GPU idle gaps (${gaps.length}) and what the CPU was doing`),
    gaps.length ? h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "idle-gaps"},
      h("thead", null, h("tr", null, ["#", "Idle", "Start (ns)", "NVTX range", `${t.api} API call`, "OS runtime call",
        "Began in a sync", ""].map((t) => h("th", null, t)))),
      h("tbody", null, rows))) : h("p", {class: "muted"}, "The GPU never idled."));
}

function attributionSection(rows) {
  return h("section", null, h("h3", null, "Idle time overlapping CPU activity"),
    h("table", {class: "data compact", "data-role": "idle-attribution"},
      h("thead", null, h("tr", null, ["GPU", "Activity", "Intervals", "Idle time during it", "Share of idle"].map((t) => h("th", null, t)))),
      h("tbody", null, rows.map((r) => h("tr", {"data-activity": r.activity},
        h("td", {class: "numeric"}, fmt.int(r.device)), h("td", null, r.activity),
        h("td", {class: "numeric"}, fmt.int(r.intervals)),
        h("td", {class: "numeric", "data-value": r.idle_overlap_ns}, fmt.duration(r.idle_overlap_ns)),
        h("td", {class: "numeric"}, `${fmt.pct(r.idle_share_pct)} %`))))));
}

export function traceLink(run) {
  return routeURL("trace", {run}).href;
}

function traceSection(info, run) {
  const w = info.window;
  return h("section", {"data-role": "trace-info"}, h("h3", null, "Trace file"),
    h("p", null, `${fmt.int(info.kept_events)} slices kept, ${fmt.int(info.dropped_events)} dropped`,
      w ? ` (${w.label}: ${fmt.int(w.start_ns)}–${fmt.int(w.end_ns)} ns)` : " (whole capture)", ". ",
      h("a", {href: traceLink(run), download: "", "data-role": "download-trace"}, "Download trace (.json.gz)"),
      h("span", {class: "muted"}, " — Chrome trace-event JSON: open it in ui.perfetto.dev or chrome://tracing.")));
}

function notesSection(notes) {
  if (!notes.length) return null;
  return h("section", null, h("h3", null, "Notes"), h("ul", {class: "notes", "data-role": "notes"}, notes.map((n) => h("li", null, n))));
}
