// Runs: every run the plugin knows, with provenance; a run with an error shows it.

import {h} from "../dom.js";
import * as fmt from "../format.js";

function devices(list) {
  if (!Array.isArray(list) || !list.length) return fmt.MISSING;
  return list.map((d) => [d.name || `device ${d.id}`, d.architecture ? `(${d.architecture})` : ""].join(" ").trim()).join(", ");
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
      h("td", null, h("span", {class: "mono"}, r.run)),
      known ? [
        h("td", null, [r.tool || fmt.MISSING, r.tool_version ? ` ${r.tool_version}` : ""].join("")),
        h("td", null, devices(r.devices)),
        h("td", {class: "numeric", "data-col": "kernel_count", "data-value": r.kernel_count ?? null}, fmt.int(r.kernel_count)),
        h("td", {title: r.source_path || null}, h("span", {class: "mono path"}, fmt.basename(r.source_path) || fmt.MISSING)),
        h("td", null, r.source_format || fmt.MISSING),
        h("td", null, r.export_time || fmt.MISSING),
      ] : h("td", {colspan: 6, class: "error-text", "data-role": "run-error"}, r.error));
    if (!r.error || !known) return [main];
    return [main, h("tr", {"data-run-error": r.run, class: "run-error"},
      h("td"), h("td", {colspan: 6, class: "error-text", "data-role": "run-error"}, r.error))];
  });
  container.appendChild(h("section", null,
    h("h2", null, "Runs"),
    h("p", {class: "muted"}, "Pick a run to open it. Runs that cannot be read show why; the others still work."),
    h("div", {class: "scroll"}, h("table", {class: "data runs", "data-role": "runs"},
      h("thead", null, h("tr", null, ["Run", "Tool", "Device(s)", "Launches", "Source file", "Format", "Exported"].map((t) => h("th", null, t)))),
      h("tbody", null, rows)))));
  return null;
}
