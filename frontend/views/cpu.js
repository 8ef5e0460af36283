// CPU hotspots (VTune runs): functions with self / total time, module, spin and
// overhead share, source file and Intel TMA top-down label; the run's CPU advice
// as cards above the table.  Every report string goes in as text (dom.js).

import {api} from "../api.js";
import {h, replace} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runHeader, fetchInto} from "./common.js";

const COLUMNS = [
  {key: "name", label: "Function", kind: "name", title: "function, loop or source line as the report groups it"},
  {key: "self_time_s", label: "Self time", unit: "s", kind: "num", title: "CPU time in the function itself"},
  {key: "total_time_s", label: "Total time", unit: "s", kind: "num", title: "CPU time including callees (top-down reports only)"},
  {key: "self_pct", label: "Share", kind: "pct", title: "% of the run's CPU time (sum of self times)"},
  {key: "module", label: "Module", kind: "text"},
  {key: "spin_pct", label: "Spin", kind: "pct", title: "Spin Time / CPU Time: busy-waiting on locks or barriers"},
  {key: "overhead_pct", label: "Overhead", kind: "pct", title: "Overhead Time / CPU Time: threading-runtime overhead"},
  {key: "source_file", label: "Source", kind: "text"},
  {key: "topdown_label", label: "Top-down", kind: "text", title: "Intel TMA label (hover for the numbers)"},
];

const TD_COLOURS = {
  "front-end-bound": "#ae3ec9", "bad-speculation": "#e8590c", "back-end-bound": "#1c7ed6",
  "memory-bound": "#1971c2", "core-bound": "#d9480f", retiring: "#2b8a3e", balanced: "#5c940d", unknown: "#868e96",
};

export function tdChip(label, reason) {
  if (fmt.isMissing(label)) return fmt.MISSING;
  return h("span", {class: "bound-chip", "data-topdown": label, title: reason || null,
    style: {"--bound": TD_COLOURS[label] || TD_COLOURS.unknown}}, label);
}

export function render(container, ctx) {
  const slot = h("div");
  container.append(runHeader("CPU hotspots", ctx), slot);
  load(slot, ctx).catch((e) => console.error(e));
  return null;
}

async function load(slot, ctx) {
  const run = ctx.state.run;
  const doc = await fetchInto(slot, api.cpuHotspots(run), `CPU hotspots of ${run}`, ctx);
  if (!doc) return;
  const data = doc.data || {};
  const n = doc.rows ?? (data.name ? data.name.length : 0);
  const get = (key, i) => (data[key] ? data[key][i] : null);
  const table = new DataTable({
    columns: COLUMNS.map((c) => (c.key === "topdown_label"
      ? {...c, display: (i) => tdChip(get("topdown_label", i), get("topdown_reason", i))} : c)),
    rows: n, get, noun: "functions", role: "cpu-hotspots",
    state: ctx.state, defaultSort: "self_time_s:desc",
    filterPlaceholder: "Filter by function, module or source…",
    filterText: (i) => [get("name", i), get("function_full", i), get("module", i), get("source_file", i)].join("\n"),
    fullName: (i) => get("function_full", i) || get("name", i),
    rowAttrs: (i) => ({"data-name": get("name", i), "data-topdown": get("topdown_label", i) || null}),
    onState: (patch) => ctx.update(patch),
  });
  replace(slot, totals(doc.totals || {}), adviceCards(Array.isArray(doc.advice) ? doc.advice : []),
    tdLegend(doc.topdown || {}), table.element);
}

function stat(label, value, role, raw) {
  return h("div", {class: "stat"}, h("div", {class: "stat-label"}, label),
    h("div", {class: "stat-value", "data-role": role, "data-value": raw ?? null}, value));
}

function totals(t) {
  return h("div", {class: "totals", "data-role": "cpu-totals"},
    stat("CPU time", fmt.isMissing(t.self_time_s) ? fmt.MISSING : `${fmt.num(t.self_time_s)} s`, "cpu-time", t.self_time_s),
    stat("Spin", fmt.isMissing(t.spin_pct) ? fmt.MISSING : `${fmt.pct(t.spin_pct)} %`, "spin-pct", t.spin_pct),
    stat("Overhead", fmt.isMissing(t.overhead_pct) ? fmt.MISSING : `${fmt.pct(t.overhead_pct)} %`, "overhead-pct", t.overhead_pct));
}

function adviceCards(items) {
  return h("section", {"data-role": "advice"}, h("h3", null, `Advice (${items.length})`),
    items.length ? h("div", {class: "advice-cards"}, items.map((a) =>
      h("div", {class: ["advice-card", `severity-${a.severity || "low"}`], "data-advice-id": a.id, "data-severity": a.severity},
        h("div", {class: "advice-title"}, h("span", {class: "severity"}, a.severity || ""), " ", a.title || a.id),
        h("div", {class: "advice-evidence", "data-role": "evidence"}, a.evidence || ""),
        h("div", {class: "advice-suggestion", "data-role": "suggestion"}, a.suggestion || ""))))
      : h("p", {class: "muted"}, "No finding: no rule's evidence is in this report (spin time, Python GIL functions, top-down shares)."));
}

function tdLegend(topdown) {
  const thresholds = Array.isArray(topdown.thresholds) ? topdown.thresholds : [];
  const items = thresholds.map((t) => h("li", {"data-label": t.label, "data-threshold": t.threshold_pct},
    tdChip(t.label, null), ` ${t.label === "retiring" ? "above" : ">"} ${fmt.num(t.threshold_pct)}% of slots`,
    t.parent ? h("span", {class: "muted"}, ` (within ${t.parent})`) : null));
  return h("div", {class: "legend", "data-role": "topdown-legend"},
    h("span", null, "Top-down labels (Intel TMA thresholds): "), h("ul", {class: "legend-list inline"}, items),
    topdown.available ? null : h("div", {class: "muted small", "data-role": "topdown-missing"},
      "This report has no top-down metrics, so every row is “unknown”: collect with `vtune -collect uarch-exploration` and export with `-format csv`."));
}
