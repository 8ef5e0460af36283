// Python stacks (PyTorch traces recorded with with_stack=True): the Python frames merged by call
// path as an icicle graph (flame.js), weighted by the GPU time of the kernels their operators
// launched, or by CPU time; a clicked frame lists the operators and GPU activities under it.

import {h, replace} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runView, stat} from "./common.js";
import {flameGraph} from "./flame.js";

const WEIGHTS = [
  {key: "gpu", label: "GPU time", unit: "ns", title: "width: GPU time of the kernels, copies and sets launched by the operators under the frame"},
  {key: "cpu", label: "CPU time", unit: "ns", title: "width: the frame's wall time on its thread, callees included"},
];

const OP_COLUMNS = [
  {key: "name", label: "Operator", kind: "name"},
  {key: "gpu_ns", label: "GPU time", unit: "ns", kind: "num", title: "GPU time the operator and the operators it called launched"},
  {key: "cpu_ns", label: "CPU time", unit: "ns", kind: "num"},
  {key: "calls", label: "Calls", kind: "int"},
];
const KERNEL_COLUMNS = [
  {key: "name", label: "Kernel", kind: "name"},
  {key: "gpu_ns", label: "GPU time", unit: "ns", kind: "num"},
  {key: "calls", label: "Launches", kind: "int"},
];

export const render = runView({draw});

/** Column arrays -> row objects. */
function rowsOf(columns) {
  const keys = Object.keys(columns || {});
  const n = keys.length ? columns[keys[0]].length : 0;
  return Array.from({length: n}, (_, i) => Object.fromEntries(keys.map((k) => [k, columns[k][i]])));
}

function draw(doc) {
  const frames = rowsOf(doc.frames);
  const opsByPath = new Map();
  for (const row of rowsOf(doc.ops)) {
    if (!opsByPath.has(row.path_id)) opsByPath.set(row.path_id, []);
    opsByPath.get(row.path_id).push(row);
  }
  const nodes = frames.map((f) => ({id: f.path_id, parent: f.parent_id, name: String(f.name ?? ""),
    weights: {gpu: f.gpu_ns || 0, cpu: f.cpu_total_ns || 0}}));
  const detail = h("section", {class: "frame-detail", "data-role": "frame-detail"},
    h("p", {class: "muted"}, "Click a frame to zoom into it and list its operators and kernels."));
  const totals = doc.totals || {};
  const graph = flameGraph({nodes, weights: WEIGHTS, weight: totals.gpu_ns > 0 ? "gpu" : "cpu",
    onSelect: (id) => showFrame(detail, id, frames, opsByPath)});
  return [h("div", {class: "totals", "data-role": "stacks-totals"},
    stat("GPU time under Python frames", fmt.duration(totals.gpu_ns), "stacks-gpu", totals.gpu_ns,
      {title: "kernels, copies and sets launched by operators that ran inside a recorded Python frame"}),
    stat("CPU time in Python frames", fmt.duration(totals.cpu_ns), "stacks-cpu", totals.cpu_ns,
      {title: "wall time of the outermost frames, summed over threads"}),
    stat("Call paths", fmt.int(frames.length), "stacks-paths", frames.length,
      {note: "paths under 0.1 % of both totals merged into “(other)”"})),
  h("div", {class: "stacks-layout"}, graph.element, detail)];
}

/** The frame's subtree's operators and GPU activities, summed by name. */
function showFrame(slot, id, frames, opsByPath) {
  if (id === null) {
    replace(slot, h("p", {class: "muted"}, "Click a frame to zoom into it and list its operators and kernels."));
    return;
  }
  const under = new Set([id]);
  for (const f of frames) if (under.has(f.parent_id)) under.add(f.path_id);  // parents come first
  const sum = (kind) => {
    const byName = new Map();
    for (const pathId of under) {
      for (const r of opsByPath.get(pathId) || []) {
        if (r.kind !== kind) continue;
        const acc = byName.get(r.name) || {name: r.name, calls: 0, cpu_ns: 0, gpu_ns: 0};
        acc.calls += r.calls || 0;
        acc.cpu_ns += r.cpu_ns || 0;
        acc.gpu_ns += r.gpu_ns || 0;
        byName.set(r.name, acc);
      }
    }
    return [...byName.values()].sort((a, b) => b.gpu_ns - a.gpu_ns || b.cpu_ns - a.cpu_ns);
  };
  const frame = frames.find((f) => f.path_id === id);
  const ops = sum("op");
  const kernels = sum("kernel");
  replace(slot,
    h("h3", null, "Frame ", h("span", {class: "mono", "data-role": "frame-name"}, String(frame ? frame.name : ""))),
    h("p", {class: "muted small"}, frame ? `${fmt.int(frame.calls)} calls · CPU ${fmt.duration(frame.cpu_total_ns)} · ` +
      `GPU ${fmt.duration(frame.gpu_ns)}` : ""),
    h("h4", null, `Operators (${ops.length})`),
    ops.length ? table(ops, OP_COLUMNS, "frame-ops", "operators") : h("p", {class: "muted"}, "No operator ran under this frame."),
    h("h4", null, `Kernels (${kernels.length})`),
    kernels.length ? table(kernels, KERNEL_COLUMNS, "frame-kernels", "kernels") : h("p", {class: "muted"}, "No GPU work was launched under this frame."));
}

function table(rows, columns, role, noun) {
  const get = (key, i) => rows[i][key] ?? null;
  return new DataTable({columns, rows: rows.length, get, state: {}, defaultSort: "", noun, role, pageSize: 50,
    filterText: (i) => rows[i].name || "", fullName: (i) => rows[i].name, rowId: (i) => rows[i].name}).element;
}
