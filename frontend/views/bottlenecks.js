// Bottlenecks: kernel time per bound class, and the top launches with the reason.

import {h, kernelName} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";
import {runView} from "./common.js";

// Its launches open the kernel-detail drawer.
export const opensLaunches = true;

export const render = runView({draw, select});

function select(view, launch) {
  for (const tr of view.slot.querySelectorAll("tr[data-launch-id]")) {
    tr.classList.toggle("selected", launch !== null && tr.dataset.launchId === String(launch));
  }
}

function draw(doc, ctx) {
  const byBound = Array.isArray(doc.by_bound) ? doc.by_bound : [];
  const top = Array.isArray(doc.top) ? doc.top : [];
  const maxPct = Math.max(...byBound.map((b) => b.pct_time || 0), 0) || 100;

  const bars = h("div", {class: "bars", "data-role": "bound-bars"}, byBound.map((b) =>
    h("div", {class: "bar-row", "data-bound": b.bound, "data-value": b.time_ns ?? null},
      h("span", {class: "bar-label"}, b.bound || "unknown"),
      h("span", {class: "bar-track"}, h("span", {class: "bar", style: {
        width: `${Math.max(0.5, (b.pct_time || 0) / maxPct * 100)}%`, "--bound": fmt.boundColour(b.bound)}})),
      h("span", {class: "bar-value"}, `${fmt.pct(b.pct_time)} % · ${fmt.duration(b.time_ns)} · ${fmt.int(b.launches)} launch${b.launches === 1 ? "" : "es"}`))));

  const rows = top.map((t) => h("tr", {class: ["clickable", String(t.launch_id) === String(ctx.state.launch) ? "selected" : ""],
    "data-launch-id": t.launch_id, onclick: () => ctx.openLaunch(t.launch_id)},
    h("td", {class: "numeric"}, fmt.int(t.launch_id)),
    h("td", null, kernelName(t.name, t.name)),
    h("td", {class: "numeric", "data-col": "duration_ns", "data-value": t.duration_ns ?? null}, fmt.duration(t.duration_ns)),
    h("td", {class: "numeric", "data-col": "pct_time", "data-value": t.pct_time ?? null}, fmt.pct(t.pct_time)),
    h("td", null, boundChip(t.bound, t.bound_level, null)),
    h("td", {class: "reason", "data-col": "bound_reason"}, t.bound_reason || fmt.MISSING,
      t.occupancy_note ? h("div", {class: "muted small", "data-col": "occupancy_note"}, t.occupancy_note) : null)));

  return [
    h("section", null, h("h3", null, `Kernel time by bound class (total ${fmt.duration(doc.total_ns)})`),
      byBound.length ? bars : h("p", {class: "muted"}, "No launch has a duration.")),
    h("section", null, h("h3", null, `Top ${top.length} launches by duration`),
      h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "top-kernels"},
        h("thead", null, h("tr", null, ["#", "Kernel", "Duration", "% time", "Bound", "Why / occupancy"].map((t) => h("th", null, t)))),
        h("tbody", null, rows))))];
}
