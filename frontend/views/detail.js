// Kernel detail (drawer): the launch's columns, the classifier's reasoning,
// Nsight Compute's own rule results and every raw metric (searchable).

import {getJSON} from "../api.js";
import {h, replace, errorBox, loading, debounce} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";

// Nsight Compute's MsgType (docs/FORMAT.md, details files).
const RULE_TYPES = {0: "info", 1: "ok", 2: "optimisation", 3: "warning", 4: "error"};

const UNITS = {
  duration_ns: "ns", shared_mem_bytes: "bytes", dram_bytes_read: "bytes", dram_bytes_write: "bytes",
  dram_bytes: "bytes", l2_bytes: "bytes", l1_bytes: "bytes", flop_per_s: "FLOP/s",
  peak_flop_per_s: "FLOP/s", attainable_flop_per_s: "FLOP/s",
  flops: "FLOP", flops_fp64: "FLOP", flops_fp32: "FLOP", flops_fp16: "FLOP", flops_tensor: "FLOP",
};

function showValue(key, v) {
  if (fmt.isMissing(v)) return fmt.MISSING;
  if (typeof v !== "number") return String(v);
  if (UNITS[key]) return fmt.human(v, UNITS[key]);
  if (key.endsWith("_pct")) return `${fmt.pct(v)} %`;
  if (key.startsWith("ai_")) return `${fmt.num(v)} FLOP/byte`;
  return fmt.num(v);
}

function metricValue(v) {
  if (v === null || v === undefined) return fmt.MISSING;
  if (typeof v === "number") {
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-6 || a >= 1e15) ? v.toPrecision(6) : Number(v.toPrecision(6)).toLocaleString("en-US", {maximumFractionDigits: 12});
  }
  return String(v);
}

export async function renderDetail(drawer, ctx) {
  const {run, launch} = ctx;
  const closeBtn = h("button", {type: "button", class: "close", "data-role": "close-detail", title: "close", onclick: () => ctx.close()}, "×");
  const body = h("div", {class: "drawer-body"}, loading(`launch ${launch}`));
  replace(drawer, h("div", {class: "drawer-head"}, h("h3", null, `Launch ${launch}`), closeBtn), body);
  drawer.dataset.launchId = launch;
  let doc;
  try {
    doc = await getJSON("kernel", {run, launch});
  } catch (e) {
    if (ctx.isCurrent()) replace(body, errorBox(`Cannot load launch ${launch}: ${e.message}`, e.status ? `HTTP ${e.status}` : null));
    return;
  }
  if (!ctx.isCurrent()) return;
  const row = doc.row || {};
  const raw = doc.raw_metrics && typeof doc.raw_metrics === "object" ? doc.raw_metrics : {};
  const rules = Array.isArray(doc.rules) ? doc.rules : [];

  const nav = h("div", {class: "detail-nav"},
    h("button", {type: "button", onclick: () => ctx.open(Number(launch) - 1), disabled: Number(launch) <= 0}, "‹ previous launch"),
    h("button", {type: "button", onclick: () => ctx.open(Number(launch) + 1),
      disabled: typeof ctx.count === "number" && Number(launch) >= ctx.count - 1}, "next launch ›"));

  const summary = h("section", {class: "detail-summary"},
    h("div", {class: "mono full-name", "data-role": "detail-name"}, row.demangled_name || row.name || "(unnamed)"),
    h("dl", {class: "facts"},
      fact("Duration", fmt.duration(row.duration_ns)),
      fact("Grid × block", `${row.grid || fmt.MISSING} × ${row.block || fmt.MISSING}`),
      fact("Bound", boundChip(row.bound, row.bound_level, null)),
      fact("Why", row.bound_reason || fmt.MISSING, "bound_reason"),
      fact("Occupancy", row.occupancy_note || fmt.MISSING, "occupancy_note")));

  const ruleRows = rules
    .map((r, i) => ({...r, i}))
    .sort((a, b) => (b.estimated_speedup_pct ?? -1) - (a.estimated_speedup_pct ?? -1) || a.i - b.i)
    .map((r) => h("tr", {class: `rule rule-${RULE_TYPES[r.type] || "info"}`, "data-rule": r.rule || null},
      h("td", null, h("span", {class: "rule-type"}, RULE_TYPES[r.type] || String(r.type ?? ""))),
      h("td", null, h("div", {class: "rule-title"}, r.title || r.rule || "",
        r.section || r.name ? h("span", {class: "muted small"}, ` · ${r.section || r.name}`) : null),
        h("div", {class: "rule-msg"}, r.message || "")),
      h("td", {class: "numeric", "data-col": "estimated_speedup_pct", "data-value": r.estimated_speedup_pct ?? null},
        fmt.isMissing(r.estimated_speedup_pct) ? fmt.MISSING : `${fmt.num(r.estimated_speedup_pct)} %`,
        r.speedup_type ? h("div", {class: "muted small"}, String(r.speedup_type)) : null)));
  const rulesSection = h("section", null, h("h4", null, `Nsight Compute rules (${rules.length})`),
    rules.length ? h("table", {class: "data rules", "data-role": "rules"},
      h("thead", null, h("tr", null, ["Type", "Finding (section)", "Est. speedup"].map((t) => h("th", null, t)))),
      h("tbody", null, ruleRows)) : h("p", {class: "muted"}, "The report holds no rule results for this launch."));

  const colRows = Object.keys(row).map((key) =>
    h("tr", {"data-col": key}, h("td", {class: "mono"}, key), h("td", {"data-value": fmt.isMissing(row[key]) ? null : row[key]}, showValue(key, row[key]))));
  const colsSection = h("section", null, h("details", null, h("summary", null, `Table columns (${colRows.length})`),
    h("table", {class: "data kv"}, h("tbody", null, colRows))));

  const names = Object.keys(raw).sort();
  const metricRows = names.map((name) => {
    const pair = Array.isArray(raw[name]) ? raw[name] : [raw[name], ""];
    const shown = metricValue(pair[0]);
    const long = shown.length > 120;
    return h("tr", {"data-metric": name},
      h("td", {class: "mono"}, name),
      h("td", {class: typeof pair[0] === "number" ? "numeric" : "str", "data-value": pair[0] ?? null, title: long ? shown : null},
        long ? `${shown.slice(0, 117)}…` : shown),
      h("td", {class: "muted"}, pair[1] ?? ""));
  });
  const countLine = h("span", {class: "muted", "data-role": "metric-count"}, `${names.length} metrics`);
  const search = h("input", {type: "search", class: "filter", placeholder: "Search metrics…", "data-role": "metric-search",
    oninput: debounce(() => {
      const q = search.value.trim().toLowerCase();
      let shown = 0;
      metricRows.forEach((tr, i) => {
        const hit = !q || names[i].toLowerCase().includes(q) || tr.textContent.toLowerCase().includes(q);
        tr.hidden = !hit;
        if (hit) shown++;
      });
      countLine.textContent = q ? `${shown} of ${names.length} metrics` : `${names.length} metrics`;
    }, 120)});
  const metricsSection = h("section", null, h("h4", null, "Raw metrics"),
    h("div", {class: "toolbar"}, search, countLine),
    names.length ? h("table", {class: "data metrics", "data-role": "raw-metrics"},
      h("thead", null, h("tr", null, h("th", null, "Metric"), h("th", null, "Value"), h("th", null, "Unit"))),
      h("tbody", null, metricRows)) : h("p", {class: "muted"}, "No raw metrics for this launch."));

  replace(body, nav, summary, rulesSection, colsSection, metricsSection);
}

function fact(label, value, role) {
  return [h("dt", null, label), h("dd", {"data-role": role || null}, value)];
}
