// Series: the runs exported together under one --run (tb-hwprof export v1 ... v8 --run NAME) are
// the steps of an optimisation series.  /series follows each kernel across the steps (pairing
// step by step, so a rename midway stays one line) and this view plots, per metric, one line per
// kernel with one point per step, and the kernel's bound label at each step.
// Each chart is an <svg data-metric=...>; its lines are <polyline data-chain=i>, its points
// <circle data-chain=i data-step=s data-value=v> (s: the step's position, 0-based).
// The nav offers it on a series' steps only; a link to it on another run says what a series is.

import {getJSON} from "../api.js";
import {h, s, replace} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";
import {fetchInto} from "./common.js";

const METRICS = {
  duration_ns: ["Duration (all launches)", (v) => fmt.duration(v)],
  achieved_occupancy_pct: ["Achieved occupancy", (v) => `${fmt.pct(v)} %`],
  sm_throughput_pct: ["SM throughput", (v) => `${fmt.pct(v)} %`],
  memory_throughput_pct: ["Memory throughput", (v) => `${fmt.pct(v)} %`],
  l1_hit_rate_pct: ["L1 hit rate", (v) => `${fmt.pct(v)} %`],
  l2_hit_rate_pct: ["L2 hit rate", (v) => `${fmt.pct(v)} %`],
};
const MAX_CHAINS = 8;  // the kernels longest in time; the rest are listed, not drawn
const COLOURS = ["#1971c2", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c", "#5f3dc4"];
const W = 420, H = 200;
const BOX = {left: 64, right: W - 12, top: 14, bottom: H - 34};

/** {group: its steps} of the series in the logdir: the runs the server offers Series for (GET /runs
 * decides, with the test /series answers by: a job's ranks are no steps), by folder. */
function seriesOf(runs) {
  const groups = new Map();
  for (const r of runs) {
    if (r.error || !Array.isArray(r.views) || !r.views.includes("series")) continue;
    const g = r.run.slice(0, r.run.lastIndexOf("/"));
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(r.run);
  }
  return groups;
}

export function render(container, ctx) {
  const groups = seriesOf(ctx.runs);
  const run = ctx.state.run || "";
  const group = run.slice(0, Math.max(0, run.lastIndexOf("/")));
  container.append(h("div", {class: "view-head"}, h("h2", null, "Series"), h("span", {class: "mono run-name"}, run)));
  if (!groups.has(group) || !groups.get(group).includes(run)) {
    container.append(notAStep(run, groups, ctx));
    return null;
  }
  container.append(h("div", {class: "toolbar"}, h("label", null, "Series ",
    h("select", {"data-role": "series-picker", onchange: (e) => ctx.navigate({run: groups.get(e.target.value)[0]})},
      [...groups.keys()].map((g) => h("option", {value: g, selected: g === group}, g))))));
  const slot = h("div");
  container.append(slot);
  load(slot, ctx, run).catch((e) => console.error(e));
  return null;
}

/** What a series is and how to export one, for a run that is no step of one; the logdir's series
 * as links (the view never moves to another run by itself). */
function notAStep(run, groups, ctx) {
  const links = [...groups].map(([g, steps]) => h("li", null, h("a", {href: "#", "data-group": g,
    onclick: (e) => { e.preventDefault(); ctx.navigate({run: steps[0]}); }}, g),
    h("span", {class: "muted"}, ` · ${fmt.plural(steps.length, "step", "steps")}`)));
  return h("div", {class: "empty-state", "data-role": "not-a-step"},
    h("p", null, h("span", {class: "mono"}, run), " is not a step of an optimisation series."),
    h("p", null, "A series is the versions of a program, profiled one after another and exported together, in order, " +
      "under one run name; this view then follows each kernel from step to step (a renamed kernel stays one line):"),
    h("pre", null, "tb-hwprof export v1.ncu-rep v2.ncu-rep v3.ncu-rep --logdir LOGDIR --run NAME"),
    jobNote(run, ctx),
    links.length ? [h("p", null, "Series in this logdir:"), h("ul", {"data-role": "series-links"}, links)]
      : h("p", {class: "muted", "data-role": "series-none"}, "This logdir holds no series yet."));
}

/** For a rank of a distributed job (its folder is the job's run): the job's view that compares its ranks. */
function jobNote(run, ctx) {
  const job = ctx.runInfo(run.slice(0, Math.max(0, run.lastIndexOf("/"))));
  if (!job || !Array.isArray(job.views) || !job.views.includes("distributed")) return null;
  return h("p", {"data-role": "job-rank"}, "Its folder is the distributed job ", h("span", {class: "mono"}, job.run),
    ": its runs are the job's ranks, not steps. ",
    h("a", {href: "#", onclick: (e) => { e.preventDefault(); ctx.navigate({view: "distributed", run: job.run}); }},
      "Compare the ranks in Distributed →"));
}

async function load(slot, ctx, run) {
  const doc = await fetchInto(slot, getJSON(ctx.view.route, {run}), `the series of ${run}`, ctx);
  if (!doc) return;
  const steps = Array.isArray(doc.steps) ? doc.steps : [];
  const chains = Array.isArray(doc.chains) ? doc.chains : [];
  const drawn = chains.slice(0, MAX_CHAINS);
  const metrics = (Array.isArray(doc.metrics) ? doc.metrics : Object.keys(METRICS)).filter((m) => METRICS[m]);
  replace(slot,
    h("p", {class: "muted"}, `${steps.length} steps of ${doc.group}, in the order exported; each kernel is followed from step to step by the Compare view's pairing (a renamed kernel stays one line).`),
    stepsTable(steps, drawn),
    h("div", {class: "series-charts", "data-role": "series-charts"}, metrics.map((m) => chart(m, steps, drawn))),
    chains.length > drawn.length ? h("p", {class: "muted small"}, `${chains.length - drawn.length} shorter kernel(s) not drawn.`) : null);
}

function chainName(chain) {
  const labels = Array.isArray(chain.labels) ? chain.labels : [chain.label];
  return labels.join(" → ");
}

// The steps, and per kernel its name and bound label at each step.
function stepsTable(steps, chains) {
  return h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "series-steps"},
    h("thead", null, h("tr", null, h("th", null, "Kernel"),
      steps.map((st) => h("th", {title: st.run}, `step ${st.step}`, h("div", {class: "muted small"}, st.run.slice(st.run.lastIndexOf("/") + 1)))))),
    h("tbody", null, chains.map((c, i) => h("tr", {"data-chain": i},
      h("td", null, h("span", {class: "dot", style: {"--bound": COLOURS[i % COLOURS.length]}}), " ", chainName(c)),
      (c.points || []).map((p, k) => h("td", {"data-step": k, "data-bound": p ? p.bound || null : null, title: p ? `${p.label} (${p.paired_by || "first seen"})` : "absent"},
        p ? boundChip(p.bound, null, null) : h("span", {class: "muted"}, fmt.MISSING))))))));
}

function chart(metric, steps, chains) {
  const [title, show] = METRICS[metric];
  const values = chains.flatMap((c) => (c.points || []).map((p) => (p ? p[metric] : null))).filter((v) => typeof v === "number" && Number.isFinite(v));
  const pct = metric.endsWith("_pct");
  const hi = pct ? 100 : Math.max(...values, 0) * 1.1 || 1;
  const n = Math.max(steps.length, 1);
  const X = (k) => BOX.left + (n === 1 ? 0.5 : k / (n - 1)) * (BOX.right - BOX.left);
  const Y = (v) => BOX.bottom - v / hi * (BOX.bottom - BOX.top);
  const svg = s("svg", {class: "series-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `${title} per step`, "data-metric": metric});
  const grid = s("g", {class: "grid"});
  for (const f of [0, 0.5, 1]) {
    grid.append(s("line", {x1: BOX.left, x2: BOX.right, y1: Y(hi * f), y2: Y(hi * f)}),
      s("text", {class: "tick", x: BOX.left - 6, y: Y(hi * f) + 4, "text-anchor": "end"}, show(hi * f)));
  }
  steps.forEach((st, k) => grid.append(s("text", {class: "tick", x: X(k), y: BOX.bottom + 16, "text-anchor": "middle"}, String(st.step))));
  svg.append(grid, s("rect", {class: "frame", x: BOX.left, y: BOX.top, width: BOX.right - BOX.left, height: BOX.bottom - BOX.top}),
    s("text", {class: "axis-label", x: (BOX.left + BOX.right) / 2, y: H - 4, "text-anchor": "middle"}, "step"));
  chains.forEach((c, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const pts = (c.points || []).map((p, k) => [k, p && typeof p[metric] === "number" ? p[metric] : null]).filter(([, v]) => v !== null);
    svg.append(s("polyline", {class: "series-line", "data-chain": i, fill: "none", stroke: colour, "stroke-width": 2,
      points: pts.map(([k, v]) => `${X(k)},${Y(v)}`).join(" ")}));
    for (const [k, v] of pts) {
      svg.append(s("circle", {class: "series-point", cx: X(k), cy: Y(v), r: 4, fill: colour, "data-chain": i, "data-step": k, "data-value": v},
        s("title", null, `${c.points[k].label}, step ${steps[k] ? steps[k].step : k}: ${show(v)}`)));
    }
  });
  return h("figure", {class: "series-figure"}, h("figcaption", null, title), svg);
}
