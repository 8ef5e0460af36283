// Kernel detail (drawer): the launch's columns, the classifier's reasoning, Nsight Compute's
// sections (as Nsight Compute groups the metrics: /kernel's `sections`, built by
// tb_hwprof/analysis/ncu_sections.py), its rule results and every raw metric (searchable).

import {getJSON} from "../api.js";
import {h, s as svg, replace, errorBox, loading, debounce} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";
import {terms} from "./common.js";
import {occupancyChart, occupancySection} from "./occupancy.js";

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
  const parsed = Array.isArray(doc.rule_messages) ? doc.rule_messages : [];
  const rules = (Array.isArray(doc.rules) ? doc.rules : []).map((r, i) => ({...r, message_parts: parsed[i]}));
  const sections = Array.isArray(doc.sections) ? doc.sections : [];
  const shown = new Set(sections.map((sec) => sec.id));

  const nav = h("div", {class: "detail-nav"},
    h("button", {type: "button", onclick: () => ctx.open(Number(launch) - 1), disabled: Number(launch) <= 0}, "‹ previous launch"),
    h("button", {type: "button", onclick: () => ctx.open(Number(launch) + 1),
      disabled: typeof ctx.count === "number" && Number(launch) >= ctx.count - 1}, "next launch ›"));

  const summary = h("section", {class: "detail-summary"},
    h("div", {class: "mono full-name", "data-role": "detail-name"}, row.demangled_name || row.name || "(unnamed)"),
    h("dl", {class: "facts"},
      fact("Duration", fmt.duration(row.duration_ns)),
      fact("Grid × block", `${row.grid || fmt.MISSING} × ${row.block || fmt.MISSING}`),
      ...boundFacts(row, doc.bound),
      fact("Occupancy", row.occupancy_note || fmt.MISSING, "occupancy_note"),
      // A joined trace launch: which report launch its counters are from (another launch of its
      // configuration, with a per-configuration join).
      row.counter_source ? fact("Counters from", row.counter_source, "counter_source")
        : (typeof row.counter_launch_id === "number" && row.counter_launch_id >= 0
          ? fact("Counters from", `report launch ${row.counter_launch_id} (joined by name and launch order)`, "counter_source") : null)));

  const ruleRows = rules
    .map((r, i) => ({...r, i}))
    .sort((a, b) => (b.estimated_speedup_pct ?? -1) - (a.estimated_speedup_pct ?? -1) || a.i - b.i)
    .map((r) => h("tr", {class: `rule rule-${RULE_TYPES[r.type] || "info"}`, "data-rule": r.rule || null},
      h("td", null, h("span", {class: "rule-type"}, RULE_TYPES[r.type] || String(r.type ?? ""))),
      h("td", null, h("div", {class: "rule-title"}, r.title || r.rule || "",
        r.section || r.name ? h("span", {class: "muted small"}, ` · ${r.section || r.name}`) : null),
        h("div", {class: "rule-msg"}, ruleMessage(r, shown, body))),
      h("td", {class: "numeric", "data-col": "estimated_speedup_pct", "data-value": r.estimated_speedup_pct ?? null},
        fmt.isMissing(r.estimated_speedup_pct) ? fmt.MISSING : `${fmt.num(r.estimated_speedup_pct)} %`,
        r.speedup_type ? h("div", {class: "muted small"}, String(r.speedup_type)) : null)));
  // Rule results are Nsight Compute's (only its reports carry them), whichever run the launch is
  // in; a launch without counters (a trace's) has no report, so no section at all.
  const fromReport = rules.length > 0 || /^ncu/i.test(terms(ctx.info).tool) || row.counter_launch_id >= 0;
  const rulesSection = fromReport ? h("section", {"data-role": "rules-section"},
    h("h4", null, `Nsight Compute rules (${rules.length})`),
    rules.length ? h("table", {class: "data rules", "data-role": "rules"},
      h("thead", null, h("tr", null, ["Type", "Finding (section)", "Est. speedup"].map((t) => h("th", null, t)))),
      h("tbody", null, ruleRows)) : h("p", {class: "muted"}, "The report holds no rule results for this launch.")) : null;

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

  // Nsight Compute runs show their own Launch Statistics and Occupancy sections (the calculator's
  // chart inside); other tools' launches get the calculator's section alone.
  const occupancyPart = sections.length ? null : occupancySection(doc.occupancy);
  replace(body, nav, summary, sectionsPart(sections, rules, shown, body, {occupancy: doc.occupancy}), occupancyPart,
    rulesSection, colsSection, metricsSection);
}

/** The bound by each method that has one (analysis/bound_terms.py): the counters' label and why,
 * the roofline's side and why, each headed by its method with the rule as its tooltip, and one note
 * where they name opposite sides. */
function boundFacts(row, bound) {
  const counters = bound?.counters || {label: row.bound, reason: row.bound_reason, rule: ""};
  const roofline = bound?.roofline || {};
  const head = (text, rule) => h("abbr", {title: rule || null}, text);
  return [
    fact(head("Bound (counters)", counters.rule), boundChip(counters.label, row.bound_level, counters.reason), "bound_counters"),
    fact("Why", counters.reason || fmt.MISSING, "bound_reason"),
    roofline.label ? fact(head("Bound (roofline)", roofline.rule),
      [boundChip(roofline.label, null, roofline.reason), " ", h("span", {class: "muted"}, roofline.reason || "")], "bound_roofline") : null,
    bound?.note ? [h("dt", null, ""), h("dd", null, h("p", {class: "note", "data-role": "bound-disagree"}, bound.note))] : null,
  ];
}

function fact(label, value, role) {
  return [h("dt", null, label), h("dd", {"data-role": role || null}, value)];
}

// -- Nsight Compute's sections -----------------------------------------------------------------

/** A rule message with Nsight Compute's markup as links: `@url:text:link@` opens the page (http(s)
 * only), `@section:Id:Title@` scrolls to that section when the drawer shows it, else is plain text. */
function ruleMessage(rule, shown, body) {
  const parts = Array.isArray(rule.message_parts) ? rule.message_parts : [{kind: "text", text: rule.message || ""}];
  return parts.map((p) => {
    if (p.kind === "url") {
      return p.href && /^https?:\/\//i.test(p.href) ? h("a", {href: p.href, target: "_blank", rel: "noopener noreferrer", class: "rule-link"}, p.text || "")
        : String(p.text || "");
    }
    if (p.kind === "section") {
      return shown.has(p.id) ? sectionLink(p.id, p.text || p.id, body) : String(p.text || "");
    }
    return String(p.text ?? "");
  });
}

function sectionAnchor(id) {
  return `ncu-section-${String(id).replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** A link to a section of this drawer (no href: the plugin's own navigation lives in the URL hash). */
function sectionLink(id, label, body) {
  const go = (e) => {
    e.preventDefault();
    const target = body.querySelector(`#${sectionAnchor(id)}`);
    if (target) target.scrollIntoView({block: "start"});
  };
  return h("a", {class: "section-link", role: "link", tabindex: "0", "data-section-link": id, onclick: go,
    onkeydown: (e) => { if (e.key === "Enter") go(e); }}, label);
}

const SCALED = {
  "byte/s": [[1, "B/s"], [1e3, "KB/s"], [1e6, "MB/s"], [1e9, "GB/s"], [1e12, "TB/s"]],
  byte: [[1, "B"], [1e3, "KB"], [1e6, "MB"], [1e9, "GB"]],
  hz: [[1, "Hz"], [1e3, "kHz"], [1e6, "MHz"], [1e9, "GHz"]],
  ns: [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]],
};

/** A section value as Nsight Compute shows it: % with 2 decimals, bytes / Hz / ns scaled, counts
 * grouped, ratios to 4 significant digits; text as it is. */
export function sectionValue(value, unit) {
  if (value === null || value === undefined) return fmt.MISSING;
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return fmt.MISSING;
  if (unit === "%") return `${value.toFixed(2)} %`;
  const steps = SCALED[unit];
  if (steps) {
    let [factor, label] = steps[0];
    for (const step of steps) if (Math.abs(value) >= step[0]) [factor, label] = step;
    return `${Number((value / factor).toPrecision(4)).toLocaleString("en-US", {maximumFractionDigits: 4})} ${label}`;
  }
  const shown = Number.isInteger(value) ? value.toLocaleString("en-US")
    : Number(value.toPrecision(4)).toLocaleString("en-US", {maximumFractionDigits: 6});
  return unit ? `${shown} ${unit}` : shown;
}

function metricRowsTable(rows, role) {
  return h("table", {class: "data kv section-rows", "data-role": role},
    h("tbody", null, rows.map((r) => h("tr", {"data-ncu-metric": r.metric, title: r.metric},
      h("td", null, r.label),
      h("td", {class: typeof r.value === "number" ? "numeric" : "str", "data-value": r.value ?? null}, sectionValue(r.value, r.unit))))));
}

/** Values in Nsight Compute's own units; where those mislead (the stall ratios' "inst", the
 * sampled stalls' "warp" / "inst" / "branches") the chart's unit_note says what the figure is. */
function unitNote(fig) {
  return fig.unit_note ? h("p", {class: "muted small", "data-role": "unit-note"}, String(fig.unit_note)) : null;
}

function barChart(fig) {
  const max = Math.max(...fig.rows.map((r) => r.value), 0);
  const percent = fig.quantity === "% of peak";
  return h("div", {class: "section-figure ncu-bars", "data-figure": fig.id},
    h("div", {class: "figure-title"}, fig.title, " — top: ", h("strong", {"data-role": "figure-top"}, fig.top)),
    fig.rows.map((r) => {
      const width = percent ? Math.min(100, Math.max(0, r.value)) : (max > 0 ? 100 * r.value / max : 0);
      return h("div", {class: "ncu-bar-row", "data-ncu-metric": r.metric, title: r.metric},
        h("span", {class: "bar-label"}, r.label),
        h("span", {class: "bar-track"}, h("span", {class: "bar", style: {width: `${width.toFixed(1)}%`}})),
        h("span", {class: "bar-value numeric", "data-value": r.value}, sectionValue(r.value, r.unit)));
    }),
    unitNote(fig));
}

// Memory chart layout (viewBox units): the boxes in Nsight Compute's places, left to right; the
// kernel spans the L1/TEX and Shared rows so that every arrow is horizontal, its figures below it.
const BOX_W = 120, BOX_H = 64;
const BOX_AT = {kernel: [0, 10, 184], l1tex: [270, 10, BOX_H], shared: [270, 130, BOX_H], l2: [540, 10, BOX_H],
  dram: [780, 10, BOX_H]};
const MAIN_ROWS = [["Requests", "req"], ["Wavefronts", "wavefronts"], ["Bytes", ""], ["Sectors", "sectors"]];

function linkSummary(link) {
  const [main, word] = MAIN_ROWS.map(([label, w]) => [link.rows.find((r) => r.label === label), w]).find(([r]) => r)
    || [link.rows[0], link.rows[0].label.toLowerCase()];
  const name = link.label.replace(/^.*[→↔]\s*/, "");  // "L1 → L2 Read" -> "L2 Read": the arrow says from where
  const value = main.unit === "byte" ? sectionValue(main.value, "byte") : sectionValue(main.value, "");
  return `${name}: ${value}${word ? ` ${word}` : ""}`;
}

/** Nsight Compute's memory chart in SVG: boxes (with their hit rates etc.) and, along each arrow,
 * the traffic of the links between them; every figure of every link in the table below it. */
function memoryChart(fig) {
  const boxes = fig.boxes.filter((b) => BOX_AT[b.id]);
  const byPair = new Map();
  for (const link of fig.links) {
    const key = `${link.from}>${link.to}`;
    if (!byPair.has(key)) byPair.set(key, []);
    byPair.get(key).push(link);
  }
  const arrows = [...byPair.entries()].filter(([key]) => key.split(">").every((id) => BOX_AT[id])).map(([key, links]) => {
    const [from, to] = key.split(">").map((id) => BOX_AT[id]);
    const x1 = from[0] + BOX_W, x2 = to[0], y = to[1] + to[2] / 2;
    return svg("g", {class: "mem-link", "data-link": key},
      svg("line", {x1, y1: y, x2: x2 - 2, y2: y, class: "mem-arrow", "marker-end": "url(#mem-arrowhead)"}),
      links.map((link, i) => svg("text", {x: x1 + 6, y: y + 15 + 13 * i, class: "mem-link-label"}, linkSummary(link))));
  });
  const boxEls = boxes.map((b) => {
    const [x, y, height] = BOX_AT[b.id];
    return svg("g", {class: "mem-box", "data-box": b.id},
      svg("rect", {x, y, width: BOX_W, height, rx: 4}),
      svg("text", {x: x + 8, y: y + 18, class: "mem-box-title"}, b.label),
      b.rows.map((r, i) => svg("text", {x: x + 8, y: y + 35 + 26 * i, class: "mem-box-row"}, `${r.label}:`,
        svg("tspan", {x: x + 8, dy: 13}, sectionValue(r.value, r.unit)))));
  });
  // one row per link, one column per figure any link has (Nsight Compute's memory tables, compacted)
  const figures = [...new Set(fig.links.flatMap((link) => link.rows.map((r) => r.label)))];
  const table = h("table", {class: "data mem-links", "data-role": "memory-links"},
    h("thead", null, h("tr", null, h("th", null, "Traffic"), figures.map((f) => h("th", {class: "numeric"}, f)))),
    h("tbody", null, fig.links.map((link) => h("tr", {"data-link": link.label},
      h("td", null, link.label),
      figures.map((f) => {
        const r = link.rows.find((x) => x.label === f);
        return r ? h("td", {class: "numeric", "data-ncu-metric": r.metric, title: r.metric},
          h("span", {"data-value": r.value ?? null}, sectionValue(r.value, r.unit))) : h("td", null, "");
      })))));
  return h("div", {class: "section-figure", "data-figure": fig.id},
    h("div", {class: "figure-title"}, fig.title),
    svg("svg", {class: "memory-chart", viewBox: "0 0 900 205", role: "img", "aria-label": "memory chart"},
      svg("defs", null, svg("marker", {id: "mem-arrowhead", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto"},
        svg("path", {d: "M0,0 L10,5 L0,10 z"}))),
      arrows, boxEls),
    boxes.some((b) => b.rows.length) ? metricRowsTable(boxes.flatMap((b) => b.rows.map((r) => ({...r, label: `${b.label} ${r.label}`}))), "memory-boxes") : null,
    table);
}

function hexAddress(address) {
  return typeof address === "number" && Number.isSafeInteger(address) ? `0x${address.toString(16)}` : fmt.MISSING;
}

/** Source Counters' top instructions by sampled warp stalls: address, SASS, source line where the
 * report has line information, samples, and the instruction's top stall reasons. */
function hotspotsTable(fig) {
  const withLines = Boolean(fig.has_line_info);
  const source = (r) => (r.source_line ? `${r.source_file}:${r.source_line}` : fmt.MISSING);
  return h("div", {class: "section-figure", "data-figure": fig.id},
    h("div", {class: "figure-title"}, fig.title),
    h("table", {class: "data hotspots", "data-role": "source-hotspots"},
      h("thead", null, h("tr", null, h("th", {class: "numeric"}, "#"), h("th", null, "Address"), h("th", null, "SASS"),
        withLines ? h("th", null, "Source") : null, h("th", {class: "numeric"}, "Samples"), h("th", null, "Top stall reasons (samples)"))),
      h("tbody", null, fig.rows.map((r) => h("tr", {"data-address": hexAddress(r.address)},
        h("td", {class: "numeric"}, String(r.rank ?? "")),
        h("td", {class: "mono", style: {"white-space": "nowrap"}}, hexAddress(r.address)),
        h("td", {class: "mono", "data-role": "sass"}, String(r.sass || fmt.MISSING)),
        withLines ? h("td", {class: "mono", "data-role": "source", title: r.source_file || null}, source(r)) : null,
        h("td", {class: "numeric", "data-value": r.samples ?? null}, sectionValue(r.samples, "")),
        h("td", {"data-role": "stalls"}, (Array.isArray(r.stalls) ? r.stalls : [])
          .map((st) => `${st.label} ${sectionValue(st.samples, "")}`).join(", ")))))),
    withLines ? null : h("p", {class: "muted small"}, "The report has no source line information (compile with -lineinfo to get it)."));
}

function figure(fig) {
  if (fig.kind === "bars" && Array.isArray(fig.rows) && fig.rows.length) return barChart(fig);
  if (fig.kind === "hotspots" && Array.isArray(fig.rows) && fig.rows.length) return hotspotsTable(fig);
  if (fig.kind === "memory_chart" && Array.isArray(fig.links) && fig.links.length) return memoryChart(fig);
  return null;
}

/** The occupancy calculator's chart (frontend/views/occupancy.js, from /kernel's `occupancy`) in
 * Nsight Compute's Occupancy section, as Nsight Compute draws its own there. */
function occupancySlot(ctx) {
  const chart = occupancyChart(ctx.occupancy);
  return chart ? h("div", {class: "occupancy-slot", "data-role": "occupancy-slot"},
    h("div", {class: "figure-title"}, "Theoretical warps per SM as one input changes, the others as launched (● this launch)"),
    chart) : null;
}

function sectionRules(sec, rules, shown, body) {
  const own = (sec.rules || []).map((i) => rules[i]).filter(Boolean);
  if (!own.length) return null;
  return h("ul", {class: "section-rules"}, own.map((r) => h("li", {class: `rule rule-${RULE_TYPES[r.type] || "info"}`, "data-rule": r.rule || null},
    h("span", {class: "rule-type"}, RULE_TYPES[r.type] || String(r.type ?? "")), " ",
    h("span", {class: "rule-title"}, r.title || r.rule || ""),
    h("div", {class: "rule-msg"}, ruleMessage(r, shown, body)))));
}

function sectionsPart(sections, rules, shown, body, ctx) {
  if (!sections.length) return null;
  const index = h("nav", {class: "section-index", "data-role": "section-index"},
    sections.map((sec) => sectionLink(sec.id, sec.title, body)));
  const blocks = sections.map((sec) => h("section", {class: "ncu-section", id: sectionAnchor(sec.id), "data-section": sec.id},
    h("h4", null, sec.title),
    sec.custom ? h("p", {class: "muted small", "data-role": "section-about"},
      sec.description ? `${sec.description} · ` : "", "a section of the report's own section files, shown as listed") : null,
    sec.rows && sec.rows.length ? metricRowsTable(sec.rows, "section-rows") : null,
    Array.isArray(sec.body) && sec.body.length ? metricRowsTable(sec.body, "section-body") : null,
    (sec.figures || []).map(figure),
    sec.id === "Occupancy" ? occupancySlot(ctx) : null,
    sectionRules(sec, rules, shown, body)));
  return h("div", {class: "ncu-sections", "data-role": "ncu-sections"}, h("h4", null, "Nsight Compute sections"), index, blocks);
}
