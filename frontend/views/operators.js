// Operators (PyTorch runs): one row per operator from /operators, by GPU time, with its FLOPs,
// FLOP/s, byte/s and bound where the run has op shapes.  A row opens the operator: its input
// shapes, and its kernels grouped by name; a kernel opens the kernel drawer on its longest launch.
// A run joined with a counter report (tb-hwprof profile ncu, export --join) adds hardware counters
// per operator and per kernel, time-weighted over the launches that have them; a kernel then opens
// the drawer on its longest launch with counters (the report's sections).

import {h, replace} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runView, stat} from "./common.js";

// What decides first (the name stays in sight when the table scrolls sideways): GPU time, the bound and,
// in a joined run, the counters behind it; then FLOPs and bytes, then calls and CPU time.
const OP_COLUMNS = [
  {key: "op", label: "Operator", kind: "name"},
  {key: "direct_gpu_ns", label: "GPU self", unit: "ns", kind: "num",
    title: "GPU time of the kernels, copies and sets the operator launched itself"},
  {key: "pct_gpu", label: "GPU", kind: "pct", title: "share of all operators' GPU self time"},
  {key: "bound", label: "Bound (roofline)", kind: "bound", shapes: true, title: "the side of the ridge point its longest-running shape's FLOPs per byte fall on (hover for the figures)"},
  {key: "sm_throughput_pct", label: "SM", kind: "pct", counters: true, title: "SM throughput, % of peak, time-weighted"},
  {key: "memory_throughput_pct", label: "Memory", kind: "pct", counters: true, title: "memory throughput, % of peak, time-weighted"},
  {key: "achieved_occupancy_pct", label: "Occupancy", kind: "pct", counters: true,
    title: "achieved occupancy of its kernels, weighted by their time (joined counter report)"},
  {key: "l1_hit_rate_pct", label: "L1 hit", kind: "pct", counters: true, title: "L1/TEX hit rate, time-weighted"},
  {key: "l2_hit_rate_pct", label: "L2 hit", kind: "pct", counters: true, title: "L2 hit rate, time-weighted"},
  {key: "bound_mix", label: "Bound mix (counters)", kind: "text", counters: true, title: "the counters' labels of its counted kernels, by share of their time (Nsight Compute's speed-of-light rule on SM and memory throughput (% of peak))"},
  {key: "bound_note", label: "Methods", kind: "text", counters: true, shapes: true, title: "where the roofline and the counters name opposite sides (hover for the figures)",
    display: disagreement},
  {key: "subtree_gpu_ns", label: "GPU total", unit: "ns", kind: "num", title: "GPU time launched by the operator and the operators it called"},
  {key: "flops", label: "FLOPs", unit: "FLOP", kind: "num", shapes: true, title: "FLOPs of all its calls (from its input shapes)"},
  {key: "flop_per_s", label: "FLOP/s", unit: "FLOP/s", kind: "num", shapes: true, title: "FLOPs over the GPU time of the shapes that have them"},
  {key: "bytes_per_s", label: "Bytes/s", unit: "byte/s", kind: "num", shapes: true, title: "bytes its inputs and outputs move, over GPU time"},
  {key: "intensity", label: "FLOP/byte", kind: "num", shapes: true, display: (v) => fmt.num(v)},
  {key: "instances", label: "Calls", kind: "int", title: "times the operator ran"},
  {key: "calls", label: "GPU calls", kind: "int", title: "calls that launched GPU work themselves"},
  {key: "kernels", label: "Launches", kind: "int", title: "kernels, copies and sets launched by the operator itself"},
  {key: "cpu_self_ns", label: "CPU self", unit: "ns", kind: "num", title: "CPU time less that of the operators it called"},
  {key: "cpu_total_ns", label: "CPU total", unit: "ns", kind: "num"},
  {key: "category", label: "Category", kind: "text", shapes: true, title: "category of its longest-running shape"},
  {key: "counted_kernels", label: "Counted", kind: "int", counters: true, title: "its kernel launches that have counters (matched in the report)"},
];

const SHAPE_COLUMNS = [
  {key: "input_dims", label: "Input dims", kind: "text"},
  {key: "gpu_ns", label: "GPU time", unit: "ns", kind: "num", title: "GPU time of its calls, with the operators they called"},
  {key: "flops_per_call", label: "FLOPs/call", unit: "FLOP", kind: "num"},
  {key: "bound", label: "Bound (roofline)", kind: "bound", title: "the side of the ridge point the shape's FLOPs per byte fall on (hover for the figures)"},
  {key: "flop_per_s", label: "FLOP/s", unit: "FLOP/s", kind: "num"},
  {key: "bytes_per_s", label: "Bytes/s", unit: "byte/s", kind: "num"},
  {key: "intensity", label: "FLOP/byte", kind: "num", display: (v) => fmt.num(v)},
  {key: "calls", label: "Calls", kind: "int"},
  {key: "bytes_per_call", label: "Bytes/call", unit: "bytes", kind: "num"},
  {key: "input_types", label: "Input types", kind: "text"},
  {key: "concrete_inputs", label: "Concrete inputs", kind: "text"},
  {key: "category", label: "Category", kind: "text"},
  {key: "peak_source", label: "Peaks", kind: "text", title: "where the roofs it is judged against come from"},
];

const KERNEL_COLUMNS = [
  {key: "name", label: "Kernel", kind: "name"},
  {key: "total_ns", label: "Total", unit: "ns", kind: "num"},
  {key: "share", label: "Of op", kind: "pct", title: "share of the operator's GPU self time"},
  {key: "sm_throughput_pct", label: "SM", kind: "pct", counters: true},
  {key: "memory_throughput_pct", label: "Memory", kind: "pct", counters: true},
  {key: "achieved_occupancy_pct", label: "Occupancy", kind: "pct", counters: true, title: "time-weighted over its counted launches"},
  {key: "l1_hit_rate_pct", label: "L1 hit", kind: "pct", counters: true},
  {key: "l2_hit_rate_pct", label: "L2 hit", kind: "pct", counters: true},
  {key: "count", label: "Launches", kind: "int"},
  {key: "mean_ns", label: "Mean", unit: "ns", kind: "num"},
  {key: "min_ns", label: "Min", unit: "ns", kind: "num"},
  {key: "max_ns", label: "Max", unit: "ns", kind: "num"},
  {key: "counted", label: "Counted", kind: "int", counters: true, title: "launches with counters (matched in the report)"},
];

/** Columns with values somewhere in `rows`: the shape and counter figures only where some row has them. */
function present(columns, rows) {
  return columns.filter((c) => !(c.shapes || c.counters) || rows.some((r) => !fmt.isMissing(r[c.key])));
}

/** The launch a kernel row opens: its longest launch with counters in a joined run, else its longest. */
function launchOf(row) {
  return fmt.isMissing(row.counted_launch) ? row.longest_launch : row.counted_launch;
}

// Its kernels open the kernel-detail drawer.
export const opensLaunches = true;

export const render = runView({
  draw,
  select: (view, launch) => { if (view.kernelTable) view.kernelTable.setSelected(launch); },
});

const OPS_PER_PAGE = 20;  // the operator's shapes and kernels show below the table: keep them in sight

/** Columns whose display(value) formats a unitless figure, as DataTable's display(i) wants. */
function bind(columns, get) {
  return columns.map((c) => (c.display ? {...c, display: (i) => c.display(get(c.key, i))} : c));
}

/** A DataTable over an array of row objects. */
function rowsTable(rows, columns, opts) {
  const get = (key, i) => rows[i][key] ?? null;
  return new DataTable({columns: bind(columns, get), rows: rows.length, get, state: {}, defaultSort: "", ...opts});
}

function draw(doc, ctx, view) {
  const ops = Array.isArray(doc.ops) ? doc.ops : [];
  const shapes = doc.shapes && typeof doc.shapes === "object" ? doc.shapes : {};
  const kernels = doc.kernels && typeof doc.kernels === "object" ? doc.kernels : {};
  // The shape figures only where some operator has them (a trace recorded without shapes has none).
  const columns = present(OP_COLUMNS, ops);
  const detail = h("section", {class: "op-detail", "data-role": "op-detail"});
  const known = (op) => ops.some((r) => r.op === op);
  const show = (op) => {
    view.opTable.setSelected(op);
    view.kernelTable = drawDetail(detail, ops.find((r) => r.op === op), shapes[op], kernels[op], doc.has_shapes, ctx);
  };
  const get = (key, i) => ops[i][key] ?? null;
  view.opTable = new DataTable({
    columns: bind(columns, get), rows: ops.length, get, noun: "operators", role: "operators",
    state: {...ctx.state, page: pageOf(ops, ctx.state)}, defaultSort: "", selected: null, pageSize: OPS_PER_PAGE,
    filterText: (i) => `${ops[i].op || ""}\n${ops[i].modules || ""}`, fullName: (i) => ops[i].op, rowId: (i) => ops[i].op,
    rowAttrs: (i) => ({"data-op": ops[i].op}),
    onRowClick: (i) => { ctx.update({op: ops[i].op}); show(ops[i].op); },
    onState: (patch) => ctx.update(patch),
  });
  const first = known(ctx.state.op) ? ctx.state.op : ops.length ? ops[0].op : null;
  if (first !== null) show(first);
  return [headline(doc, ops), doc.has_shapes ? null : h("p", {class: "muted note", "data-role": "no-shapes"},
    "This run has no op_shapes table (exported before tb-hwprof counted FLOPs per input shape): re-export it " +
    "with --overwrite for FLOPs, FLOP/s, bytes/s and the bound of each operator."),
  h("p", {class: "legend muted"}, "GPU self: kernels, copies and sets the operator launched itself; GPU total adds the " +
    "operators it called. Click an operator for its shapes and kernels, a kernel for its longest launch."),
  doc.has_counters ? h("p", {class: "legend muted", "data-role": "counters-note"}, "Hardware counters from the " +
    "joined counter report (see the run's notes and its counter_join table): averaged over the kernels matched " +
    "by name and launch order, weighted by their time in the trace; kernels not matched have none.") : null,
  view.opTable.element, detail];
}

/** The page to open: the state's, else (server order, no filter: a link from the Roofline) the opened operator's. */
function pageOf(ops, state) {
  if (state.page !== undefined || state.sort || state.q || !state.op) return state.page;
  const index = ops.findIndex((r) => r.op === state.op);
  return index > 0 ? String(Math.floor(index / OPS_PER_PAGE)) : undefined;
}

function headline(doc, ops) {
  const launching = ops.filter((r) => (r.direct_gpu_ns || 0) > 0);
  const top = launching[0];
  return h("div", {class: "totals", "data-role": "headline"},
    stat("GPU time (operators)", fmt.duration(doc.total_gpu_ns), "ops-gpu-time", doc.total_gpu_ns,
      {title: "sum of the operators' GPU self time"}),
    stat("Operators launching GPU work", fmt.int(launching.length), "ops-launching", launching.length,
      {note: `${fmt.int(ops.length)} operators in all`}),
    top ? stat("Top operator", `${fmt.pct(top.pct_gpu)} %`, "top-op-share", top.pct_gpu, {note: top.op}) : null);
}

function drawDetail(slot, op, shapes, kernels, hasShapes, ctx) {
  if (!op) {
    replace(slot);
    return null;
  }
  const shapeRows = Array.isArray(shapes) ? shapes : [];
  const kernelRows = (Array.isArray(kernels) ? kernels : []).map((k) => ({
    ...k, share: op.direct_gpu_ns > 0 && k.total_ns !== null ? 100 * k.total_ns / op.direct_gpu_ns : null}));
  const kernelTable = kernelRows.length ? rowsTable(kernelRows, present(KERNEL_COLUMNS, kernelRows), {
    noun: "kernels", role: "op-kernels", filterPlaceholder: "Filter kernels…",
    selected: ctx.state.launch ?? null,
    filterText: (i) => `${kernelRows[i].name || ""}\n${kernelRows[i].demangled_name || ""}`,
    fullName: (i) => kernelRows[i].demangled_name || kernelRows[i].name,
    rowId: (i) => launchOf(kernelRows[i]),
    rowAttrs: (i) => ({"data-name": kernelRows[i].name, "data-launch-id": launchOf(kernelRows[i])}),
    onRowClick: (i) => ctx.openLaunch(launchOf(kernelRows[i])),
  }) : null;
  const copies = (op.kernels || 0) - kernelRows.reduce((n, k) => n + (k.count || 0), 0);
  replace(slot,
    h("h3", null, "Operator ", h("span", {class: "mono", "data-role": "op-name"}, op.op)),
    h("section", null, h("h4", null, hasShapes ? `Input shapes (${shapeRows.length})` : "Input shapes"),
      shapeRows.length ? rowsTable(shapeRows, SHAPE_COLUMNS, {noun: "shapes", role: "op-shapes",
        filterPlaceholder: "Filter shapes…", filterText: (i) => `${shapeRows[i].input_dims || ""} ${shapeRows[i].input_types || ""}`}).element
        : h("p", {class: "muted", "data-role": "op-shapes-empty"}, hasShapes
          ? "No shape of this operator launched GPU work with a FLOP or byte count."
          : "No op_shapes table in this run.")),
    h("section", null, h("h4", null, `Kernels by name (${kernelRows.length})`),
      kernelTable ? kernelTable.element : h("p", {class: "muted", "data-role": "op-kernels-empty"},
        "The operator launched no kernel itself (its GPU time, if any, is in the operators it called)."),
      copies > 0 ? h("p", {class: "muted small"}, `${fmt.plural(copies, "copy or set", "copies / sets")} it launched ${copies === 1 ? "counts" : "count"} in its GPU time, not listed here.`) : null));
  return kernelTable;
}

/** The Methods cell: "disagree" with the sentence as its tooltip, where the roofline side of the
 * operator's shapes and its kernels' counters name opposite sides (/operators bound_note). */
function disagreement(note) {
  return fmt.isMissing(note) ? "" : h("span", {class: "disagree-chip", title: note, "data-role": "bound-disagree"}, "disagree");
}
