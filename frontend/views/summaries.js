// Summaries: every summary table the run exported (GET /summaries lists them, GET /summary serves
// one), the profiler's own first.  Each is a sortable table with its units; a table another view
// already draws says which, with a button to it.  Tables load when their section is opened.

import {getJSON, columnReader} from "../api.js";
import {h, replace} from "../dom.js";
import * as fmt from "../format.js";
import {DataTable} from "./table.js";
import {runView, fetchInto} from "./common.js";

export const render = runView({draw});

function draw(doc, ctx) {
  const tables = Array.isArray(doc.tables) ? doc.tables : [];
  if (!tables.length) return [h("p", {class: "muted"}, "This run exported no summary tables.")];
  const sections = tables.map((t) => tableSection(t, doc.tool, ctx));
  const byName = new Map(tables.map((t, i) => [t.name, sections[i]]));
  const index = h("ul", {class: "summary-index", "data-role": "summary-index"}, tables.map((t) =>
    h("li", {"data-table": t.name},
      h("button", {type: "button", class: "link", onclick: () => reveal(byName.get(t.name))}, t.title),
      " ", h("span", {class: "mono muted small"}, t.name),
      h("span", {class: "muted small"}, ` · ${fmt.plural(t.rows, "row", "rows")} · ${origin(t, doc.tool)}`))));
  return [h("p", {class: "muted"}, `The tables ${doc.tool || "the profiler"} wrote, as exported, then those tb-hwprof derived. `,
    "Click a header to sort; units are in the headers."), index, ...sections];
}

function origin(t, tool) {
  return t.derived ? "derived by tb-hwprof" : `from ${t.origin || tool || "the profiler"}`;
}

function reveal(section) {
  section.open = true;
  section.scrollIntoView({block: "start"});
}

/** A <details> section for one table; its body is fetched the first time it opens. */
function tableSection(t, tool, ctx) {
  const body = h("div", {class: "summary-body"});
  const shownIn = t.shown_in ? h("button", {type: "button", class: "link", "data-role": "shown-in",
    onclick: (e) => { e.preventDefault(); ctx.navigate({view: t.shown_in, q: null, sort: null, page: null}); }},
  `also drawn in ${ctx.viewTitle ? ctx.viewTitle(t.shown_in) : t.shown_in}`) : null;
  const section = h("details", {class: "summary-table", "data-table": t.name, open: !t.derived && !t.shown_in},
    h("summary", null, h("strong", null, t.title), " ", h("span", {class: "mono muted"}, t.name),
      h("span", {class: "muted"}, ` · ${fmt.plural(t.rows, "row", "rows")} · ${origin(t, tool)}`), shownIn ? " · " : null, shownIn),
    body);
  let loaded = false;
  const load = () => {
    if (loaded || !section.open) return;
    loaded = true;
    fetchInto(body, getJSON("summary", {run: ctx.state.run, name: t.name}), `table ${t.name}`, ctx).then((table) => {
      // The listing's units add those tb-hwprof's own tables give by their names' suffixes (trace_ns).
      if (table) replace(body, summaryTable({...table, units: {...(t.units || {}), ...(table.units || {})}}, t.name).element);
    });
  };
  section.addEventListener("toggle", load);
  if (section.open) queueMicrotask(load);
  return section;
}

/** The DataTable columns of a /summary document: numbers scaled to their unit, text as text. */
export function summaryColumns(doc, get) {
  const units = doc.units || {};
  return (doc.columns || []).map((key) => {
    const unit = units[key] || "";
    const numeric = isNumeric(get, key, doc.rows);
    const whole = numeric && isWhole(get, key, doc.rows);
    const kind = !numeric ? (key === "name" ? "name" : "text") : unit === "%" ? "pct" : whole && !unit ? "int" : "num";
    const scaled = numeric && unit && unit !== "%" ? unit : null;
    // The header shows the scaled unit ("total (µs)"): a name's own unit suffix would contradict it.
    return {key, label: scaled ? withoutUnitSuffix(key, unit) : key, kind, unit: scaled, title: key};
  });
}

const UNIT_SUFFIXES = {ns: ["_ns"], us: ["_us"], ms: ["_ms"], s: ["_s"], bytes: ["_bytes", "_b"]};

/** 'total_ns' -> 'total' when its unit is ns; other names as they are. */
export function withoutUnitSuffix(key, unit) {
  const suffix = (UNIT_SUFFIXES[unit] || []).find((x) => key.endsWith(x) && key.length > x.length);
  return suffix ? key.slice(0, -suffix.length) : key;
}

function isNumeric(get, key, rows) {
  let seen = false;
  for (let i = 0; i < rows; i++) {
    const v = get(key, i);
    if (fmt.isMissing(v)) continue;
    if (typeof v !== "number") return false;
    seen = true;
  }
  return seen;
}

function isWhole(get, key, rows) {
  for (let i = 0; i < rows; i++) {
    const v = get(key, i);
    if (!fmt.isMissing(v) && !Number.isInteger(v)) return false;
  }
  return true;
}

function summaryTable(doc, name) {
  const get = columnReader(doc);
  const rows = doc.rows ?? 0;
  const columns = summaryColumns(doc, get);
  const textKeys = columns.filter((c) => c.kind === "text" || c.kind === "name").map((c) => c.key);
  return new DataTable({
    columns, rows, get, noun: "rows", role: `summary-${name}`, state: {},
    filterPlaceholder: "Filter rows…",
    filterText: (i) => textKeys.map((k) => get(k, i) ?? "").join("\n"),
  });
}
