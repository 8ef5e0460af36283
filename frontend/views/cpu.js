// CPU hotspots (VTune runs): functions with self / total time, module, spin and
// overhead share, source file and Intel TMA top-down label; the run's CPU advice
// as cards above the table.  Every report string goes in as text (dom.js).

import {h} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable, withValues} from "./table.js";
import {runView, stat} from "./common.js";
import {adviceSection} from "./advice.js";

const COLUMNS = [
  {key: "name", label: "Function", kind: "name", title: "function, loop or source line as the report groups it"},
  {key: "self_time_s", label: "Self time", unit: "s", kind: "num", title: "CPU time in the function itself"},
  {key: "total_time_s", label: "Total time", unit: "s", kind: "num", title: "CPU time including callees (top-down reports only)"},
  {key: "self_pct", label: "Share", kind: "pct", title: "% of the run's CPU time (sum of self times)"},
  {key: "module", label: "Module", kind: "text"},
  {key: "spin_pct", label: "Spin", kind: "pct", title: "Spin Time / CPU Time: busy-waiting on locks or barriers"},
  {key: "overhead_pct", label: "Overhead", kind: "pct", title: "Overhead Time / CPU Time: threading-runtime overhead"},
  {key: "source_file", label: "Source", kind: "text"},
  {key: "start_address", label: "Start address", kind: "text", title: "where the code starts: tells apart rows of one name (inlined loops)"},
  {key: "instructions_retired", label: "Instructions", unit: "count", kind: "num", title: "Instructions Retired"},
  {key: "cpi_rate", label: "CPI", kind: "num", title: "CPI Rate: cycles per retired instruction (high: stalls)"},
  {key: "topdown_label", label: "Top-down", kind: "text", title: "Intel TMA label (hover for the numbers)"},
];

// Shown even when empty: the row, its time and its label; the rest only where the report has them.
const ALWAYS_SHOWN = new Set(["name", "self_time_s", "self_pct", "topdown_label"]);

const TD_COLOURS = {
  "front-end-bound": "#ae3ec9", "bad-speculation": "#e8590c", "back-end-bound": "#1c7ed6",
  "memory-bound": "#1971c2", "core-bound": "#d9480f", retiring: "#2b8a3e", balanced: "#5c940d", unknown: "#868e96",
};

export function tdChip(label, reason) {
  if (fmt.isMissing(label)) return fmt.MISSING;
  return h("span", {class: "bound-chip", "data-topdown": label, title: reason || null,
    style: {"--bound": TD_COLOURS[label] || TD_COLOURS.unknown}}, label);
}

export const render = runView({draw});

function draw(doc, ctx) {
  const data = doc.data || {};
  const n = doc.rows ?? (data.name ? data.name.length : 0);
  const get = (key, i) => (data[key] ? data[key][i] : null);
  const table = new DataTable({
    columns: withValues(COLUMNS, get, n, ALWAYS_SHOWN).map((c) => (c.key === "topdown_label"
      ? {...c, display: (i) => tdChip(get("topdown_label", i), get("topdown_reason", i))} : c)),
    rows: n, get, noun: "functions", role: "cpu-hotspots",
    state: ctx.state, defaultSort: "self_time_s:desc",
    filterPlaceholder: "Filter by function, module or source…",
    filterText: (i) => [get("name", i), get("function_full", i), get("module", i), get("source_file", i)].join("\n"),
    fullName: (i) => get("function_full", i) || get("name", i),
    rowAttrs: (i) => ({"data-name": get("name", i), "data-topdown": get("topdown_label", i) || null}),
    onState: (patch) => ctx.update(patch),
  });
  return [totals(doc.totals || {}),
    adviceSection(doc.advice, "No finding: no rule's evidence is in this report (spin time, Python GIL functions, top-down shares)."),
    tdLegend(doc.topdown || {}), table.element];
}

function totals(t) {
  return h("div", {class: "totals", "data-role": "cpu-totals"},
    stat("CPU time", fmt.isMissing(t.self_time_s) ? fmt.MISSING : `${fmt.num(t.self_time_s)} s`, "cpu-time", t.self_time_s),
    stat("Spin", fmt.isMissing(t.spin_pct) ? fmt.MISSING : `${fmt.pct(t.spin_pct)} %`, "spin-pct", t.spin_pct),
    stat("Overhead", fmt.isMissing(t.overhead_pct) ? fmt.MISSING : `${fmt.pct(t.overhead_pct)} %`, "overhead-pct", t.overhead_pct));
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
