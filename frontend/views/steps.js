// Steps (PyTorch runs): the time of each ProfilerStep split by what ran (kernel, memcpy, memset,
// communication, runtime, DataLoader, CPU exec, other), as torch-tb-profiler's Overview shows it:
// stacked bars per step and the average step, drawn as inline SVG, then the same numbers as a table.
// Each bar group carries data-step / data-total, each segment data-cat / data-value (ns).

import {h, s} from "../dom.js";
import * as fmt from "../format.js";
import {runView, stat} from "./common.js";

const LABELS = {kernel: "Kernel", memcpy: "Memcpy", memset: "Memset", communication: "Communication",
  runtime: "Runtime", dataloader: "DataLoader", cpu_exec: "CPU Exec", other: "Other"};
const COLOURS = {kernel: "#f08c00", memcpy: "#1c7ed6", memset: "#0ca678", communication: "#e64980",
  runtime: "#868e96", dataloader: "#82c91e", cpu_exec: "#7048e8", other: "#ced4da"};
const W = 880, H = 340;
const BOX = {left: 72, right: W - 16, top: 16, bottom: H - 44};

export const render = runView({draw});

const label = (cat) => LABELS[cat] || cat.replace(/_/g, " ");
const colour = (cat) => COLOURS[cat] || "#adb5bd";
const stepName = (step) => (step === -1 ? "whole trace" : `ProfilerStep#${step}`);

function draw(doc) {
  const cats = Array.isArray(doc.categories) ? doc.categories : [];
  const steps = Array.isArray(doc.steps) ? doc.steps : [];
  const avg = doc.average || {};
  if (!steps.length) return h("p", {class: "muted", "data-role": "steps-empty"}, "The trace holds no step.");
  return [headline(cats, steps, avg), chart(cats, steps, avg), legend(cats, avg), table(cats, steps, avg),
    h("p", {class: "muted small"}, "Each instant of a step counts once, in the first of Kernel, Memcpy, Memset, " +
      "Communication, Runtime, DataLoader, CPU Exec that covers it, else in Other (torch-tb-profiler's rule).")];
}

function headline(cats, steps, avg) {
  const busiest = cats.slice().sort((a, b) => (avg[`${b}_ns`] || 0) - (avg[`${a}_ns`] || 0))[0];
  const share = (c) => (avg.total_ns > 0 ? 100 * (avg[`${c}_ns`] || 0) / avg.total_ns : null);
  return h("div", {class: "totals", "data-role": "headline"},
    stat("Steps", fmt.int(steps.length), "step-count", steps.length),
    stat("Average step", fmt.duration(avg.total_ns), "average-step", avg.total_ns),
    stat("Kernel share", fmt.isMissing(share("kernel")) ? fmt.MISSING : `${fmt.pct(share("kernel"))} %`, "kernel-share",
      share("kernel"), {title: "the average step's time with a kernel running"}),
    busiest ? stat("Largest part", label(busiest), "largest-part", busiest, {note: `${fmt.pct(share(busiest))} % of the average step`}) : null);
}


function chart(cats, steps, avg) {
  const bars = steps.map((row) => ({row, name: String(row.step === -1 ? "all" : row.step), role: "step-bar"}));
  bars.push({row: avg, name: "Average", role: "average-bar"});
  const [step, top] = fmt.axisTicks(Math.max(...bars.map((b) => b.row.total_ns || 0)));
  const [factor, unit] = fmt.scaleFor("ns", top);
  const Y = (ns) => BOX.bottom - (ns / top) * (BOX.bottom - BOX.top);
  const slot = (BOX.right - BOX.left) / (bars.length + 0.5);  // half a slot of space before Average
  const width = Math.max(2, Math.min(56, slot * 0.7));
  const svg = s("svg", {class: "steps-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "time per step by category", "data-role": "steps-chart", "data-y-max": top,
    "data-plot-top": BOX.top, "data-plot-bottom": BOX.bottom});
  const grid = s("g", {class: "grid"});
  for (let v = 0; v <= top + step / 2; v += step) {
    grid.append(s("line", {x1: BOX.left, x2: BOX.right, y1: Y(v), y2: Y(v), stroke: "#e9ecef"}),
      s("text", {x: BOX.left - 6, y: Y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#495057"}, `${fmt.num(v / factor)} ${unit}`));
  }
  svg.append(grid, s("text", {x: 14, y: (BOX.top + BOX.bottom) / 2, "text-anchor": "middle", "font-size": 12, fill: "#495057",
    transform: `rotate(-90 14 ${(BOX.top + BOX.bottom) / 2})`}, "Step time"));
  const every = Math.ceil(bars.length / 40);  // keep the step labels apart
  bars.forEach((bar, i) => {
    const x = BOX.left + slot * (i + 0.5 + (bar.role === "average-bar" ? 0.5 : 0)) - width / 2;
    svg.appendChild(barGroup(bar, cats, x, width, Y, i % every === 0 || bar.role === "average-bar"));
  });
  svg.appendChild(s("line", {x1: BOX.left, x2: BOX.right, y1: BOX.bottom, y2: BOX.bottom, stroke: "#868e96"}));
  return h("div", {class: "roofline-wrap"}, svg);
}

function barGroup(bar, cats, x, width, Y, labelled) {
  const row = bar.row;
  const g = s("g", {"data-role": bar.role, "data-step": bar.role === "step-bar" ? row.step : null, "data-total": row.total_ns});
  let below = 0;
  for (const cat of cats) {
    const ns = row[`${cat}_ns`] || 0;
    const pct = row.total_ns > 0 ? 100 * ns / row.total_ns : 0;
    g.appendChild(s("rect", {x, width, y: Y(below + ns), height: Math.max(0, Y(below) - Y(below + ns)), fill: colour(cat),
      "data-cat": cat, "data-value": ns},
      s("title", null, `${bar.role === "step-bar" ? stepName(row.step) : "Average step"} · ${label(cat)}: ${fmt.duration(ns)} (${fmt.pct(pct)} %)`)));
    below += ns;
  }
  if (labelled) {
    g.appendChild(s("text", {x: x + width / 2, y: BOX.bottom + 16, "text-anchor": "middle", "font-size": 11, fill: "#495057"}, bar.name));
  }
  return g;
}

function legend(cats, avg) {
  return h("ul", {class: "legend-list inline", "data-role": "steps-legend"}, cats.map((cat) =>
    h("li", {"data-cat": cat}, h("span", {class: "swatch-box", style: {background: colour(cat)}}),
      ` ${label(cat)} `, h("span", {class: "muted"},
        avg.total_ns > 0 ? `${fmt.pct(100 * (avg[`${cat}_ns`] || 0) / avg.total_ns)} %` : fmt.MISSING))));
}

function table(cats, steps, avg) {
  const [factor, unit] = fmt.scaleFor("ns", avg.total_ns || 0);
  const cell = (v, cat) => h("td", {class: "numeric", "data-col": cat, "data-value": v ?? null}, fmt.num((v ?? NaN) / factor));
  // The step names stay in sight when the many categories scroll sideways (class "pinned", style.css).
  const head = ["Step", ...cats.map(label), "Total"].map((t, i) => h("th", {class: i ? "numeric" : "pinned"}, i ? `${t} (${unit})` : t));
  return h("section", null, h("h3", null, "Time per step"), h("div", {class: "scroll"},
    h("table", {class: "data compact", "data-role": "step-breakdown"},
      h("thead", null, h("tr", null, head)),
      h("tbody", null, steps.map((row) => h("tr", {"data-step": row.step}, h("td", {class: "pinned"}, stepName(row.step)),
        cats.map((c) => cell(row[`${c}_ns`], `${c}_ns`)), cell(row.total_ns, "total_ns")))),
      h("tfoot", null,
        h("tr", {"data-role": "average-row"}, h("th", {class: "pinned"}, "Average"), cats.map((c) => cell(avg[`${c}_ns`], `${c}_ns`)), cell(avg.total_ns, "total_ns")),
        h("tr", {"data-role": "share-row"}, h("th", {class: "pinned"}, "Share of the average step"), cats.map((c) =>
          h("td", {class: "numeric"}, avg.total_ns > 0 ? `${fmt.pct(100 * (avg[`${c}_ns`] || 0) / avg.total_ns)} %` : fmt.MISSING)),
          h("td", {class: "numeric"}, "100 %"))))));
}
