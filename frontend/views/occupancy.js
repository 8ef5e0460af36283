// Launch statistics and occupancy for the kernel drawer: the launch's configuration, theoretical vs
// achieved occupancy and the occupancy chart (how theoretical warps per SM would change with
// registers per thread, shared memory per block and block size, the launch marked), as Nsight
// Compute's occupancy calculator draws it.  The curves are computed by the server
// (tb_hwprof/analysis/occupancy.py kernel_document, /kernel's `occupancy`); this module only draws.

import {h, s as svg} from "../dom.js";
import * as fmt from "../format.js";

// curve key -> [axis title, tick formatter, axis title on AMD]
export const PANELS = [
  ["registers_per_thread", "Registers per thread", (x) => fmt.int(x), "VGPRs per lane"],
  ["shared_mem_bytes", "Shared memory per block", (x) => fmt.human(x, "bytes"), "LDS per work-group"],
  ["block_size", "Block size (threads)", (x) => fmt.int(x), "Work-group size"],
];
export const PANEL = {width: 250, height: 150, left: 34, right: 10, top: 20, bottom: 30, gap: 14};

/** Pixel position of (x, warps) in a panel whose x runs over [x0, x1] and y over [0, maxWarps]. */
export function place(x, warps, x0, x1, maxWarps, offsetX = 0) {
  const w = PANEL.width - PANEL.left - PANEL.right, hgt = PANEL.height - PANEL.top - PANEL.bottom;
  const px = offsetX + PANEL.left + (x1 > x0 ? (x - x0) / (x1 - x0) : 0) * w;
  const py = PANEL.top + (1 - (maxWarps > 0 ? warps / maxWarps : 0)) * hgt;
  return [Number(px.toFixed(2)), Number(py.toFixed(2))];
}

function validCurve(curve) {
  return curve && Array.isArray(curve.x) && Array.isArray(curve.warps) && curve.x.length === curve.warps.length &&
    curve.x.length > 0 && curve.x.every(Number.isFinite) && curve.warps.every(Number.isFinite);
}

function panel(key, title, tick, curve, current, maxWarps, index) {
  const offsetX = index * (PANEL.width + PANEL.gap);
  const x0 = curve.x[0], x1 = curve.x[curve.x.length - 1];
  const points = curve.x.map((x, i) => place(x, curve.warps[i], x0, x1, maxWarps, offsetX));
  const bottom = PANEL.height - PANEL.bottom;
  const [left, right] = [offsetX + PANEL.left, offsetX + PANEL.width - PANEL.right];
  const now = current && Number.isFinite(current[key]) ? current[key] : null;
  const nowIndex = now === null ? -1 : curve.x.indexOf(now);
  const marker = nowIndex >= 0 ? points[nowIndex] : null;
  return svg("g", {class: "occ-panel", "data-curve": key, "data-x0": x0, "data-x1": x1, "data-max-warps": maxWarps},
    svg("text", {x: left, y: 12, class: "occ-title"}, title),
    svg("line", {x1: left, y1: bottom, x2: right, y2: bottom, class: "occ-axis"}),
    svg("line", {x1: left, y1: PANEL.top, x2: left, y2: bottom, class: "occ-axis"}),
    svg("text", {x: left - 4, y: PANEL.top + 4, "text-anchor": "end", class: "occ-tick"}, String(maxWarps)),
    svg("text", {x: left - 4, y: bottom, "text-anchor": "end", class: "occ-tick"}, "0"),
    svg("text", {x: left, y: bottom + 14, class: "occ-tick"}, tick(x0)),
    svg("text", {x: right, y: bottom + 14, "text-anchor": "end", class: "occ-tick"}, tick(x1)),
    svg("polyline", {class: "occ-line", fill: "none", points: points.map((p) => p.join(",")).join(" "),
      "data-x": curve.x.join(","), "data-warps": curve.warps.join(",")}),
    marker ? svg("circle", {class: "occ-now", cx: marker[0], cy: marker[1], r: 4, "data-x": now,
      "data-warps": curve.warps[nowIndex]},
      svg("title", null, `this launch: ${tick(now)} → ${curve.warps[nowIndex]} warps per SM`)) : null);
}

/** The three-panel SVG chart of an occupancy document's curves, or null when it has none. */
export function occupancyChart(occ) {
  const curves = occ && occ.curves;
  if (!curves || !Number.isFinite(curves.max_warps_per_sm)) return null;
  const drawn = PANELS.filter(([key]) => validCurve(curves[key]));
  if (!drawn.length) return null;
  const width = drawn.length * PANEL.width + (drawn.length - 1) * PANEL.gap;
  return svg("svg", {class: "occupancy-chart", "data-role": "occupancy-chart", width, height: PANEL.height,
    viewBox: `0 0 ${width} ${PANEL.height}`, role: "img",
    "aria-label": "theoretical warps per SM against registers per thread, shared memory per block and block size"},
    drawn.map(([key, title, tick, amdTitle], i) => panel(key, occ.limits && occ.limits.gfx ? amdTitle : title, tick,
      curves[key], curves.current, curves.max_warps_per_sm, i)));
}

function fact(label, value, role) {
  return [h("dt", null, label), h("dd", role ? {"data-role": role} : null, value)];
}

/** The drawer section: launch statistics, theoretical vs achieved occupancy and the chart. */
export function occupancySection(occ) {
  if (!occ || typeof occ !== "object") return null;
  const launch = occ.launch || {};
  const limits = occ.limits || {};
  const amd = Boolean(limits.gfx);
  return h("section", {class: "detail-occupancy", "data-role": "occupancy"},
    h("h4", null, "Launch statistics and occupancy"),
    h("dl", {class: "facts"},
      fact(amd ? "Work-group size" : "Block size", `${fmt.int(launch.block_size)} threads`),
      fact("Grid size", `${fmt.int(launch.grid_size)} ${amd ? "work-groups" : "blocks"}`),
      fact(amd ? "VGPRs per lane" : "Registers per thread", fmt.int(launch.registers_per_thread)),
      fact(amd ? "LDS per work-group" : "Shared memory per block", fmt.human(launch.shared_mem_bytes, "bytes")),
      fact(amd ? "Waves per CU" : "Waves per SM", fmt.num(launch.waves_per_sm)),
      fact("Theoretical occupancy", `${fmt.pct(occ.theoretical_occupancy_pct)} %${occ.source ? `, ${occ.source}` : ""}`, "occ-theoretical"),
      fact("Achieved occupancy", fmt.isMissing(occ.achieved_occupancy_pct) ? `${fmt.MISSING} (not measured)`
        : `${fmt.pct(occ.achieved_occupancy_pct)} %`, "occ-achieved"),
      fact("Limited by", occ.limiter || fmt.MISSING, "occ-limiter"),
      limits.gfx ? fact("CU limits", `${fmt.int(limits.simds)} SIMDs × ${fmt.int(limits.max_waves)} wave slots, ` +
        `${fmt.int(limits.vgprs)} VGPRs per lane, ${fmt.human(limits.lds, "bytes")} LDS (${limits.gfx})`)
        : fact("SM limits", `${fmt.int(limits.max_warps_per_sm)} warps, ${fmt.int(limits.max_blocks_per_sm)} blocks, ` +
        `${fmt.int(limits.registers_per_sm)} registers, ${fmt.human(limits.shared_mem_per_sm, "bytes")} shared memory` +
        (limits.compute_capability ? ` (cc ${limits.compute_capability})` : ""))),
    h("div", {class: "muted small"}, amd ? "Theoretical waves per CU (up)" : "Theoretical warps per SM (up)",
      " as one input changes (across), the others as launched; ● marks this launch."),
    occupancyChart(occ),
    h("div", {class: "muted small"}, occ.curves_from || ""));
}
