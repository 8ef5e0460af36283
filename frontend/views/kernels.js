// Kernels: one row per launch (from /kernels) or grouped by name (/kernel_groups).

import {getJSON, columnReader} from "../api.js";
import {h} from "../dom.js";
import {DataTable} from "./table.js";
import {runView, ownDocument} from "./common.js";

/** Columns of the launch table; `unit` names a column of the response's units map. */
export const LAUNCH_COLUMNS = [
  {key: "launch_id", label: "#", kind: "int", title: "launch index in the report"},
  {key: "name", label: "Kernel", kind: "name"},
  {key: "duration_ns", label: "Duration", unitCol: "duration_ns", kind: "num", title: "GPU time of the launch"},
  {key: "grid", label: "Grid", kind: "text", sortKey: "grid_size", title: "grid dimensions (sorted by blocks in the grid)"},
  {key: "block", label: "Block", kind: "text", sortKey: "block_size", title: "block dimensions (sorted by threads per block)"},
  {key: "registers_per_thread", label: "Regs/thread", kind: "int"},
  {key: "shared_mem_bytes", label: "Shared mem/block", unitCol: "shared_mem_bytes", kind: "num"},
  {key: "achieved_occupancy_pct", label: "Occ. achieved", kind: "pct", grade: "occupancy", title: "achieved occupancy (≥ 50% good)"},
  {key: "theoretical_occupancy_pct", label: "Occ. theoretical", kind: "pct", grade: "occupancy"},
  {key: "occupancy_limiter", label: "Occ. limiter", kind: "text"},
  {key: "sm_throughput_pct", label: "SM", kind: "pct", grade: "throughput", title: "compute (SM) throughput, % of peak"},
  {key: "memory_throughput_pct", label: "Memory", kind: "pct", grade: "throughput", title: "memory throughput, % of peak (busiest unit)"},
  {key: "dram_throughput_pct", label: "DRAM", kind: "pct", grade: "throughput", title: "DRAM throughput, % of peak"},
  {key: "l1_hit_rate_pct", label: "L1 hit", kind: "pct"},
  {key: "l2_hit_rate_pct", label: "L2 hit", kind: "pct"},
  {key: "dram_bytes", label: "DRAM bytes", unitCol: "dram_bytes", kind: "num"},
  {key: "flop_per_s", label: "FLOP/s", unitCol: "flop_per_s", kind: "num", title: "achieved FLOP/s"},
  {key: "bound", label: "Bound", kind: "bound", title: "classifier label (hover a label for the reason)"},
];

const GROUP_COLUMNS = [
  {key: "name", label: "Kernel", kind: "name"},
  {key: "calls", label: "Calls", kind: "int"},
  {key: "total_ns", label: "Total", unit: "ns", kind: "num"},
  {key: "pct_time", label: "Time", kind: "pct", title: "% of the run's kernel time"},
  {key: "mean_ns", label: "Mean", unit: "ns", kind: "num"},
  {key: "min_ns", label: "Min", unit: "ns", kind: "num"},
  {key: "max_ns", label: "Max", unit: "ns", kind: "num"},
  {key: "bound", label: "Bound", kind: "bound", title: "label covering most of the group's time"},
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

function launchTable(doc, ctx) {
  const units = doc.units || {};
  const n = doc.rows ?? 0;
  const get = columnReader(doc);
  const columns = LAUNCH_COLUMNS.map((c) => ({...c, unit: c.unitCol ? units[c.unitCol] || null : c.unit}));
  const launchOf = (i) => get("launch_id", i) ?? i;
  return new DataTable({
    columns, rows: n, get, noun: "launches", role: "kernels",
    state: ctx.state, defaultSort: "", selected: ctx.state.launch ?? null,
    filterText: (i) => `${get("name", i) || ""}\n${get("demangled_name", i) || ""}`,
    fullName: (i) => get("demangled_name", i) || get("name", i),
    rowId: launchOf,
    rowAttrs: (i) => ({"data-launch-id": launchOf(i), "data-bound": get("bound", i) || null}),
    onRowClick: (i) => ctx.openLaunch(launchOf(i)),
    onState: (patch) => ctx.update(patch),
  });
}

function groupTable(doc, ctx) {
  const groups = Array.isArray(doc.groups) ? doc.groups : [];
  const get = (key, i) => groups[i][key] ?? null;
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
