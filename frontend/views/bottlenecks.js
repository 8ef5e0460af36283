// Bottlenecks: kernel time per bound class, and the top kernels (one row each, with their launch
// count) with the reason of their longest launch.

import {h, kernelName} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip, boundText} from "./table.js";
import {runView, runTerms} from "./common.js";

// Its launches open the kernel-detail drawer.
export const opensLaunches = true;

export const render = runView({draw, select});

function select(view, launch) {
  for (const tr of view.slot.querySelectorAll("tr[data-launch-id]")) {
    tr.classList.toggle("selected", launch !== null && tr.dataset.launchId === String(launch));
  }
}

function barLabel(b, top) {
  // A trace's launches are all "unknown" for one reason (no counters): say that, not "unknown".
  const reasons = top.filter((t) => t.bound === b.bound).map((t) => boundText(t.bound, t.bound_reason));
  return reasons.length && reasons.every((r) => r === reasons[0]) ? reasons[0] : (b.bound || "unknown");
}

function draw(doc, ctx) {
  const byBound = Array.isArray(doc.by_bound) ? doc.by_bound : [];
  const top = Array.isArray(doc.top_kernels) ? doc.top_kernels : [];
  const maxPct = Math.max(...byBound.map((b) => b.pct_time || 0), 0) || 100;
  const t = runTerms(ctx);

  const bars = h("div", {class: "bars", "data-role": "bound-bars"}, byBound.map((b) =>
    h("div", {class: "bar-row", "data-bound": b.bound, "data-value": b.time_ns ?? null},
      h("span", {class: "bar-label"}, barLabel(b, top)),
      h("span", {class: "bar-track"}, h("span", {class: "bar", style: {
        width: `${Math.max(0.5, (b.pct_time || 0) / maxPct * 100)}%`, "--bound": fmt.boundColour(b.bound)}})),
      h("span", {class: "bar-value"}, `${fmt.pct(b.pct_time)} % · ${fmt.duration(b.time_ns)} · ${fmt.plural(b.launches, "launch", "launches")}`))));

  // One row per kernel; the row opens its longest launch in the drawer.
  const rows = top.map((k) => h("tr", {class: ["clickable", String(k.longest_launch_id) === String(ctx.state.launch) ? "selected" : ""],
    "data-launch-id": k.longest_launch_id, "data-name": k.name, onclick: () => ctx.openLaunch(k.longest_launch_id)},
    h("td", null, kernelName(k.name, k.name)),
    h("td", {class: "numeric", "data-col": "launches", "data-value": k.launches}, fmt.int(k.launches)),
    h("td", {class: "numeric", "data-col": "total_ns", "data-value": k.total_ns ?? null}, fmt.duration(k.total_ns)),
    h("td", {class: "numeric", "data-col": "pct_time", "data-value": k.pct_time ?? null}, fmt.pct(k.pct_time)),
    h("td", {class: "numeric", "data-col": "max_ns", "data-value": k.max_ns ?? null}, fmt.duration(k.max_ns),
      h("span", {class: "muted small"}, ` (#${fmt.int(k.longest_launch_id)})`)),
    h("td", null, boundChip(k.bound, k.bound_level, k.bound_reason)),
    h("td", {class: "reason", "data-col": "bound_reason"}, k.bound_reason || fmt.MISSING,
      k.occupancy_note ? h("div", {class: "muted small", "data-col": "occupancy_note"}, k.occupancy_note) : null)));

  const empty = t.vendor === "Intel"
    ? `This ${t.toolName} run profiled the CPU: it has no GPU kernels (see CPU hotspots).`
    : "No launch has a duration.";
  return [
    h("section", null, h("h3", null, `Kernel time by bound class (total ${fmt.duration(doc.total_ns)})`),
      byBound.length ? bars : h("p", {class: "muted", "data-role": "empty"}, empty)),
    top.length ? h("section", null, h("h3", null, `Top ${fmt.plural(top.length, "kernel", "kernels")} by total time`),
      h("p", {class: "muted small"}, "One row per kernel; a row opens its longest launch."),
      h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "top-kernels"},
        h("thead", null, h("tr", null, ["Kernel", "Launches", "Total", "% time", "Longest", "Bound (counters)", "Why / occupancy"].map((x) => h("th", null, x)))),
        h("tbody", null, rows)))) : null];
}
