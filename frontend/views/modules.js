// Modules (PyTorch traces recorded with with_modules=True or with_stack=True): the nn.Module tree
// as torch-tb-profiler's Module view measures it (analysis/torch_modules.py), per ProfilerStep#N
// or summed over the steps: host and device time, total and self, operators and GPU activities
// under each module.  A module's name lists the operators inside it with their figures in that
// module only (module_ops); each operator opens the Operators view, whose figures are the whole run's.

import {h, replace} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runView, stat} from "./common.js";

const FIGURES = ["calls", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns", "operators", "kernels"];
const COLUMNS = [
  {key: "calls", label: "Calls", kind: "int", title: "times the module's forward ran"},
  {key: "host_total_ns", label: "Host total", unit: "ns", title: "wall time of its forward calls on the CPU"},
  {key: "host_self_ns", label: "Host self", unit: "ns", title: "host time less that of the operators and modules directly inside it"},
  {key: "device_total_ns", label: "Device total", unit: "ns", bar: true, title: "GPU time launched by every operator inside it"},
  {key: "device_self_ns", label: "Device self", unit: "ns", title: "GPU time launched by the operators directly inside it (not by its submodules)"},
  {key: "operators", label: "Operators", kind: "int", title: "operator calls directly inside it"},
  {key: "kernels", label: "Kernels", kind: "int", title: "kernels, copies and sets launched under it"},
];

// The operators inside a module, as measured there (module_ops, over the whole trace).
const OP_COLUMNS = [
  {key: "op", label: "Operator", kind: "name"},
  {key: "pass", label: "Pass", kind: "text",
    title: "forward: ran inside the module; backward: ran under the autograd node of its forward operators (same sequence number)"},
  {key: "device_ns", label: "GPU self", unit: "ns", kind: "num",
    title: "GPU time of the kernels, copies and sets it launched itself, inside this module"},
  {key: "device_total_ns", label: "GPU total", unit: "ns", kind: "num",
    title: "GPU time launched by it and the operators it called, inside this module"},
  {key: "calls", label: "Calls", kind: "int", title: "times it ran inside this module"},
  {key: "host_total_ns", label: "CPU total", unit: "ns", kind: "num", title: "its wall time on the CPU inside this module"},
];
const OP_FIGURES = OP_COLUMNS.filter((c) => c.kind !== "name" && c.kind !== "text").map((c) => c.key);

export const render = runView({draw});

/** Per operator name and pass: module_ops rows of `path` and of its submodules, summed (null where a run
 * exported before a figure was kept has none), by GPU self time. */
function opsInside(ops, path) {
  const byOp = new Map();
  for (const r of ops) {
    if (r.path !== path && !String(r.path).startsWith(`${path}/`)) continue;
    const pass = r.pass || "forward";  // runs exported before backward operators were linked: forward only
    const id = `${pass}/${r.op}`;
    let row = byOp.get(id);
    if (!row) {
      row = {id, op: r.op, pass};
      for (const key of OP_FIGURES) row[key] = 0;
      byOp.set(id, row);
    }
    for (const key of OP_FIGURES) row[key] = fmt.isMissing(r[key]) || row[key] === null ? null : row[key] + r[key];
  }
  return [...byOp.values()].sort((a, b) => (b.device_ns || 0) - (a.device_ns || 0)
    || (b.device_total_ns || 0) - (a.device_total_ns || 0) || (b.host_total_ns || 0) - (a.host_total_ns || 0));
}

/** The module's operators table, each name opening the Operators view on that operator. */
function moduleOps(path, ops, ctx, stepShown) {
  const rows = opsInside(ops, path);
  const get = (key, i) => rows[i][key] ?? null;
  const columns = OP_COLUMNS.map((c) => (c.kind === "name" ? {...c, display: (i) => h("a", {href: "#", "data-role": "op-link",
    title: "open this operator in the Operators view (its figures over the whole run, every module)",
    onclick: (e) => { e.preventDefault(); e.stopPropagation(); ctx.navigate({view: "operators", op: rows[i].op, q: null, page: null, sort: null}); }},
  rows[i].op)} : c));
  const table = new DataTable({columns, rows: rows.length, get, state: {}, defaultSort: "", noun: "operators",
    role: "module-operators", rowId: (i) => rows[i].id, fullName: (i) => rows[i].op});
  const sum = (pass) => rows.reduce((acc, r) => acc + (r.pass === pass ? r.device_ns || 0 : 0), 0);
  const self = sum("forward");
  const backward = sum("backward");
  return [h("h3", null, "Operators inside ", h("span", {class: "mono"}, path), " (its submodules included)"),
    h("p", {class: "legend muted", "data-role": "module-ops-legend", "data-value": self, "data-backward": backward},
      `Their calls and times inside this module only, over the whole trace${stepShown === "all" ? "" : " (every step, not only the one picked above)"}: ` +
      `the forward pass's GPU self sums to ${fmt.duration(self)}, the module's device total over the trace` +
      (backward > 0 ? `; its backward pass (operators run under the autograd nodes its forward operators made) ${fmt.duration(backward)} more` : "") +
      ". An operator's name opens it in the Operators view, whose figures are the whole run's."),
    table.element];
}

/** Per path: its figures summed over the rows of `step` ("all": every step), its children, in first-run order. */
function treeOf(rows, step) {
  const nodes = new Map();
  const pathOf = new Map(rows.map((r) => [r.path_id, r.path]));
  for (const r of rows) {
    if (step !== "all" && String(r.step) !== step) continue;
    let node = nodes.get(r.path);
    if (!node) {
      node = {path: r.path, module: r.module, depth: r.depth, parent: pathOf.get(r.parent_id) ?? null, children: []};
      for (const key of FIGURES) node[key] = 0;
      nodes.set(r.path, node);
    }
    for (const key of FIGURES) node[key] += r[key] || 0;
  }
  const roots = [];
  for (const node of nodes.values()) (nodes.get(node.parent) ? nodes.get(node.parent).children : roots).push(node);
  return roots;
}

function draw(doc, ctx) {
  const rows = Array.isArray(doc.rows) ? doc.rows : [];
  const steps = Array.isArray(doc.steps) ? doc.steps : [];
  const expanded = new Set();
  const state = {step: "all"};
  const ops = Array.isArray(doc.ops) ? doc.ops : [];
  const body = h("tbody");
  const detail = h("section", {class: "module-detail", "data-role": "module-detail"});
  const totals = h("div", {class: "totals", "data-role": "module-totals"});
  const picker = h("select", {"data-role": "module-step", "aria-label": "step",
    onchange: () => { state.step = picker.value; fill(); if (state.open) show(state.open); }},
  h("option", {value: "all"}, "All steps (summed)"),
  steps.map((s) => h("option", {value: String(s)}, s < 0 ? "Outside the steps" : `ProfilerStep#${s}`)));
  const openAll = (open) => () => {
    expanded.clear();
    if (open) for (const r of rows) expanded.add(r.path);
    fill();
  };

  function fill() {
    const roots = treeOf(rows, state.step);
    const scale = roots.reduce((m, n) => Math.max(m, n.device_total_ns), 0);
    const out = [];
    const walk = (list) => {
      for (const node of [...list].sort((a, b) => b.device_total_ns - a.device_total_ns || b.host_total_ns - a.host_total_ns)) {
        out.push(rowOf(node, scale));
        if (expanded.has(node.path)) walk(node.children);
      }
    };
    walk(roots);
    replace(body, out);
    replace(totals, headline(roots));
  }

  function show(path) {
    state.open = path;
    fill();
    replace(detail, moduleOps(path, ops, ctx, state.step));
  }

  function rowOf(node, scale) {
    const open = expanded.has(node.path);
    const toggle = node.children.length
      ? h("button", {type: "button", class: "tree-toggle", "data-role": "toggle", "aria-expanded": open ? "true" : "false",
        "aria-label": `${open ? "collapse" : "expand"} ${node.module}`,
        onclick: () => { if (open) expanded.delete(node.path); else expanded.add(node.path); fill(); }}, open ? "▾" : "▸")
      : h("span", {class: "tree-toggle leaf"});
    const link = h("a", {href: "#", class: "module-link", "data-role": "module-ops",
      title: `Operators inside ${node.path} (its submodules included), with their figures in it`,
      onclick: (e) => { e.preventDefault(); show(node.path); }},
    node.module);
    return h("tr", {"data-row-id": node.path, "data-depth": node.depth, class: state.open === node.path ? "selected" : null},
      h("td", {"data-col": "module", "data-value": node.module, class: "name-cell"},
        h("span", {class: "tree-indent", style: {"padding-left": `${node.depth * 16}px`}}, toggle, link)),
      COLUMNS.map((c) => cell(c, node[c.key], scale)));
  }

  fill();
  return [totals,
    h("div", {class: "toolbar"}, h("label", null, "Step ", picker),
      h("button", {type: "button", onclick: openAll(true), "data-role": "expand-all"}, "Expand all"),
      h("button", {type: "button", onclick: openAll(false), "data-role": "collapse-all"}, "Collapse all")),
    h("p", {class: "legend muted"}, "Host: the module's forward on the CPU; device: the GPU time its operators launched " +
      "(self: operators directly inside it, total: its submodules too), as torch-tb-profiler's Module view. " +
      "Click a module for the operators inside it, with their figures in that module."),
    h("div", {class: "table-wrap"}, h("table", {class: "data module-tree", "data-role": "modules"},
      h("thead", null, h("tr", null, h("th", null, "Module"), COLUMNS.map((c) => h("th", {title: c.title, class: "num"}, c.label)))),
      body)), detail];
}

function cell(column, value, scale) {
  const shown = column.kind === "int" ? fmt.int(value) : fmt.duration(value);
  const bar = column.bar && scale > 0
    ? h("span", {class: "module-bar", style: {width: `${Math.max(0, Math.min(100, 100 * value / scale))}%`}}) : null;
  return h("td", {"data-col": column.key, "data-value": value, class: "num"}, bar, h("span", {class: "cell-text"}, shown));
}

function headline(roots) {
  const sum = (key) => roots.reduce((acc, n) => acc + n[key], 0);
  const count = (list) => list.reduce((acc, n) => acc + 1 + count(n.children), 0);
  return [stat("Device time under modules", fmt.duration(sum("device_total_ns")), "modules-device", sum("device_total_ns")),
    stat("Host time in modules", fmt.duration(sum("host_total_ns")), "modules-host", sum("host_total_ns")),
    stat("Modules", fmt.int(count(roots)), "modules-count", count(roots), {note: "module paths in the tree"})];
}
