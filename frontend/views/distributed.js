// Distributed (a multi-rank job's cross-rank run): per-rank stacked bars of GPU time (compute
// alone, communication not overlapped, the two overlapped, other = idle), step time per rank and
// step as a heat map, the straggler findings with their numbers, the top kernels' spread over the
// ranks.  Each rank links to its own run (job/rank_N).  Document: GET /distributed (docs/http_api.md).
// Every string from the job (kernel names, paths, reasons) goes in as text through h().

import {h} from "../dom.js";
import * as fmt from "../format.js";
import {shareLink} from "../state.js";
import {runView, stat} from "./common.js";

export const render = runView({draw});

const PARTS = [
  ["compute_ns", "Compute", "#f08c00", "compute kernels with no communication running"],
  ["communication_ns", "Communication not overlapped", "#e64980", "communication kernels with no compute running"],
  ["overlap_ns", "Overlap", "#7048e8", "communication overlapped by compute on the same device"],
  ["other_ns", "Other (idle)", "#ced4da", "no kernel running between the device's first and last kernel"],
];
// Heat map colour scale: light (fastest step) to dark (slowest).
const COLD = [235, 244, 255], HOT = [201, 42, 42];

function draw(doc, ctx) {
  const ranks = Array.isArray(doc.ranks) ? doc.ranks : [];
  if (!ranks.length) return h("p", {class: "muted", "data-role": "ranks-empty"}, "The job holds no rank.");
  return [headline(doc, ranks), stragglers(doc, ranks, ctx), bars(ranks, ctx), heatMap(doc.step_times, ctx, ranks),
    rankTable(ranks, ctx), kernels(doc.kernels || []), notes(doc.notes || [])];
}

function headline(doc, ranks) {
  const stepsOf = ranks.map((r) => r.step_time_avg_ns).filter((v) => !fmt.isMissing(v));
  const slowest = stepsOf.length ? Math.max(...stepsOf) : null;
  return h("div", {class: "totals", "data-role": "headline"},
    stat("Ranks", fmt.int(ranks.length), "rank-count", ranks.length,
      {note: doc.world_size ? `of world size ${fmt.int(doc.world_size)}` : null}),
    stat("Stragglers", fmt.int((doc.stragglers || []).length), "straggler-count", (doc.stragglers || []).length),
    stat("Slowest average step", fmt.duration(slowest), "slowest-step", slowest));
}

/** A link to rank `r`'s own run, opening its first view; plain text when the logdir lacks that run. */
function rankLink(r, ctx, text = `rank ${r.rank}`) {
  const info = ctx.runInfo(r.run);
  if (!info) return h("span", {class: "mono", "data-rank": r.rank, title: `run ${r.run} is not in this logdir`}, text);
  const view = Array.isArray(info.views) && info.views.length ? info.views[0] : "kernels";
  const state = {view, run: r.run};
  return h("a", {href: shareLink(state), class: "mono rank-link", "data-rank": r.rank, "data-run": r.run,
    title: `open run ${r.run}`,
    onclick: (e) => { e.preventDefault(); ctx.navigate({...state, launch: null, page: null, q: null, sort: null}); }}, text);
}

function stragglers(doc, ranks, ctx) {
  const found = Array.isArray(doc.stragglers) ? doc.stragglers : [];
  const t = doc.thresholds || {};
  const rule = `a rank whose average step time (or, without steps, busy GPU time) exceeds the median rank's by more ` +
    `than ${fmt.num(t.share_pct)} % and ${fmt.duration(t.min_ns)}`;
  const byRank = new Map(ranks.map((r) => [r.rank, r]));
  return h("section", {"data-role": "stragglers"}, h("h3", null, "Stragglers"),
    found.length ? h("ul", {class: "findings"}, found.map((f) =>
      h("li", {"data-rank": f.rank}, rankLink(byRank.get(f.rank) || f, ctx), ": ", h("span", {"data-role": "reason"}, f.reason))))
      : h("p", {"data-role": "no-straggler"}, "No straggler."),
    h("p", {class: "muted small"}, `Straggler: ${rule}.`));
}

function bars(ranks, ctx) {
  const max = Math.max(0, ...ranks.map((r) => (r.bars ? PARTS.reduce((sum, [k]) => sum + (r.bars[k] || 0), 0) : 0)));
  const rows = ranks.map((r) => {
    const total = r.bars ? PARTS.reduce((sum, [k]) => sum + (r.bars[k] || 0), 0) : 0;
    const segments = r.bars ? PARTS.map(([key, label, colour]) => {
      const ns = r.bars[key] || 0;
      const width = max > 0 ? 100 * ns / max : 0;
      return h("span", {class: "rank-part", "data-part": key, "data-value": ns,
        style: {width: `${width.toFixed(3)}%`, background: colour},
        title: `rank ${r.rank} · ${label}: ${fmt.duration(ns)} (${total > 0 ? fmt.pct(100 * ns / total) : fmt.MISSING} % of the GPU span)`});
    }) : [];
    return h("div", {class: ["rank-bar-row", r.straggler ? "straggler" : ""], "data-rank": r.rank},
      h("span", {class: "rank-label"}, rankLink(r, ctx), r.straggler ? h("span", {class: "weak", title: r.straggler_reason}, " ⚠") : null),
      h("span", {class: "rank-track", "data-role": "rank-bar", "data-rank": r.rank, "data-total": total}, segments),
      h("span", {class: "mono small muted"}, fmt.duration(total)));
  });
  return h("section", {"data-role": "rank-bars"}, h("h3", null, "GPU time per rank"),
    h("ul", {class: "legend-list inline", "data-role": "bars-legend"}, PARTS.map(([key, label, colour, what]) =>
      h("li", {"data-part": key, title: what}, h("span", {class: "swatch-box", style: {background: colour}}), ` ${label}`))),
    h("div", {class: "rank-bars"}, rows),
    h("p", {class: "muted small"}, "Each bar is the rank's devices' span from first to last kernel, summed over its devices: " +
      "compute alone + communication alone + both at once + neither. Communication kernels: NCCL, RCCL, gloo, DeepEP."));
}

function mix(t) {
  const c = COLD.map((v, i) => Math.round(v + (HOT[i] - v) * t));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

function heatMap(grid, ctx, ranks) {
  const steps = grid && Array.isArray(grid.steps) ? grid.steps : [];
  if (!steps.length) {
    return h("section", {"data-role": "heatmap"}, h("h3", null, "Step time per rank"),
      h("p", {class: "muted", "data-role": "no-steps"}, "No rank has ProfilerStep#N steps (not a PyTorch trace, or no steps recorded)."));
  }
  const lo = grid.min_ns, hi = grid.max_ns;
  const where = (v) => (hi > lo ? (v - lo) / (hi - lo) : 0.5);
  const readout = h("p", {class: "mono small", "data-role": "heat-readout"}, "Hover a cell for its step time.");
  const byRank = new Map(ranks.map((r) => [r.rank, r]));
  const body = grid.ranks.map((rank, i) => h("tr", {"data-rank": rank},
    h("th", null, rankLink(byRank.get(rank) || {rank, run: ""}, ctx)),
    steps.map((step, j) => {
      const v = grid.ns[i][j];
      const median = grid.median_ns[j];
      const text = fmt.isMissing(v) ? `rank ${rank}, step ${step}: no such step`
        : `rank ${rank}, step ${step}: ${fmt.duration(v)} (median over the ranks ${fmt.duration(median)}, ${fmt.signed(100 * (v - median) / median, 1, " %")})`;
      const show = () => { readout.textContent = text; };
      return h("td", {class: "heat-cell numeric", "data-step": step, "data-value": v ?? null, title: text,
        style: fmt.isMissing(v) ? {} : {background: mix(where(v)), color: where(v) > 0.6 ? "#fff" : "#212529"},
        onmouseenter: show, onfocus: show, tabindex: 0}, fmt.isMissing(v) ? fmt.MISSING : fmt.num(v / 1e6));
    })));
  const scale = h("div", {class: "heat-legend", "data-role": "heat-legend"},
    h("span", {class: "mono small", "data-role": "heat-min", "data-value": lo}, fmt.duration(lo)),
    h("span", {class: "heat-gradient", style: {background: `linear-gradient(to right, ${mix(0)}, ${mix(0.5)}, ${mix(1)})`}}),
    h("span", {class: "mono small", "data-role": "heat-max", "data-value": hi}, fmt.duration(hi)));
  return h("section", {"data-role": "heatmap"}, h("h3", null, "Step time per rank (ms)"), scale,
    h("div", {class: "scroll"}, h("table", {class: "data compact heat", "data-role": "step-heatmap"},
      h("thead", null, h("tr", null, h("th", null, "Rank \\ step"), steps.map((s) => h("th", {class: "numeric", "data-step": s}, String(s))))),
      h("tbody", null, body))), readout);
}

/** The ranks table's numbers, one row per rank (overlap also as a share of communication, as HTA gives it). */
function rankTable(ranks, ctx) {
  const cols = [["steps", "Steps", null], ["step_time_avg_ns", "Avg step", "ns"], ["step_time_max_ns", "Max step", "ns"],
    ["compute_ns", "Compute", "ns"], ["communication_ns", "Communication", "ns"], ["overlap_ns", "Overlap", "ns"],
    ["idle_ns", "Idle", "ns"]];
  const cell = (r, [key, , unit]) => h("td", {class: "numeric", "data-col": key, "data-value": r[key] ?? null},
    unit ? fmt.duration(r[key]) : fmt.int(r[key]));
  const share = (r) => (r.communication_ns > 0 ? 100 * r.overlap_ns / r.communication_ns : null);
  return h("section", {"data-role": "rank-numbers"}, h("h3", null, "Per rank"),
    h("div", {class: "scroll"}, h("table", {class: "data compact", "data-role": "ranks-table"},
      h("thead", null, h("tr", null, h("th", null, "Rank"), cols.map(([, t]) => h("th", {class: "numeric"}, t)),
        h("th", {class: "numeric", title: "overlap / communication"}, "Comm. overlapped (%)"), h("th", null, "Straggler"))),
      h("tbody", null, ranks.map((r) => h("tr", {"data-rank": r.rank},
        h("td", null, rankLink(r, ctx)), cols.map((c) => cell(r, c)),
        h("td", {class: "numeric", "data-col": "overlap_pct", "data-value": share(r)}, fmt.pct(share(r))),
        h("td", {"data-col": "straggler", "data-value": r.straggler ? 1 : 0}, r.straggler ? "yes" : "no")))))));
}

function kernels(rows) {
  if (!rows.length) return null;
  const [factor, unit] = fmt.columnScale("ns", rows.map((r) => r.median_ns));
  const n = (v) => fmt.num((v ?? NaN) / factor);
  return h("section", {"data-role": "rank-kernels"}, h("h3", null, "Top kernels across the ranks"),
    h("div", {class: "scroll"}, h("table", {class: "data compact", "data-role": "rank-kernels-table"},
      h("thead", null, h("tr", null, ["Kernel", "Ranks", `Min (${unit})`, `Median (${unit})`, `Max (${unit})`, "Min rank", "Max rank", "Spread (%)"]
        .map((t, i) => h("th", {class: i ? "numeric" : null}, t)))),
      h("tbody", null, rows.map((r) => h("tr", {"data-kernel": r.kernel},
        h("td", {class: "mono kernel-name", title: r.kernel}, r.kernel.length > 90 ? `${r.kernel.slice(0, 90)}…` : r.kernel),
        h("td", {class: "numeric"}, fmt.int(r.ranks)),
        h("td", {class: "numeric", "data-col": "min_ns", "data-value": r.min_ns}, n(r.min_ns)),
        h("td", {class: "numeric", "data-col": "median_ns", "data-value": r.median_ns}, n(r.median_ns)),
        h("td", {class: "numeric", "data-col": "max_ns", "data-value": r.max_ns}, n(r.max_ns)),
        h("td", {class: "numeric"}, fmt.int(r.min_rank)), h("td", {class: "numeric"}, fmt.int(r.max_rank)),
        h("td", {class: "numeric", "data-col": "spread_pct", "data-value": r.spread_pct ?? null}, fmt.pct(r.spread_pct))))))));
}

function notes(lines) {
  if (!lines.length) return null;
  return h("section", {"data-role": "job-notes"}, h("h3", null, "Notes"),
    h("ul", {class: "muted small"}, lines.map((line) => h("li", null, line))));
}
