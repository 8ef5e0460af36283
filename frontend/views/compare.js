// Compare two runs: the warnings that qualify the totals, the basis (per step where both runs have
// profiler steps, else whole runs), totals and speedup, paired kernels (how each was paired) with
// metric deltas, the leftovers of one launch configuration (suggested, not paired), one pair in
// detail (every column and raw metric the two launches share), NVTX phases, and the kernels found
// in only one run, which the user can pair by hand.

import {getJSON} from "../api.js";
import {h, s, replace, kernelName, debounce} from "../dom.js";
import * as fmt from "../format.js";
import {boundChip} from "./table.js";
import {fetchInto, stat} from "./common.js";

const DELTAS = [
  ["sm_throughput_pct", "SM"],
  ["memory_throughput_pct", "Memory"],
  ["dram_throughput_pct", "DRAM"],
  ["achieved_occupancy_pct", "Occupancy"],
  ["l1_hit_rate_pct", "L1 hit"],
  ["l2_hit_rate_pct", "L2 hit"],
];

const PAIRED_BY = {
  "user": "paired by you",
  "mangled": "same mangled name",
  "demangled": "same demangled name",
  "short": "same short name (the only kernel of that name on each side)",
  "only-one-left": "the only kernel left on each side: check they do the same work",
};

// Pairs the user made live in the state (`pairs`: JSON [[baseline key, run key], ...]) so the URL
// hash and a reload keep them; they belong to the state's base and run and go when either changes.
export function pairsOf(text) {
  let list;
  try {
    list = JSON.parse(text || "[]");
  } catch (e) {
    return [];
  }
  return Array.isArray(list) ? list.filter((p) => Array.isArray(p) && p.length === 2 &&
    p.every((k) => typeof k === "string" && k)) : [];
}

function pairsText(pairs) {
  return pairs.length ? JSON.stringify(pairs) : null;
}

function speedupClass(v) {
  if (fmt.isMissing(v)) return "";
  return v > 1.02 ? "faster" : v < 0.98 ? "slower" : "same";
}

export function render(container, ctx) {
  const good = ctx.runs.filter((r) => !r.error).map((r) => r.run);
  const all = ctx.runs.map((r) => r.run);
  let base = all.includes(ctx.state.base) ? ctx.state.base : good[0];
  let other = all.includes(ctx.state.run) && ctx.state.run !== base ? ctx.state.run : good.find((r) => r !== base) || base;
  if (base !== ctx.state.base || other !== ctx.state.run) ctx.update({base, run: other});

  const picker = (role, value, onPick) => h("select", {"data-role": role, onchange: (e) => onPick(e.target.value)},
    ctx.runs.map((r) => h("option", {value: r.run, selected: r.run === value}, r.error ? `${r.run} (error)` : r.run)));
  const held = {pairs: pairsOf(ctx.state.pairs)};  // ctx.state is the render's copy: pairs made since are here
  const swap = h("button", {type: "button", title: "swap baseline and run",
    onclick: () => ctx.navigate({base: other, run: base, pairs: pairsText(held.pairs.map(([b, r]) => [r, b]))})}, "⇄");
  container.append(h("div", {class: "view-head"}, h("h2", null, "Compare")),
    h("div", {class: "toolbar compare-pick"},
      h("label", null, "Baseline ", picker("base-picker", base, (v) => ctx.navigate({base: v, pairs: null}))), swap,
      h("label", null, " Run ", picker("run-picker-compare", other, (v) => ctx.navigate({run: v, pairs: null})))));
  const slot = h("div");
  container.append(slot);
  if (!base || !other) {
    slot.appendChild(h("p", {class: "muted"}, "Compare needs two runs."));
    return null;
  }
  load(slot, ctx, base, other, held).catch((e) => console.error(e));
  return null;
}

/** The /compare route with the user's pair=BASE:RUN parameters (repeated, so not in getJSON's params). */
function compareRoute(route, pairs) {
  if (!pairs.length) return route;
  const query = new URLSearchParams();
  for (const [b, r] of pairs) query.append("pair", `${b}:${r}`);
  return `${route}?${query}`;
}

async function load(slot, ctx, base, other, held) {
  const pairs = held.pairs;
  const doc = await fetchInto(slot, getJSON(compareRoute(ctx.view.route, pairs), {base, run: other}),
    `comparison of ${base} and ${other}`, ctx);
  if (!doc) return;
  const setPairs = (next) => {
    held.pairs = next;
    ctx.update({pairs: pairsText(next)});
    load(slot, ctx, base, other, held).catch((e) => console.error(e));
  };
  const detail = h("div", {"data-role": "pair-detail-slot"});
  const labels = doc.labels || {};
  replace(slot, warningsBox(doc), totalsBox(doc, base, other),
    matchedSection(doc, (m) => showPair(detail, ctx, base, other, m)),
    suggestedSection(doc.suggested_pairs, (b, r) => setPairs([...pairs, [b, r]])), detail,
    planSection(doc.plan_outcome, perStep(doc)),
    doc.phases ? phasesSection(doc.phases) : null,
    doc.operators ? operatorsSection(doc.operators, perStep(doc)) : null,
    h("div", {class: "two-col"},
      onlyList("Only in baseline", doc.only_in_base, "only-in-base", labels.base || {}),
      onlyList("Only in run", doc.only_in_run, "only-in-run", labels.run || {})),
    pairPicker(doc, labels, pairs, setPairs),
    h("p", {class: "muted small"}, "Deltas are run minus baseline in percentage points; green = higher, red = lower (higher throughput is usually better; a lower hit rate may not matter for a compute-bound kernel)."));
}

// Stated above the totals: why they may not compare like with like.
function warningsBox(doc) {
  const warnings = Array.isArray(doc.warnings) ? doc.warnings : [];
  if (!warnings.length) return null;
  return h("div", {"data-role": "warnings"}, warnings.map((w) =>
    h("p", {class: ["warning", w.decisive ? "error" : "rule-warning"], "data-id": w.id}, w.text)));
}

function perStep(doc) {
  return !!(doc.basis && doc.basis.per_step);
}

// What the figures are: per step (each run's kernel time and calls divided by its steps) or whole runs.
function basisLine(basis) {
  if (!basis || typeof basis.text !== "string") return null;
  const text = basis.per_step ? `Compared ${basis.text} (each run's kernel time and calls divided by its steps)`
    : `Compared as ${basis.text}`;
  return h("p", {class: ["basis", basis.per_step ? "per-step" : null], "data-role": "basis"}, text);
}

function stepsText(n) {
  return `${n} step${n === 1 ? "" : "s"}`;
}

function totalsBox(doc, base, other) {
  const t = doc.totals || {};
  const steps = perStep(doc) ? doc.basis.steps : null;
  const whole = Array.isArray(doc.basis && doc.basis.whole_ns) ? doc.basis.whole_ns : [];
  const side = (title, run, key, n, whole) => stat(steps ? `${title} per step` : title, fmt.duration(t[key]), key, t[key],
    {note: steps ? `${run} · ${stepsText(n)}, ${fmt.duration(whole)} in all` : run});
  return h("div", {class: "totals", "data-role": "totals"}, basisLine(doc.basis),
    side("Baseline", base, "base_ns", steps && steps[0], whole[0]),
    side("Run", other, "run_ns", steps && steps[1], whole[1]),
    speedupStat(doc, t.speedup, steps ? "Speedup per step" : "Speedup"));
}

// A speed-up between different programs, GPUs or tools is no result: not coloured as one; one any
// warning qualifies (different step counts, unpaired time...) is not coloured as a success either.
function speedupStat(doc, speedup, label) {
  const comparable = doc.comparable !== false;
  const qualified = Array.isArray(doc.warnings) && doc.warnings.length > 0;
  const state = !comparable ? "not-comparable" : qualified ? "qualified" : speedupClass(speedup);
  const suffix = !comparable ? ", not a result" : qualified ? ", see the warnings" : "";
  return h("div", {class: ["stat", "speedup", state],
    title: !comparable ? "not a result: see the warnings above" : qualified ? "qualified by the warnings above" : null},
    h("div", {class: "stat-label"}, `${label} (baseline / run)${suffix}`),
    h("div", {class: "stat-value", "data-role": "speedup", "data-value": speedup ?? null}, fmt.ratio(speedup)));
}

function pairName(m) {
  const b = m.base_name || m.name || m.key, r = m.run_name || m.name || m.run_key;
  return b === r ? kernelName(b, m.key) : h("span", null, kernelName(b, m.key), " → ", kernelName(r, m.run_key));
}

// Calls per step are fractions (53 launches over 3 steps); whole runs' are counts.
function calls(v) {
  return fmt.isMissing(v) ? fmt.num(v) : Number.isInteger(v) ? fmt.int(v) : fmt.num(v);
}

function matchedSection(doc, onPick) {
  const matched = Array.isArray(doc.matched) ? doc.matched : [];
  const cross = doc.cross_tool;
  const per = perStep(doc) ? " per step" : "";
  const rows = matched.map((m) => {
    const changed = (m.base_bound || "") !== (m.run_bound || "");
    const c = m.cross_tool || {};
    return h("tr", {"data-key": m.key, "data-run-key": m.run_key, class: ["clickable", changed ? "label-changed" : null],
      title: "show this pair in detail", onclick: () => onPick(m)},
      h("td", null, pairName(m)),
      h("td", {class: ["numeric", doc.comparable === false ? null : speedupClass(m.speedup)], "data-col": "speedup", "data-value": m.speedup ?? null}, fmt.ratio(m.speedup)),
      h("td", {class: "numeric", "data-col": "base_ns", "data-value": m.base_ns ?? null}, fmt.duration(m.base_ns)),
      h("td", {class: "numeric", "data-col": "run_ns", "data-value": m.run_ns ?? null}, fmt.duration(m.run_ns)),
      h("td", {class: "numeric", "data-col": "launches", "data-base": m.base_launches ?? null, "data-run": m.run_launches ?? null},
        `${calls(m.base_launches)} / ${calls(m.run_launches)}`),
      h("td", {"data-col": "paired_by", title: PAIRED_BY[m.paired_by] || ""}, m.paired_by || ""),
      cross ? h("td", {class: ["numeric", c.flagged ? "mid" : null], "data-col": "cross_ratio", "data-value": c.ratio ?? null,
        title: `ncu ${fmt.duration(c.ncu_ns_per_launch)} / trace ${fmt.duration(c.trace_ns_per_launch)} per launch`}, fmt.ratio(c.ratio)) : null,
      h("td", {"data-col": "bound"}, boundChip(m.base_bound, null, null), changed ? [" → ", boundChip(m.run_bound, null, null)] : null),
      DELTAS.map(([key]) => {
        const d = m.deltas ? m.deltas[key] : null;
        return h("td", {class: ["numeric", "delta", fmt.isMissing(d) ? "missing" : d > 0 ? "up" : d < 0 ? "down" : ""],
          "data-col": key, "data-value": fmt.isMissing(d) ? null : d}, fmt.signed(d, 1));
      }));
  });
  const crossNote = cross ? h("p", {class: "muted small", "data-role": "cross-tool"},
    `Cross-tool: ncu on the ${cross.ncu_side} side, ${cross.trace_tool} on the other; ${cross.flagged} pair(s) differ more than ${cross.threshold}× per launch (marked). ${cross.causes}.`) : null;
  return h("section", null, h("h3", null, `Paired kernels (${matched.length})`),
    matched.length ? [h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "matched"},
      h("thead", null, h("tr", null, h("th", null, "Kernel"),
        h("th", {title: `baseline duration / run duration${per}`}, "Speedup"),
        h("th", null, `Baseline${per}`), h("th", null, `Run${per}`),
        h("th", {title: `launches${per}, baseline / run`}, `Calls${per}`),
        h("th", {title: "how the two kernels were paired"}, "Paired by"),
        cross ? h("th", {title: "ncu time per launch / traced time per launch"}, "ncu / trace") : null,
        h("th", {title: "Nsight Compute's speed-of-light rule on SM and memory throughput (% of peak)"}, "Bound (counters)"),
        DELTAS.map(([key, label]) => h("th", {title: `${key}: run minus baseline, percentage points`}, `Δ ${label} (pp)`)))),
      h("tbody", null, rows))), crossNote, h("p", {class: "muted small"}, "Click a pair for every metric the two launches share.")]
      : h("p", {class: "muted"}, (doc.warnings || []).some((w) => w.id === "different-vendors")
        ? "Kernels are not paired across vendors (see the warning); PyTorch runs pair their operators below."
        : "No kernel was paired (pair a renamed kernel below); the totals compare different work."));
}

// Kernels left on each side with one launch configuration: not paired (a configuration is no
// evidence of the same work), offered to the user with the CLI's equivalent.
// The baseline's plan (its Plan view): for each ranked row, the time it concerns before and after,
// the saving expected and the one measured, and what happened (done >= 80% of the expected saving,
// partly >= 20%, not, worse).
const OUTCOME_CLASS = {done: "faster", partly: "", not: "", worse: "slower"};

function planSection(rows, per) {
  rows = Array.isArray(rows) ? rows : [];
  if (!rows.length) return null;
  return h("section", {"data-role": "plan-outcome"},
    h("h3", null, `The baseline's plan: what happened (${rows.length} ranked rows)`),
    h("p", {class: "muted small"}, `Each row's time before and after${per ? ", per step" : ""}: an operator's GPU time, or the idle ` +
      "time of its cause; done when the measured saving reaches 80% of the expected one, partly from 20%."),
    h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "plan-outcome-table"},
      h("thead", null, h("tr", null, ["#", "Where", "What was proposed", "Expected", "Before", "After", "Saved", "Status"].map((t) => h("th", null, t)))),
      h("tbody", null, rows.map((r) => h("tr", {"data-key": r.key, "data-status": r.status},
        h("td", {class: "numeric"}, String(r.rank)), h("td", {class: "mono"}, r.ops || "(whole step)"), h("td", null, r.action),
        ...["expected_ns", "before_ns", "after_ns", "saved_ns"].map((k) =>
          h("td", {class: "numeric", "data-col": k, "data-value": r[k] ?? null}, fmt.duration(r[k]))),
        h("td", {class: OUTCOME_CLASS[r.status] || "", "data-col": "status"}, r.status)))))));
}

function suggestedSection(suggested, onPair) {
  const items = Array.isArray(suggested) ? suggested : [];
  if (!items.length) return null;
  const rows = items.map((p) => h("tr", {"data-key": p.base_key, "data-run-key": p.run_key},
    h("td", null, kernelName(p.base_name, p.base_key), " → ", kernelName(p.run_name, p.run_key)),
    h("td", {class: "mono small launch-config"}, p.launch_config || ""),
    h("td", null, h("code", {class: "pair-command", "data-role": "pair-command"}, `--pair '${p.base_key}:${p.run_key}'`)),
    h("td", null, h("button", {type: "button", "data-role": "suggested-pair-add", title: "compare these two kernels as one pair",
      onclick: () => onPair(p.base_key, p.run_key)}, "Pair"))));
  return h("section", {"data-role": "suggested-pairs"},
    h("h3", null, `Same launch configuration, different names: not paired (${items.length})`),
    h("p", {class: "muted small"}, "Kernels left on each side with one grid, block, registers and shared memory. " +
      "A configuration alone does not make two kernels the same work: pair them here, or with tb-hwprof compare's --pair, if they are."),
    h("div", {class: "scroll"}, h("table", {class: "data suggested-pairs"},
      h("thead", null, h("tr", null, ["Kernels (baseline → run)", "Launch configuration", "tb-hwprof compare", ""].map((t) => h("th", null, t)))),
      h("tbody", null, rows))));
}

// PyTorch runs: operators paired by name, input dims and input types (across vendors, where kernels are not).
function operatorsSection(ops, per) {
  const matched = Array.isArray(ops.matched) ? ops.matched : [];
  const t = ops.totals || {};
  const onlyB = Array.isArray(ops.only_in_base) ? ops.only_in_base.length : 0;
  const onlyR = Array.isArray(ops.only_in_run) ? ops.only_in_run.length : 0;
  return h("section", {"data-role": "operators-section"},
    h("h3", null, `Operators paired by name and input shapes (${matched.length})`),
    h("p", {class: "muted small"}, `GPU time of each operator shape on each side (PyTorch traces${per ? "; calls and time per step" : ""}); ${onlyB} only in the baseline, ${onlyR} only in the run. ` +
      `Paired operators: baseline ${fmt.duration(t.base_ns)}, run ${fmt.duration(t.run_ns)}, speed-up ${fmt.ratio(t.speedup)}.`),
    matched.length ? h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "operators"},
      h("thead", null, h("tr", null, ["Operator", "Input dims", "Input types", "Calls", "Baseline GPU", "Run GPU", "Speedup"].map((x) => h("th", null, x)))),
      h("tbody", null, matched.map((o) => h("tr", {"data-op": o.op},
        h("td", {class: "mono"}, o.op), h("td", {class: "mono small"}, o.input_dims), h("td", {class: "mono small"}, o.input_types),
        h("td", {class: "numeric"}, `${calls(o.base_calls)} / ${calls(o.run_calls)}`),
        h("td", {class: "numeric", "data-col": "base_ns", "data-value": o.base_ns ?? null}, fmt.duration(o.base_ns)),
        h("td", {class: "numeric", "data-col": "run_ns", "data-value": o.run_ns ?? null}, fmt.duration(o.run_ns)),
        h("td", {class: ["numeric", speedupClass(o.speedup)], "data-col": "speedup", "data-value": o.speedup ?? null}, fmt.ratio(o.speedup)))))))
      : h("p", {class: "muted"}, "No operator shape is found on both sides."));
}

function onlyList(title, items, role, labels) {
  items = Array.isArray(items) ? items : [];
  return h("section", null, h("h3", null, `${title} (${items.length})`),
    items.length ? h("table", {class: "data", "data-role": role}, h("tbody", null, items.map((o) =>
      h("tr", {"data-key": o.key}, h("td", null, kernelName(labels[o.key] || o.name || o.key, o.key || o.name)),
        h("td", {class: "numeric", "data-value": o.total_ns ?? null}, fmt.duration(o.total_ns))))))
      : h("p", {class: "muted"}, "none"));
}

// Pair a kernel left in the baseline with one left in the run (a rename the automatic stages missed).
function pairPicker(doc, labels, pairs, setPairs) {
  const left = Array.isArray(doc.only_in_base) ? doc.only_in_base : [];
  const right = Array.isArray(doc.only_in_run) ? doc.only_in_run : [];
  if (!left.length || !right.length) return pairs.length ? userPairsLine(pairs, setPairs) : null;
  const options = (items, names) => items.map((o) => h("option", {value: o.key}, names[o.key] || o.name || o.key));
  const b = h("select", {"data-role": "pair-base"}, options(left, labels.base || {}));
  const r = h("select", {"data-role": "pair-run"}, options(right, labels.run || {}));
  const add = h("button", {type: "button", "data-role": "pair-add", onclick: () => {
    setPairs([...pairs, [b.value, r.value]]);
  }}, "Pair");
  return h("section", {"data-role": "pair-picker"}, h("h3", null, "Pair by hand"),
    h("div", {class: "toolbar"}, h("label", null, "Baseline ", b), h("label", null, " with run ", r), " ", add),
    pairs.length ? userPairsLine(pairs, setPairs) : null);
}

function userPairsLine(pairs, setPairs) {
  return h("p", {class: "muted small"}, `${pairs.length} pair(s) made by hand. `,
    h("button", {type: "button", "data-role": "pair-clear", onclick: () => setPairs([])}, "Forget them"));
}

// -- one pair in detail -----------------------------------------------------------------------
async function showPair(slot, ctx, base, other, m) {
  const doc = await fetchInto(slot, getJSON("compare_pair", {base, run: other, base_key: m.key, run_key: m.run_key}),
    `the pair ${m.base_name || m.key}`, ctx);
  if (!doc) return;
  // Each side's roofs (its /roofline, cached by the API): none where a run has no roofline.
  const roofDocs = await Promise.all([base, other].map((run) => getJSON("roofline", {run}).catch(() => null)));
  if (!ctx.isCurrent()) return;
  const rows = Array.isArray(doc.rows) ? doc.rows : [];
  const trs = rows.map((x) => h("tr", {"data-metric": x.name, "data-source": x.source},
    h("td", {class: "mono"}, x.name),
    h("td", {class: "muted"}, x.unit || ""),
    cell(x.base), cell(x.run),
    h("td", {class: "numeric", "data-col": "diff", "data-value": x.diff ?? null}, typeof x.diff === "number" ? fmt.num(x.diff) : ""),
    // Not coloured: whether higher is better depends on the metric (a longer duration is worse, more throughput better).
    h("td", {class: "numeric", "data-col": "relative",
      "data-value": x.relative ?? null}, fmt.isMissing(x.relative) ? "" : fmt.signed(x.relative * 100, 1, "%"))));
  const count = h("span", {class: "muted", "data-role": "pair-count"}, `${rows.length} shared values`);
  const filter = h("input", {type: "search", class: "filter", placeholder: "Filter metrics…", "data-role": "pair-filter",
    oninput: debounce(() => {
      const q = filter.value.trim().toLowerCase();
      let shown = 0;
      trs.forEach((tr, i) => {
        const hit = !q || rows[i].name.toLowerCase().includes(q);
        tr.hidden = !hit;
        if (hit) shown++;
      });
      count.textContent = q ? `${shown} of ${rows.length} shared values` : `${rows.length} shared values`;
    }, 120)});
  replace(slot, h("section", {"data-role": "pair-detail"},
    h("h3", null, "Pair: ", pairName(m), ` (${m.paired_by})`),
    h("div", {class: "two-col"}, sideFacts("Baseline", doc.base), sideFacts("Run", doc.run)),
    rooflineArrow(doc.base.roofline || {}, doc.run.roofline || {}, sideRoofs(roofDocs[0]), sideRoofs(roofDocs[1])),
    h("div", {class: "toolbar"}, filter, count),
    h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "pair-metrics"},
      h("thead", null, h("tr", null, ["Metric", "Unit", "Baseline", "Run", "Difference", "Change"].map((t) => h("th", null, t)))),
      h("tbody", null, trs)))));
}

// ncu's group:... metrics and bound reasons run to thousands of characters: cut, whole in the tooltip.
const LONG_TEXT = 120;

function cell(v) {
  if (typeof v === "number") return h("td", {class: "numeric", "data-value": v}, fmt.num(v));
  const text = v ?? "";
  const cut = text.length > LONG_TEXT;
  return h("td", {class: ["str", cut ? "cut" : null], title: cut ? text : null},
    h("div", {class: "text"}, cut ? `${text.slice(0, LONG_TEXT)}…` : text));
}

function sideFacts(title, side) {
  return h("div", {"data-role": `pair-${title.toLowerCase()}`},
    h("h4", null, `${title}: `, kernelName(side.label, side.key)),
    h("p", null, boundChip(side.bound, null, null), " ", h("span", {class: "muted"}, side.bound_reason || "")),
    h("p", {class: "muted small"}, `launch ${side.launch} of ${fmt.int(side.launches)} (the longest), ${fmt.duration(side.total_ns)} in all`));
}

// Both kernels on one log-log roofline (DRAM intensity), an arrow from baseline to run (where both
// can be placed), under each side's DRAM and FP32 roofs (the run's dashed where its GPU differs).
function sideRoofs(doc) {
  const dev = doc && Array.isArray(doc.devices) ? doc.devices[0] : null;
  const value = (key) => { const r = dev && dev.roofs ? dev.roofs[key] : null; return r && r.value > 0 ? r.value : null; };
  if (!dev) return null;
  const compute = value("flop_per_s_fp32") || Math.max(0, ...Object.keys(dev.roofs || {}).filter((k) => k.startsWith("flop_per_s_")).map(value)) || null;
  const dram = value("bytes_per_s_dram");
  return compute && dram ? {compute, dram, gpu: dev.name || ""} : null;
}

function rooflineArrow(b, r, baseRoofs, runRoofs) {
  const ok = (p) => p.ai_dram > 0 && p.flop_per_s > 0;
  if (!ok(b) || !ok(r)) return null;
  // One GPU model: one set of roofs (measured roofs of two reports differ by their clocks, a little).
  const sameRoofs = baseRoofs && runRoofs && (baseRoofs.gpu === runRoofs.gpu ||
    (baseRoofs.compute === runRoofs.compute && baseRoofs.dram === runRoofs.dram));
  const roofs = [baseRoofs ? {...baseRoofs, side: "base"} : null, runRoofs && !sameRoofs ? {...runRoofs, side: "run"} : null].filter(Boolean);
  const W = 480, H = 260, pad = 28;
  const xs = [b.ai_dram, r.ai_dram].concat(roofs.map((f) => f.compute / f.dram)).map(Math.log10);
  const ys = [b.flop_per_s, r.flop_per_s].concat(roofs.map((f) => f.compute)).map(Math.log10);
  const span = (v) => [Math.min(...v) - 0.5, Math.max(...v) + 0.5];
  const [x0, x1] = span(xs), [y0, y1] = span(ys);
  const X = (v) => pad + (Math.log10(v) - x0) / (x1 - x0) * (W - 2 * pad);
  const Y = (v) => H - pad - (Math.log10(v) - y0) / (y1 - y0) * (H - 2 * pad);
  const xLo = 10 ** x0, xHi = 10 ** x1;
  const roofLines = roofs.map((f) => {
    const ridge = f.compute / f.dram;
    const dash = f.side === "run" ? "5 3" : null;
    return s("g", {class: "pair-roofs", "data-side": f.side, "clip-path": "url(#pair-clip)"},
      s("line", {x1: X(xLo), y1: Y(xLo * f.dram), x2: X(ridge), y2: Y(f.compute), stroke: "#4263eb", "stroke-dasharray": dash, "data-roof": "bytes_per_s_dram"}),
      s("line", {x1: X(ridge), y1: Y(f.compute), x2: X(xHi), y2: Y(f.compute), stroke: "#343a40", "stroke-dasharray": dash, "data-roof": "flop_per_s"}),
      s("title", null, `${f.side === "run" ? "run" : "baseline"} roofs (${f.gpu}): DRAM ${fmt.human(f.dram, "byte/s")}, ${fmt.flops(f.compute)}`));
  });
  return h("figure", {"data-role": "pair-roofline"},
    s("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "roofline points, baseline to run"},
      s("defs", null, s("marker", {id: "pair-arrow", markerWidth: 8, markerHeight: 8, refX: 6, refY: 3, orient: "auto"},
        s("path", {d: "M0,0 L6,3 L0,6 z", fill: "currentColor"})),
        s("clipPath", {id: "pair-clip"}, s("rect", {x: pad, y: pad, width: W - 2 * pad, height: H - 2 * pad}))),
      s("rect", {x: pad, y: pad, width: W - 2 * pad, height: H - 2 * pad, fill: "none", stroke: "#dee2e6"}),
      roofLines,
      s("line", {x1: X(b.ai_dram), y1: Y(b.flop_per_s), x2: X(r.ai_dram), y2: Y(r.flop_per_s), stroke: "currentColor", "marker-end": "url(#pair-arrow)"}),
      s("circle", {cx: X(b.ai_dram), cy: Y(b.flop_per_s), r: 4, fill: "#868e96", "data-role": "base-point"}),
      s("circle", {cx: X(r.ai_dram), cy: Y(r.flop_per_s), r: 4, fill: "#1971c2", "data-role": "run-point"}),
      s("text", {x: pad, y: H - 8, "font-size": 10}, "FLOP/byte (DRAM), log"),
      s("text", {x: 4, y: pad - 10, "font-size": 10}, "FLOP/s, log")),
    h("figcaption", {class: "muted small"},
      `baseline ${fmt.num(b.ai_dram)} FLOP/B at ${fmt.flops(b.flop_per_s)} → run ${fmt.num(r.ai_dram)} FLOP/B at ${fmt.flops(r.flop_per_s)}` +
      (roofs.length ? `; roofs: DRAM and ${roofs.length > 1 ? "the top compute roof of each GPU (the run's dashed)" : "the top compute roof"}` : "")));
}

// NVTX phases matched by range name (both runs traced with NVTX ranges).
function phasesSection(phases) {
  const matched = Array.isArray(phases.matched) ? phases.matched : [];
  const only = (side) => (Array.isArray(phases[side]) ? phases[side] : []).length;
  const rows = matched.map((m) => h("tr", {"data-name": m.name},
    h("td", null, kernelName(m.name, m.name)),
    h("td", {class: "numeric", "data-col": "base_instances"}, fmt.int(m.base_instances)),
    h("td", {class: "numeric", "data-col": "run_instances"}, fmt.int(m.run_instances)),
    h("td", {class: "numeric", "data-col": "base_ns", "data-value": m.base_ns ?? null}, fmt.duration(m.base_ns)),
    h("td", {class: "numeric", "data-col": "run_ns", "data-value": m.run_ns ?? null}, fmt.duration(m.run_ns)),
    h("td", {class: ["numeric", speedupClass(m.speedup)], "data-col": "speedup", "data-value": m.speedup ?? null}, fmt.ratio(m.speedup)),
    h("td", {class: "numeric", "data-col": "base_gpu_ns", "data-value": m.base_gpu_ns ?? null}, fmt.duration(m.base_gpu_ns)),
    h("td", {class: "numeric", "data-col": "run_gpu_ns", "data-value": m.run_gpu_ns ?? null}, fmt.duration(m.run_gpu_ns)),
    h("td", {class: ["numeric", speedupClass(m.gpu_speedup)], "data-col": "gpu_speedup", "data-value": m.gpu_speedup ?? null}, fmt.ratio(m.gpu_speedup))));
  return h("section", {"data-role": "phases-compare"},
    h("h3", null, `NVTX phases matched by name (${matched.length}; only in baseline ${only("only_in_base")}, only in run ${only("only_in_run")})`),
    h("div", {class: "scroll"}, h("table", {class: "data", "data-role": "matched-phases"},
      h("thead", null, h("tr", null, ["NVTX range", "Count (base)", "Count (run)", "CPU time (base)", "CPU time (run)", "Speedup",
        "GPU time (base)", "GPU time (run)", "GPU speedup"].map((t) => h("th", null, t)))),
      h("tbody", null, rows))));
}
