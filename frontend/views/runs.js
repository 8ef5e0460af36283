// Runs: every run the plugin knows, with provenance; a run with an error shows it.

import {h} from "../dom.js";
import * as fmt from "../format.js";

const MODELS_SHOWN = 2;  // more models than this: the rest in the cell's title

/** ["8× NVIDIA H200 (sm_90)", ...]: each device model once with its count (a trace lists every GPU of the node). */
function deviceModels(list) {
  const counts = new Map();
  for (const d of list) {
    const model = [d.name || "unnamed device", d.architecture ? `(${d.architecture})` : ""].join(" ").trim();
    counts.set(model, (counts.get(model) || 0) + 1);
  }
  return [...counts].map(([model, n]) => (n > 1 ? `${n}× ${model}` : model));
}

/** The Device(s) cell: the models, each kept whole on its line, the full list in the title when cut short. */
function devicesCell(list) {
  if (!Array.isArray(list) || !list.length) return h("td", {"data-col": "devices"}, fmt.MISSING);
  const models = deviceModels(list);
  const shown = models.slice(0, MODELS_SHOWN);
  const more = models.length - shown.length;
  return h("td", {"data-col": "devices", title: models.join(", ")},
    shown.map((m, i) => [i ? ", " : "", h("span", {class: "device-model"}, m)]),
    more > 0 ? h("span", {class: "muted"}, ` +${more} more`) : null);
}

export function render(container, ctx) {
  const rows = ctx.runs.flatMap((r) => {
    const selected = r.run === ctx.state.run;
    // The first view the server lists for the run (Kernels, or CPU hotspots for a VTune run).
    const first = Array.isArray(r.views) && r.views.length ? r.views[0] : ctx.state.view;
    const pick = () => ctx.navigate({run: r.run, view: first, launch: null, page: null, q: null, sort: null});
    const known = Boolean(r.tool || r.source_path);  // an unreadable manifest leaves only the error
    const main = h("tr", {"data-run": r.run, class: ["clickable", selected ? "selected" : "", r.error ? "run-error" : ""],
      onclick: pick, title: "open this run"},
      h("td", {class: "pinned"}, h("span", {class: "mono"}, r.run)),
      known ? [
        h("td", null, [r.tool || fmt.MISSING, r.tool_version ? ` ${r.tool_version}` : ""].join("")),
        devicesCell(r.devices),
        h("td", {class: "numeric", "data-col": "kernel_count", "data-value": r.kernel_count ?? null}, fmt.int(r.kernel_count)),
        h("td", {title: r.source_path || null}, h("span", {class: "mono path"}, fmt.basename(r.source_path) || fmt.MISSING)),
        h("td", null, r.source_format || fmt.MISSING),
        h("td", null, r.export_time || fmt.MISSING),
      ] : h("td", {colspan: 6, class: "error-text", "data-role": "run-error"}, r.error));
    if (!r.error || !known) return [main];
    return [main, h("tr", {"data-run-error": r.run, class: "run-error"},
      h("td", {class: "pinned"}), h("td", {colspan: 6, class: "error-text", "data-role": "run-error"}, r.error))];
  });
  container.appendChild(h("section", null,
    h("h2", null, "Runs"),
    h("p", {class: "muted"}, "Pick a run to open it. Runs that cannot be read show why; the others still work."),
    h("div", {class: "scroll"}, h("table", {class: "data runs", "data-role": "runs"},
      h("thead", null, h("tr", null, ["Run", "Tool", "Device(s)", "Launches", "Source file", "Format", "Exported"].map((t, i) => h("th", {class: i ? null : "pinned"}, t)))),
      h("tbody", null, rows)))));
  return null;
}
