// Compare two runs: totals and speedup, matched kernels with metric deltas,
// label changes, and kernels found in only one run.

import {getJSON} from "../api.js";
import {h, replace, kernelName} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";
import {fetchInto, stat} from "./common.js";

const DELTAS = [
  ["sm_throughput_pct", "SM"],
  ["memory_throughput_pct", "Memory"],
  ["dram_throughput_pct", "DRAM"],
  ["achieved_occupancy_pct", "Occupancy"],
  ["l1_hit_rate_pct", "L1 hit"],
  ["l2_hit_rate_pct", "L2 hit"],
];

function speedupClass(v) {
  if (fmt.isMissing(v)) return "";
  return v > 1.02 ? "faster" : v < 0.98 ? "slower" : "same";
}

export function render(container, ctx) {
  const good = ctx.runs.filter((r) => !r.error).map((r) => r.run);
  const all = ctx.runs.map((r) => r.run);
  let base = all.includes(ctx.state.base) ? ctx.state.base : good[0];
  let other = all.includes(ctx.state.run) && ctx.state.run !== base ? ctx.state.run : good.find((r) => r !== base) || base;
  if (base !== ctx.state.base || other !== ctx.state.run) ctx.update({base, run: other});

  const picker = (role, value, onPick) => h("select", {"data-role": role, onchange: (e) => onPick(e.target.value)},
    ctx.runs.map((r) => h("option", {value: r.run, selected: r.run === value}, r.error ? `${r.run} (error)` : r.run)));
  const swap = h("button", {type: "button", title: "swap baseline and run", onclick: () => ctx.navigate({base: other, run: base})}, "⇄");
  container.append(h("div", {class: "view-head"}, h("h2", null, "Compare")),
    h("div", {class: "toolbar compare-pick"},
      h("label", null, "Baseline ", picker("base-picker", base, (v) => ctx.navigate({base: v}))), swap,
      h("label", null, " Run ", picker("run-picker-compare", other, (v) => ctx.navigate({run: v})))));
  const slot = h("div");
  container.append(slot);
  if (!base || !other) {
    slot.appendChild(h("p", {class: "muted"}, "Compare needs two runs."));
    return null;
  }
  load(slot, ctx, base, other).catch((e) => console.error(e));
  return null;
}

async function load(slot, ctx, base, other) {
  const doc = await fetchInto(slot, getJSON(ctx.view.route, {base, run: other}), `comparison of ${base} and ${other}`, ctx);
  if (!doc) return;
  const t = doc.totals || {};
  const totals = h("div", {class: "totals", "data-role": "totals"},
    stat("Baseline", fmt.duration(t.base_ns), "base_ns", t.base_ns, {note: base}),
    stat("Run", fmt.duration(t.run_ns), "run_ns", t.run_ns, {note: other}),
    h("div", {class: ["stat", "speedup", speedupClass(t.speedup)]},
      h("div", {class: "stat-label"}, "Speedup (baseline / run)"),
      h("div", {class: "stat-value", "data-role": "speedup", "data-value": t.speedup ?? null}, fmt.ratio(t.speedup))));

  const matched = Array.isArray(doc.matched) ? doc.matched : [];
  const rows = matched.map((m) => {
    const changed = (m.base_bound || "") !== (m.run_bound || "");
    return h("tr", {"data-key": m.key, class: changed ? "label-changed" : null},
      h("td", null, kernelName(m.name || m.key, m.key || m.name)),
      h("td", {class: "numeric", "data-col": "base_ns", "data-value": m.base_ns ?? null}, fmt.duration(m.base_ns)),
      h("td", {class: "numeric", "data-col": "run_ns", "data-value": m.run_ns ?? null}, fmt.duration(m.run_ns)),
      h("td", {class: ["numeric", speedupClass(m.speedup)], "data-col": "speedup", "data-value": m.speedup ?? null}, fmt.ratio(m.speedup)),
      h("td", {"data-col": "bound"}, boundChip(m.base_bound, null, null), changed ? [" → ", boundChip(m.run_bound, null, null)] : null),
      DELTAS.map(([key]) => {
        const d = m.deltas ? m.deltas[key] : null;
        return h("td", {class: ["numeric", "delta", fmt.isMissing(d) ? "missing" : d > 0 ? "up" : d < 0 ? "down" : ""],
          "data-col": key, "data-value": fmt.isMissing(d) ? null : d}, fmt.signed(d, 1));
      }));
  });
  const matchedSection = h("section", null, h("h3", null, `Matched kernels (${matched.length})`),
    matched.length ? h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "matched"},
      h("thead", null, h("tr", null, h("th", null, "Kernel"), h("th", null, "Baseline"), h("th", null, "Run"),
        h("th", {title: "baseline duration / run duration"}, "Speedup"), h("th", null, "Bound"),
        DELTAS.map(([key, label]) => h("th", {title: `${key}: run minus baseline, percentage points`}, `Δ ${label} (pp)`)))),
      h("tbody", null, rows)))
      : h("p", {class: "muted"}, "No kernel name appears in both runs (a renamed kernel shows in the lists below); the totals still compare."));

  const onlyList = (title, items, role) => h("section", null, h("h3", null, `${title} (${items.length})`),
    items.length ? h("table", {class: "data", "data-role": role}, h("tbody", null, items.map((o) =>
      h("tr", {"data-key": o.key}, h("td", null, kernelName(o.name || o.key, o.key || o.name)),
        h("td", {class: "numeric", "data-value": o.total_ns ?? null}, fmt.duration(o.total_ns))))))
      : h("p", {class: "muted"}, "none"));

  replace(slot, totals, matchedSection,
    h("div", {class: "two-col"},
      onlyList("Only in baseline", Array.isArray(doc.only_in_base) ? doc.only_in_base : [], "only-in-base"),
      onlyList("Only in run", Array.isArray(doc.only_in_run) ? doc.only_in_run : [], "only-in-run")),
    h("p", {class: "muted small"}, "Deltas are run minus baseline in percentage points; green = higher, red = lower (higher throughput is usually better; a lower hit rate may not matter for a compute-bound kernel)."),
    doc.phases ? phasesSection(doc.phases) : null);
}

// NVTX phases matched by range name (both runs traced with NVTX ranges).
function phasesSection(phases) {
  const matched = Array.isArray(phases.matched) ? phases.matched : [];
  const only = (side) => (Array.isArray(phases[side]) ? phases[side] : []).length;
  const rows = matched.map((m) => h("tr", {"data-name": m.name},
    h("td", null, kernelName(m.name, m.name)),
    h("td", {class: "numeric", "data-col": "base_instances"}, fmt.int(m.base_instances)),
    h("td", {class: "numeric", "data-col": "run_instances"}, fmt.int(m.run_instances)),
    h("td", {class: "numeric", "data-col": "base_ns", "data-value": m.base_ns ?? null}, fmt.duration(m.base_ns)),
    h("td", {class: "numeric", "data-col": "run_ns", "data-value": m.run_ns ?? null}, fmt.duration(m.run_ns)),
    h("td", {class: ["numeric", speedupClass(m.speedup)], "data-col": "speedup", "data-value": m.speedup ?? null}, fmt.ratio(m.speedup)),
    h("td", {class: "numeric", "data-col": "base_gpu_ns", "data-value": m.base_gpu_ns ?? null}, fmt.duration(m.base_gpu_ns)),
    h("td", {class: "numeric", "data-col": "run_gpu_ns", "data-value": m.run_gpu_ns ?? null}, fmt.duration(m.run_gpu_ns)),
    h("td", {class: ["numeric", speedupClass(m.gpu_speedup)], "data-col": "gpu_speedup", "data-value": m.gpu_speedup ?? null}, fmt.ratio(m.gpu_speedup))));
  return h("section", {"data-role": "phases-compare"},
    h("h3", null, `NVTX phases matched by name (${matched.length}; only in baseline ${only("only_in_base")}, only in run ${only("only_in_run")})`),
    h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "matched-phases"},
      h("thead", null, h("tr", null, ["NVTX range", "Count (base)", "Count (run)", "CPU time (base)", "CPU time (run)", "Speedup",
        "GPU time (base)", "GPU time (run)", "GPU speedup"].map((t) => h("th", null, t)))),
      h("tbody", null, rows))));
}
