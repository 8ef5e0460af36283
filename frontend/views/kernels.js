// Kernels: one row per launch (from /kernels) or grouped by name (/kernel_groups).

import {getJSON, columnReader} from "../api.js";
import {h} from "../dom.js";
import {DataTable} from "./table.js";
import {runView, ownDocument, runTerms} from "./common.js";
import * as fmt from "../format.js";

/** Columns of the launch table; `unitCol` names a column of the response's units map.  The name first
 * (it stays in sight when the table scrolls sideways), then what decides where the time went: duration,
 * bound, throughputs, occupancy; the launch configuration last. */
export const LAUNCH_COLUMNS = [
  {key: "name", label: "Kernel", kind: "name"},
  {key: "duration_ns", label: "Duration", unitCol: "duration_ns", kind: "num", title: "GPU time of the launch"},
  {key: "bound", label: "Bound (counters)", kind: "bound", title: "Nsight Compute's speed-of-light rule on SM and memory throughput (% of peak); hover a label for the reason, open the launch for the roofline's answer"},
  {key: "sm_throughput_pct", label: "SM", kind: "pct", grade: "throughput", title: "compute (SM) throughput, % of peak"},
  {key: "memory_throughput_pct", label: "Memory", kind: "pct", grade: "throughput", title: "memory throughput, % of peak (busiest unit)"},
  {key: "dram_throughput_pct", label: "DRAM", kind: "pct", grade: "throughput", title: "DRAM throughput, % of peak"},
  {key: "achieved_occupancy_pct", label: "Occ. achieved", kind: "pct", grade: "occupancy", title: "achieved occupancy (≥ 50% good)"},
  {key: "theoretical_occupancy_pct", label: "Occ. theoretical", kind: "pct", grade: "occupancy"},
  {key: "occupancy_limiter", label: "Occ. limiter", kind: "text"},
  {key: "flop_per_s", label: "FLOP/s", unitCol: "flop_per_s", kind: "num", title: "achieved FLOP/s"},
  {key: "dram_bytes", label: "DRAM bytes", unitCol: "dram_bytes", kind: "num"},
  {key: "l1_hit_rate_pct", label: "L1 hit", kind: "pct"},
  {key: "l2_hit_rate_pct", label: "L2 hit", kind: "pct"},
  {key: "launch_id", label: "#", kind: "int", title: "launch index in the report"},
  {key: "grid", label: "Grid", kind: "text", sortKey: "grid_size", title: "grid dimensions (sorted by blocks in the grid)"},
  {key: "block", label: "Block", kind: "text", sortKey: "block_size", title: "block dimensions (sorted by threads per block)"},
  {key: "registers_per_thread", label: "Regs/thread", kind: "int"},
  {key: "shared_mem_bytes", label: "Shared mem/block", unitCol: "shared_mem_bytes", kind: "num"},
];

const GROUP_COLUMNS = [
  {key: "name", label: "Kernel", kind: "name"},
  {key: "total_ns", label: "Total", unit: "ns", kind: "num"},
  {key: "pct_time", label: "Time", kind: "pct", title: "% of the run's kernel time"},
  {key: "bound", label: "Bound (counters)", kind: "bound", title: "the counters' label covering most of the group's time (Nsight Compute's speed-of-light rule on SM and memory throughput (% of peak))"},
  {key: "calls", label: "Calls", kind: "int"},
  {key: "mean_ns", label: "Mean", unit: "ns", kind: "num"},
  {key: "min_ns", label: "Min", unit: "ns", kind: "num"},
  {key: "max_ns", label: "Max", unit: "ns", kind: "num"},
];

function legend() {
  return h("p", {class: "legend muted"},
    "Colours: ", h("span", {class: "good"}, "good"), " occupancy ≥ 50%, throughput ≥ 80% of peak · ",
    h("span", {class: "mid"}, "middling"), " · ", h("span", {class: "weak"}, "weak"), " throughput < 60%, occupancy < 25% · ",
    "— missing (not measured, not zero). Click a header to sort, a row for details.");
}

// Its launches open the kernel-detail drawer.
export const opensLaunches = true;

const grouped = (ctx) => ctx.state.group === "1";

export const render = runView({
  title: (ctx) => (grouped(ctx) ? "Kernels by name" : ctx.view.title),
  toolbar: (ctx) => [h("div", {class: "toolbar"}, h("label", {class: "toggle"},
    h("input", {type: "checkbox", "data-role": "group-toggle", checked: grouped(ctx),
      onchange: (e) => ctx.navigate({group: e.target.checked ? "1" : null, sort: null, page: null})}),
    " group launches by kernel name")), legend()],
  fetch: (ctx) => (grouped(ctx) ? getJSON("kernel_groups", {run: ctx.state.run}) : ownDocument(ctx)),
  draw: (doc, ctx, view) => {
    if (grouped(ctx)) return groupTable(doc, ctx).element;
    view.launches = launchTable(doc, ctx);  // the drawer's launch is selected in it
    return view.launches.element;
  },
  select: (view, launch) => { if (view.launches) view.launches.setSelected(launch); },
});

// Shown whatever the run measured: which launch, what ran, how long, and the bound (or why it is not known).
const ALWAYS_SHOWN = new Set(["launch_id", "name", "duration_ns", "bound"]);
// The grid / block text, else the size the tool gave alone (rocprof: work-groups and work-items per group).
const SIZE_FALLBACK = {grid: "grid_size", block: "block_size"};

/** The launch columns in the run's own terms (AMD: CU, work-group, LDS). */
export function launchColumns(t) {
  const renamed = {
    grid: {label: t.amd ? "Grid (work-groups)" : "Grid", title: `grid dimensions (sorted by ${t.block}s in the grid)`},
    block: {label: t.amd ? "Work-group" : "Block", title: `${t.block} dimensions (sorted by ${t.thread}s per ${t.block})`},
    registers_per_thread: {label: `Regs/${t.thread}`},
    shared_mem_bytes: {label: `${t.amd ? "LDS" : "Shared mem"}/${t.block}`},
    sm_throughput_pct: {label: t.sm, title: `compute (${t.sm}) throughput, % of peak`},
  };
  return LAUNCH_COLUMNS.map((c) => ({...c, ...(renamed[c.key] || {})}));
}

function hasValue(get, key, n) {
  for (let i = 0; i < n; i++) if (!fmt.isMissing(get(key, i))) return true;
  return false;
}

/** The columns with a value in at least one launch (a trace has no counters: 12 of 18 would be all "—"). */
export function presentColumns(columns, get, n) {
  return columns.filter((c) => ALWAYS_SHOWN.has(c.key) || hasValue(get, c.key, n) ||
    (SIZE_FALLBACK[c.key] && hasValue(get, SIZE_FALLBACK[c.key], n)));
}

/** Whether the run's bound labels are all "not measured": a trace, no counters to classify with. */
function boundNotMeasured(get, n) {
  if (!n) return false;
  for (let i = 0; i < n; i++) {
    if (get("bound", i) !== "unknown" || !String(get("bound_reason", i) || "").startsWith("not measured")) return false;
  }
  return true;
}

// Columns the occupancy step fills from the launch configuration where the tool gave none
// (occupancy_source, docs/FORMAT.md): marked so that computed figures are not read as measured.
const COMPUTED_OCCUPANCY = new Set(["theoretical_occupancy_pct", "occupancy_limiter"]);
const COMPUTED_MARK = "*";

function computedRows(get, n) {
  let count = 0;
  for (let i = 0; i < n; i++) if (get("occupancy_source", i)) count++;
  return count;
}

/** A computed-occupancy column: its header marked and titled, each computed cell marked with the
 * launch's occupancy_source as its title; the tool's own values as the table shows them. */
function markComputed(c, get) {
  const show = (v) => (c.kind === "pct" ? fmt.pct(v) : String(v));
  return {...c, label: `${c.label}${COMPUTED_MARK}`,
    title: `${c.title ? `${c.title}; ` : ""}${COMPUTED_MARK} computed from the launch configuration (occupancy calculator rules) where the tool gave none: not measured`,
    display: (i) => {
      const v = get(c.key, i);
      if (fmt.isMissing(v)) return fmt.MISSING;
      const source = get("occupancy_source", i);
      return source ? h("span", {class: "computed", "data-occupancy-source": source, title: String(source)}, show(v),
        h("sup", {class: "computed-mark"}, COMPUTED_MARK)) : show(v);
    }};
}

function launchTable(doc, ctx) {
  const units = doc.units || {};
  const n = doc.rows ?? 0;
  const get = columnReader(doc);
  const t = runTerms(ctx);
  const computed = computedRows(get, n);
  const columns = presentColumns(launchColumns(t), get, n).map((c) => ({...c,
    unit: c.unitCol ? units[c.unitCol] || null : c.unit,
    value: SIZE_FALLBACK[c.key] ? (i) => (fmt.isMissing(get(c.key, i)) ? get(SIZE_FALLBACK[c.key], i) : get(c.key, i)) : undefined}))
    .map((c) => (computed && COMPUTED_OCCUPANCY.has(c.key) ? markComputed(c, get) : c));
  const launchOf = (i) => get("launch_id", i) ?? i;
  const hidden = LAUNCH_COLUMNS.length - columns.length;
  const table = new DataTable({
    columns, rows: n, get, noun: "launches", role: "kernels",
    state: ctx.state, defaultSort: "", selected: ctx.state.launch ?? null,
    filterText: (i) => `${get("name", i) || ""}\n${get("demangled_name", i) || ""}`,
    fullName: (i) => get("demangled_name", i) || get("name", i),
    rowId: launchOf,
    rowAttrs: (i) => ({"data-launch-id": launchOf(i), "data-bound": get("bound", i) || null}),
    onRowClick: (i) => ctx.openLaunch(launchOf(i)),
    onState: (patch) => ctx.update(patch),
  });
  const notes = [];
  if (boundNotMeasured(get, n)) {
    notes.push(h("p", {class: "note", "data-role": "bound-note"}, `Bound: not measured. ${t.toolName} records when each kernel ran, `,
      `not how busy the ${t.sm}s and memory were, so no launch can be classified. For the bound, collect ${t.counters}.`));
  }
  if (computed) {
    notes.push(h("p", {class: "muted small", "data-role": "occupancy-source-note"},
      `${COMPUTED_MARK} Occ. theoretical and Occ. limiter of ${computed === n ? "every launch" : `${fmt.int(computed)} of ${fmt.int(n)} launches`}: `,
      `${t.toolName} gave none, so they are computed from the launch configuration (${t.block} size, registers, `,
      `${t.amd ? "LDS" : "shared memory"}) with the occupancy calculator's rules — theoretical, not measured.`));
  }
  if (hidden > 0 && n > 0) {
    notes.push(h("p", {class: "muted small", "data-role": "hidden-columns"},
      `${hidden} column${hidden === 1 ? "" : "s"} hidden: ${t.toolName} gave no value for ${hidden === 1 ? "it" : "them"} in any launch.`));
  }
  table.element.prepend(...notes);
  return table;
}

function groupTable(doc, ctx) {
  const groups = Array.isArray(doc.groups) ? doc.groups : [];
  const t = runTerms(ctx);
  // A trace's "unknown" bounds read "not measured (trace)", as in the launch table (the reason is the chip's title).
  const traced = `not measured (trace): ${t.toolName} records when kernels ran, not how busy the GPU was; collect ${t.counters}`;
  const get = (key, i) => (key === "bound_reason" && t.tracer ? traced : groups[i][key] ?? null);
  return new DataTable({
    columns: GROUP_COLUMNS, rows: groups.length, get, noun: "kernel names", role: "kernel-groups",
    state: ctx.state, defaultSort: "",
    filterText: (i) => `${groups[i].name || ""}\n${groups[i].demangled_name || ""}`,
    fullName: (i) => groups[i].demangled_name || groups[i].name,
    rowAttrs: (i) => ({"data-name": groups[i].name}),
    onRowClick: (i) => ctx.navigate({group: null, q: groups[i].name || null, sort: "duration_ns:desc", page: null}),
    onState: (patch) => ctx.update(patch),
  });
}
