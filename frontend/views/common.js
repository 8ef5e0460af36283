// What the per-run views share: their header, and runView(), the scaffold every one of them
// is built on (header, loading line, error box, answers that arrive after the user moved on).

import {getJSON} from "../api.js";
import {h, replace, errorBox, loading} from "../dom.js";

/** Header of a per-run view: title + the run's identity. */
export function runHeader(title, ctx) {
  const info = ctx.runInfo(ctx.state.run);
  const dev = info && Array.isArray(info.devices) ? deviceList(info.devices.map((d) => d.name).filter(Boolean)) : "";
  return h("div", {class: "view-head"},
    h("h2", null, title),
    h("span", {class: "mono run-name"}, ctx.state.run || ""),
    dev ? h("span", {class: "muted"}, ` · ${dev}`) : null,
    info && info.tool ? h("span", {class: "muted"}, ` · ${info.tool} ${info.tool_version || ""}`) : null);
}

/** "A, B × 8": each device name once, with its count (a PyTorch trace lists every GPU of the node). */
function deviceList(names) {
  const counts = new Map();
  for (const name of names) counts.set(name, (counts.get(name) || 0) + 1);
  return [...counts].map(([name, n]) => (n > 1 ? `${name} × ${n}` : name)).join(", ");
}

/** One headline figure: label, shown value, and the raw number (data-value) for tests and tools. */
export function stat(label, value, role, raw, {title = null, note = null} = {}) {
  return h("div", {class: "stat", title}, h("div", {class: "stat-label"}, label),
    h("div", {class: "stat-value", "data-role": role, "data-value": raw ?? null}, value),
    note === null ? null : h("div", {class: "mono small muted", title: note}, note));
}

/**
 * Await `promise` while showing a loading line in `slot`; on failure show the
 * error (HTTP status + the backend's one-line message) and return null.
 */
export async function fetchInto(slot, promise, what, ctx) {
  replace(slot, loading(what));
  try {
    const value = await promise;
    if (!ctx.isCurrent()) return null;
    replace(slot);
    return value;
  } catch (e) {
    if (!ctx.isCurrent()) return null;
    replace(slot, errorBox(`Cannot load ${what}: ${e.message}`, e.status ? `HTTP ${e.status}` : null));
    return null;
  }
}

/** The document of the view's own route (as GET /runs names it) for the picked run. */
export function ownDocument(ctx) {
  return getJSON(ctx.view.route, {run: ctx.state.run});
}

/**
 * render(container, ctx) of a per-run view: its header, then draw(doc, ctx, view) of what
 * fetch(ctx) answers (default: the view's own route) in place of the loading line, or the error.
 * title(ctx) / toolbar(ctx) when the view has more than the server's title; select(view, launch)
 * when it highlights the launch the kernel-detail drawer shows.  `view` is what render returns
 * (the app calls view.onSelect); draw may keep what select needs on it.
 */
export function runView({draw, fetch = ownDocument, title = (ctx) => ctx.view.title, toolbar = null, select = null}) {
  return function render(container, ctx) {
    const heading = title(ctx);
    const slot = h("div", {class: "view-body"});
    const view = {slot, onSelect: select ? (launch) => select(view, launch) : null};
    container.append(runHeader(heading, ctx), ...(toolbar ? [toolbar(ctx)].flat() : []), slot);
    fetchInto(slot, fetch(ctx), `${heading} of ${ctx.state.run}`, ctx).then((doc) => {
      if (doc) replace(slot, draw(doc, ctx, view));
    }).catch((e) => {
      replace(slot, errorBox(`This view failed: ${e.message}`));
      console.error(e);
    });
    return view;
  };
}


// -- the run's own tool and vendor words -------------------------------------------------------
const AMD_TOOLS = /^(rocprof|omniperf)/i;
const TOOL_NAMES = {ncu: "Nsight Compute", nsys: "Nsight Systems", vtune: "VTune", rocprof: "rocprof",
  rocprofv2: "rocprofv2", rocprofv3: "rocprofv3", "rocprof-compute": "rocprof-compute", omniperf: "Omniperf",
  torch: "the PyTorch profiler", pytorch: "the PyTorch profiler", kineto: "the PyTorch profiler"};
// Tools that record when kernels ran, not how busy the units were.
const TRACERS = /^(nsys|rocprof|rocprofv2|rocprofv3|torch|pytorch|kineto)$/i;

/** "AMD", "NVIDIA", "Intel" or "" for run `info` (a /runs row): from its tool, else its devices. */
export function vendorOf(info) {
  const tool = String((info && info.tool) || "");
  if (AMD_TOOLS.test(tool)) return "AMD";
  if (/^vtune/i.test(tool)) return "Intel";
  if (/^(ncu|nsys)/i.test(tool)) return "NVIDIA";
  const devices = (info && Array.isArray(info.devices)) ? info.devices : [];
  if (devices.some((d) => /^gfx|AMD|Instinct|Radeon/i.test(`${d.architecture || ""} ${d.name || ""}`.trim()))) return "AMD";
  return devices.length ? "NVIDIA" : "";
}

/**
 * The words a run's labels use, in its own vendor's and tool's terms: AMD runs say CU, wavefront,
 * work-group, LDS, HIP; NVIDIA ones SM, warp, block, shared memory, CUDA.  `counters` says what
 * to collect for the hardware counters a trace lacks.
 */
export function terms(info) {
  const vendor = vendorOf(info);
  const tool = String((info && info.tool) || "");
  const amd = vendor === "AMD";
  return {
    vendor, amd, tool,
    toolName: TOOL_NAMES[tool.toLowerCase()] || tool || "the profiler",
    tracer: TRACERS.test(tool),
    sm: amd ? "CU" : "SM", warp: amd ? "wavefront" : "warp", block: amd ? "work-group" : "block",
    thread: amd ? "work-item" : "thread", shared: amd ? "LDS" : "shared mem", api: amd ? "HIP" : "CUDA",
    range: amd ? "ROCTX range" : "NVTX range",  // rocprof's markers are ROCTX's (the timeline's "nvtx" category)
    counters: amd ? "rocprof-compute (`rocprof-compute profile -n NAME -- APP`) on an Instinct GPU"
      : vendor === "Intel" ? "a GPU profiler (this run is VTune's CPU profile)"
        : "Nsight Compute's SpeedOfLight section (`ncu --section SpeedOfLight -o report APP`, or `--set full`)",
  };
}

/** The picked run's terms. */
export function runTerms(ctx) {
  return terms(ctx.runInfo(ctx.state.run));
}

