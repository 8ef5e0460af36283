// Advice cards, for every view that shows advice: one card per finding the export stored with
// the run ({id, severity, title, text, remedy, figures: {name: {value, unit}}}, docs/http_api.md),
// in the server's order (most severe first).  Report strings go in as text (dom.js).

import {h} from "../dom.js";
import * as fmt from "../format.js";

/** A figure as text in its unit; null for what a card does not list (records: the text names them). */
export function figureText(figure) {
  const {value, unit} = figure || {};
  if (typeof value === "string") return value;
  if (typeof value !== "number") return null;
  if (unit === "%") return `${fmt.pct(value)} %`;
  if (unit === "bytes") return fmt.bytes(value);
  if (unit === "count") return fmt.num(value);
  if (unit === "x") return `${fmt.num(value)}×`;
  return fmt.human(value, unit);  // ns, FLOP/s... scaled; other units as they are
}

const ACRONYMS = {cpu: "CPU", gpu: "GPU", api: "API", nvtx: "NVTX", cuda: "CUDA", hip: "HIP", sm: "SM", cu: "CU", dram: "DRAM", tma: "TMA"};

/** A figure's name as words ("cpu_time_s" -> "CPU time"): its unit is in the value beside it. */
export function figureName(name) {
  const words = String(name).replace(/_(ns|s|ms|pct|bytes)$/, "").split("_").filter(Boolean);
  const text = words.map((w) => ACRONYMS[w] || w).join(" ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function figureList(figures) {
  const shown = Object.entries(figures || {}).map(([name, f]) => [name, f || {}, figureText(f)]).filter(([, , t]) => t !== null);
  if (!shown.length) return null;
  return h("dl", {class: "advice-values", "data-role": "figures"}, shown.map(([name, f, t]) =>
    [h("dt", {title: name}, figureName(name)), h("dd", {"data-key": name, "data-value": f.value, "data-unit": f.unit || ""}, t)]));
}

function card(finding) {
  const severity = finding.severity || "low";
  return h("div", {class: ["advice-card", `severity-${severity}`], "data-advice-id": finding.id, "data-severity": severity},
    h("div", {class: "advice-title"}, h("span", {class: "severity"}, severity), " ", finding.title || finding.id),
    h("div", {class: "advice-evidence", "data-role": "evidence"}, finding.text || ""),
    figureList(finding.figures),
    h("div", {class: "advice-suggestion", "data-role": "remedy"}, finding.remedy || ""));
}

/**
 * The "Advice" section: the cards, `none` when no rule fired, or (findings === null) the note
 * that the run was exported before advice was stored with it: the plugin never computes advice.
 */
export function adviceSection(findings, none) {
  if (!Array.isArray(findings)) {
    return h("section", {"data-role": "advice"}, h("h3", null, "Advice"),
      h("p", {class: "muted", "data-role": "advice-not-stored"},
        "This run was exported before tb-hwprof stored advice with its runs: export it again (--overwrite) to see advice."));
  }
  return h("section", {"data-role": "advice"}, h("h3", null, `Advice (${findings.length})`),
    findings.length ? h("div", {class: "advice-cards"}, findings.map(card)) : h("p", {class: "muted"}, none));
}
