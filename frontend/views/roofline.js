// Roofline: inline SVG, log-log (arithmetic intensity FLOP/byte vs FLOP/s).
// Kernel points (circle.point, data-launch-id) where the launches have FLOP/s and an intensity;
// for PyTorch runs, one point per operator input shape (circle.op-point, data-op; op_points of
// /roofline): area by GPU time, colour by category; a click opens the operator.
// The <svg> carries its scale so tests (and people) can check placement:
// data-x-min/x-max/y-min/y-max are the log10 domain, data-plot-left/right/top/bottom
// the plot box in SVG user units; a circle sits at
//   cx = left + (log10(ai) - xMin) / (xMax - xMin) * (right - left)
//   cy = bottom - (log10(flops) - yMin) / (yMax - yMin) * (bottom - top)

import {getJSON} from "../api.js";
import {h, s, replace} from "../dom.js";
import * as fmt from "../format.js";
import {runView, ownDocument, runTerms} from "./common.js";

/** What to collect for a roofline, in the run's own vendor's tools. */
function rooflineHint(terms) {
  if (terms.amd) return "profile its kernels with rocprof-compute (`rocprof-compute profile -n NAME -- APP`) on an Instinct GPU.";
  if (terms.vendor === "Intel") return "this run is VTune's CPU profile; a roofline needs a GPU kernel profile.";
  return "profile its kernels with Nsight Compute's roofline sections (--section SpeedOfLight_RooflineChart, or --set full).";
}

// The plot takes the page's width (880 user units at least); the left margin leaves the y-axis
// title clear of the widest tick label ("100 TFLOP/s").
const H = 540;
const plotWidth = () => Math.max(880, Math.min(1800, Math.floor((window.innerWidth || 880) - 64)));
const plotBox = (W) => ({left: 108, right: W - 24, top: 20, bottom: H - 56});
const LEVELS = ["dram", "l2", "l1"];
const LEVEL_LABEL = {dram: "DRAM", l2: "L2", l1: "L1"};
const PREC_LABEL = {fp64: "FP64", fp32: "FP32", fp16: "FP16", tensor: "Tensor", tensor_bf16: "Tensor BF16",
  tensor_fp16: "Tensor FP16", tensor_tf32: "Tensor TF32", tensor_fp8: "Tensor FP8", tensor_fp64: "Tensor FP64"};
const PREC_DASH = {fp64: "7 4", fp32: null, fp16: "2 3", tensor: "9 3 2 3", tensor_bf16: "9 3 2 3",
  tensor_fp16: "9 3", tensor_tf32: "4 2 1 2", tensor_fp8: "12 3", tensor_fp64: "3 3 9 3"};
const LEVEL_DASH = {dram: null, l2: "6 3", l1: "2 3"};
const R_MIN = 3, R_MAX = 16;
const CATEGORY_COLOURS = {GEMM: "#d9480f", SDPA: "#ae3ec9", CONV: "#1c7ed6", elementwise: "#0ca678",
  reduction: "#f59f00", normalisation: "#15aabf", communication: "#e64980", other: "#868e96"};
const categoryColour = (c) => CATEGORY_COLOURS[c] || CATEGORY_COLOURS.other;

const log10 = Math.log10;

// Its points open the kernel-detail drawer.
export const opensLaunches = true;

export const render = runView({draw, fetch: withOverlay, select: (view, launch) => highlight(view.slot, launch)});

/** The run's /roofline, and the overlay run's (state `overlay`) when one is picked: its points are
 * drawn hollow on the same axes (its roofs are not: the roofs are the picked run's). */
async function withOverlay(ctx) {
  const doc = await ownDocument(ctx);
  const other = ctx.state.overlay;
  if (!other || other === ctx.state.run || !ctx.runs.some((r) => r.run === other)) return doc;
  try {
    return {...doc, overlay: {run: other, doc: await getJSON(ctx.view.route, {run: other})}};
  } catch (e) {
    return {...doc, overlay: {run: other, error: e.message}};
  }
}

function highlight(root, launch) {
  for (const c of root.querySelectorAll("circle[data-launch-id]")) {
    c.classList.toggle("selected", launch !== null && c.dataset.launchId === String(launch));
  }
}

function roofsOf(devices) {
  const compute = [], memory = [];
  for (const dev of devices) {
    for (const [key, roof] of Object.entries(dev.roofs || {})) {
      const value = roof && typeof roof === "object" ? roof.value : roof;
      if (!(value > 0)) continue;
      const entry = {key, value, source: roof.source || "", how: roof.how || "", device: dev};
      if (key.startsWith("flop_per_s_")) compute.push({...entry, prec: key.slice("flop_per_s_".length)});
      else if (key.startsWith("bytes_per_s_")) memory.push({...entry, level: key.slice("bytes_per_s_".length)});
    }
  }
  return {compute, memory};
}

function domain(values, padDecades) {
  const logs = values.filter((v) => v > 0 && Number.isFinite(v)).map(log10);
  if (!logs.length) return null;
  let lo = Math.floor(Math.min(...logs) - padDecades);
  let hi = Math.ceil(Math.max(...logs) + padDecades);
  while (hi - lo < 2) { lo -= 1; hi += 1; }
  return [lo, hi];
}

function draw(doc, ctx) {
  const devices = Array.isArray(doc.devices) ? doc.devices : [];
  const points = Array.isArray(doc.points) ? doc.points : [];
  const levels = LEVELS.filter((l) => points.some((p) => p[`ai_${l}`] > 0));
  const level = levels.includes(ctx.state.level) ? ctx.state.level : levels[0] || "dram";
  const {compute, memory} = roofsOf(devices);

  const drawable = points.filter((p) => p[`ai_${level}`] > 0 && p.flop_per_s > 0);
  const overlay = doc.overlay || null;
  const overlayPoints = (overlay && overlay.doc && Array.isArray(overlay.doc.points) ? overlay.doc.points : [])
    .filter((p) => p[`ai_${level}`] > 0 && p.flop_per_s > 0);
  const skipped = points.length - drawable.length;
  const opPoints = (Array.isArray(doc.op_points) ? doc.op_points : []).filter((p) => p.intensity > 0 && p.flop_per_s > 0);

  const picker = [levels.length > 1 ? h("label", null, "Intensity against ",
    h("select", {"data-role": "level", onchange: (e) => ctx.navigate({level: e.target.value})},
      levels.map((l) => h("option", {value: l, selected: l === level}, LEVEL_LABEL[l] || l)))) : null,
  overlayPicker(ctx, overlay)];

  if (!drawable.length && !opPoints.length && !compute.length) {
    return h("p", {class: "muted", "data-role": "roofline-empty"},
      "No launch of this run has both FLOP/s and an arithmetic intensity, and the report holds no peaks: " + rooflineHint(runTerms(ctx)));
  }

  // Log domain from the points, ridge points and roofs.
  const ridgeXs = [];
  for (const dev of devices) for (const byLevel of Object.values(dev.ridge_points || {})) for (const x of Object.values(byLevel || {})) ridgeXs.push(x);
  const xs = drawable.concat(overlayPoints).map((p) => p[`ai_${level}`]).concat(opPoints.map((p) => p.intensity), ridgeXs);
  const xd = domain(xs.length ? xs : [0.1, 100], 0.3);
  const ys = drawable.concat(overlayPoints).map((p) => p.flop_per_s).concat(opPoints.map((p) => p.flop_per_s), compute.map((c) => c.value));
  const yd = domain(ys, 0.3);
  const [xMin, xMax] = xd, [yMin, yMax] = yd;
  const W = plotWidth(), BOX = plotBox(W);
  const X = (v) => BOX.left + (log10(v) - xMin) / (xMax - xMin) * (BOX.right - BOX.left);
  const Y = (v) => BOX.bottom - (log10(v) - yMin) / (yMax - yMin) * (BOX.bottom - BOX.top);

  const svg = s("svg", {
    class: "roofline", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `roofline of ${ctx.state.run}`, "data-role": "roofline",
    "data-x-min": xMin, "data-x-max": xMax, "data-y-min": yMin, "data-y-max": yMax,
    "data-plot-left": BOX.left, "data-plot-right": BOX.right, "data-plot-top": BOX.top, "data-plot-bottom": BOX.bottom,
    "data-level": level,
  });
  const clipId = "hwprof-roofline-clip";
  svg.appendChild(s("defs", null, s("clipPath", {id: clipId},
    s("rect", {x: BOX.left, y: BOX.top, width: BOX.right - BOX.left, height: BOX.bottom - BOX.top}))));

  // Grid and axes.
  const grid = s("g", {class: "grid"});
  for (let k = xMin; k <= xMax; k++) {
    const x = X(10 ** k);
    grid.append(s("line", {x1: x, x2: x, y1: BOX.top, y2: BOX.bottom}),
      s("text", {x, y: BOX.bottom + 18, "text-anchor": "middle", class: "tick"}, fmt.num(10 ** k)));
  }
  for (let k = yMin; k <= yMax; k++) {
    const y = Y(10 ** k);
    grid.append(s("line", {x1: BOX.left, x2: BOX.right, y1: y, y2: y}),
      s("text", {x: BOX.left - 6, y: y + 4, "text-anchor": "end", class: "tick"}, fmt.flops(10 ** k)));
  }
  svg.append(grid,
    s("rect", {class: "frame", x: BOX.left, y: BOX.top, width: BOX.right - BOX.left, height: BOX.bottom - BOX.top}),
    s("text", {class: "axis-label", x: (BOX.left + BOX.right) / 2, y: H - 10, "text-anchor": "middle"},
      opPoints.length && !drawable.length ? "Arithmetic intensity (FLOP/byte: an operator's FLOPs over the bytes of its inputs and outputs)"
        : `Arithmetic intensity (FLOP/byte, ${LEVEL_LABEL[level] || level})`),
    s("text", {class: "axis-label", "data-role": "y-title", x: 16, y: (BOX.top + BOX.bottom) / 2, "text-anchor": "middle",
      transform: `rotate(-90 16 ${(BOX.top + BOX.bottom) / 2})`}, "Performance (FLOP/s)"));

  // Roofs: memory roofs rise until the top compute roof, compute roofs start at the top memory roof.
  const roofs = s("g", {class: "roofs", "clip-path": `url(#${clipId})`});
  const labels = s("g", {class: "roof-labels"});
  const devPrefix = (d) => (devices.length > 1 ? `GPU ${d.id} ` : "");
  const xLo = 10 ** xMin, xHi = 10 ** xMax;
  for (const m of memory) {
    const cMax = Math.max(...compute.filter((c) => c.device === m.device).map((c) => c.value), 0) || m.value * xHi;
    const xEnd = Math.min(xHi, cMax / m.value);
    roofs.appendChild(s("line", {class: `roof memory-roof level-${m.level}`, "data-roof": m.key, "data-source": m.source,
      x1: X(xLo), y1: Y(xLo * m.value), x2: X(xEnd), y2: Y(xEnd * m.value),
      "stroke-dasharray": LEVEL_DASH[m.level] || null}));
    // Along the slope (on log-log axes a bandwidth roof rises one decade per decade: the label turns
    // to match), near the left end of the part of the roof inside the plot; the other places along
    // it are for placeLabels, should this one cover another label or a point.
    const angle = Math.atan2(Y(10) - Y(1), X(10) - X(1)) * 180 / Math.PI;
    const places = memoryLabelPlaces(m, xd, yd, xEnd, X, Y, angle);
    if (places.length) {
      const label = s("text", {class: "roof-label", "data-roof": m.key},
        `${devPrefix(m.device)}${LEVEL_LABEL[m.level] || m.level} ${fmt.human(m.value, "byte/s")}${sourceTag(m)}`);
      label.candidates = places;
      putLabel(label, places[0]);
      labels.appendChild(label);
    }
  }
  for (const c of compute) {
    const mMax = Math.max(...memory.filter((m) => m.device === c.device).map((m) => m.value), 0);
    const xStart = mMax ? Math.max(xLo, c.value / mMax) : xLo;
    roofs.appendChild(s("line", {class: `roof compute-roof prec-${c.prec}`, "data-roof": c.key, "data-source": c.source,
      x1: X(xStart), y1: Y(c.value), x2: X(xHi), y2: Y(c.value), "stroke-dasharray": PREC_DASH[c.prec] || null}));
    const label = s("text", {class: "roof-label", "data-roof": c.key, x: BOX.right - 4, y: Y(c.value) - 5, "text-anchor": "end"},
      `${devPrefix(c.device)}${PREC_LABEL[c.prec] || c.prec} ${fmt.flops(c.value)}${sourceTag(c)}`);
    label.candidates = computeLabelPlaces(X(xStart), BOX.right - 4, Y(c.value));
    labels.appendChild(label);
  }
  // Ridge points: where a memory roof meets a compute roof.
  for (const dev of devices) {
    for (const [prec, byLevel] of Object.entries(dev.ridge_points || {})) {
      const c = compute.find((r) => r.device === dev && r.prec === prec);
      if (!c) continue;
      for (const [lvl, x] of Object.entries(byLevel || {})) {
        if (!(x > 0)) continue;
        const px = X(x), py = Y(c.value);
        roofs.appendChild(s("line", {class: "ridge-guide", x1: px, x2: px, y1: py, y2: BOX.bottom}));
        roofs.appendChild(s("path", {class: "ridge", "data-ridge": `${prec}/${lvl}`, "data-value": x,
          d: `M ${px} ${py - 5} L ${px + 5} ${py} L ${px} ${py + 5} L ${px - 5} ${py} Z`},
          s("title", null, `ridge ${PREC_LABEL[prec] || prec} / ${LEVEL_LABEL[lvl] || lvl}: ${fmt.num(x)} FLOP/byte`)));
      }
    }
  }
  svg.append(roofs);

  // Points: colour by bound label, area by duration (radius ∝ sqrt(time)).
  const maxDur = Math.max(...drawable.map((p) => p.duration_ns || 0), 0);
  const radius = (d) => (maxDur > 0 && d > 0 ? R_MIN + (R_MAX - R_MIN) * Math.sqrt(d / maxDur) : R_MIN);
  const tooltip = h("div", {class: "tooltip", "data-role": "tooltip", hidden: true});
  const wrap = h("div", {class: "roofline-wrap"});
  const pointsG = s("g", {class: "points"});
  const ordered = drawable.slice().sort((a, b) => (b.duration_ns || 0) - (a.duration_ns || 0));
  for (const p of ordered) {
    const ai = p[`ai_${level}`];
    const circle = s("circle", {
      cx: X(ai), cy: Y(p.flop_per_s), r: radius(p.duration_ns),
      fill: fmt.boundColour(p.bound), class: ["point", String(p.launch_id) === String(ctx.state.launch) ? "selected" : ""],
      "data-launch-id": p.launch_id, "data-ai": ai, "data-flops": p.flop_per_s,
      "data-duration": p.duration_ns ?? null, "data-bound": p.bound || null, tabindex: 0,
      onmouseenter: (e) => showTip(tooltip, wrap, e, p, ai),
      onmousemove: (e) => placeTip(tooltip, wrap, e),
      onmouseleave: () => { tooltip.hidden = true; },
      onfocus: (e) => showTip(tooltip, wrap, e, p, ai),
      onblur: () => { tooltip.hidden = true; },
      onclick: () => ctx.openLaunch(p.launch_id),
      onkeydown: (e) => { if (e.key === "Enter") ctx.openLaunch(p.launch_id); },
    });
    pointsG.appendChild(circle);
  }
  svg.appendChild(pointsG);
  if (opPoints.length) svg.appendChild(opPointsGroup(opPoints, X, Y, {tooltip, wrap, ctx}));
  if (overlayPoints.length) svg.appendChild(overlayGroup(overlayPoints, level, X, Y, {tooltip, wrap}));
  svg.appendChild(labels);  // above the points (and clear of them where a place along the roof allows)
  wrap.append(svg, tooltip);
  placeLabelsWhenShown(svg);

  const notes = [];
  if (overlay && overlay.error) notes.push(`The overlay run ${overlay.run} could not be drawn: ${overlay.error}`);
  else if (overlay) notes.push(`Hollow circles: ${overlayPoints.length} kernel point(s) of ${overlay.run} (its roofs are not drawn).`);
  if (skipped) notes.push(`${skipped} launch(es) without a positive ${LEVEL_LABEL[level] || level} intensity or FLOP/s are not drawn (log axes).`);
  const unplacedShapes = (doc.op_shapes ?? 0) - opPoints.length;
  if (opPoints.length && unplacedShapes > 0) notes.push(`${unplacedShapes} operator shape(s) without a FLOP count or intensity are not drawn.`);
  if (!drawable.length && !opPoints.length) notes.push("No launch has both FLOP/s and an arithmetic intensity; only the roofs are drawn.");
  const above = (doc.above_roofs && Array.isArray(doc.above_roofs.points)) ? doc.above_roofs.points : [];
  if (above.length) notes.push(`${above.length} point(s) lie above the device's highest roof (${fmt.flops(doc.above_roofs.highest_roof_flop_per_s)}): `
    + "an error in the data (a FLOP count or a time that is wrong), not drawn: "
    + above.slice(0, 5).map((p) => `${p.kind} ${p.name} at ${fmt.flops(p.flop_per_s)}`).join("; ") + (above.length > 5 ? "; …" : ""));
  if (!compute.length && !memory.length) notes.push("No roofs: the run holds no peak FLOP/s or bandwidth for its GPU (a trace that names no GPU tb-hwprof has a datasheet for); the points are drawn alone.");
  const counts = [drawable.length || !opPoints.length ? `${drawable.length} kernel point(s)` : null,
    opPoints.length ? `${opPoints.length} operator shape point(s)` : null].filter(Boolean).join(", ");
  return [h("div", {class: "toolbar"}, picker, h("span", {class: "muted", "data-role": "point-counts"},
    `${counts}; circle area ∝ GPU time; click a point for details.`)),
    wrap, notes.map((n) => h("p", {class: "muted note"}, n)), legend(compute, memory, drawable, devices.length > 1, opPoints)];
}

// -- roof labels: each on its roof, clear of the others and of the points where it can be --------
// A label carries `candidates`: places along its roof ({x, y, transform, anchor}), the first where it
// was drawn.  Once the plot is on the page (text needs layout to be measured) each label takes its
// first place inside the plot that overlaps no label placed before it and no point, else the first
// that overlaps no label; a label with no such place is hidden (the legend still lists its roof).
function computeLabelPlaces(xStart, xEnd, y) {
  const places = [];
  for (let right = xEnd; right > xStart + 40; right -= 36) {
    places.push({x: right, y: y - 5, anchor: "end"}, {x: right, y: y + 14, anchor: "end"});
  }
  return places;
}

function memoryLabelPlaces(m, [xMin, xMax], [yMin, yMax], xEnd, X, Y, angle) {
  const places = [];
  for (let f = 0.03; f < 0.9; f += 0.04) {
    const lx = 10 ** (xMin + f * (xMax - xMin)), ly = lx * m.value;
    if (!(ly > 10 ** yMin && ly < 10 ** yMax && lx < xEnd)) continue;
    for (const dy of [-5, 13]) {
      places.push({x: X(lx), y: Y(ly) + dy, transform: `rotate(${angle} ${X(lx)} ${Y(ly)})`});
    }
  }
  return places;
}

function placeLabelsWhenShown(svg, tries = 0) {
  if (svg.isConnected && svg.getBoundingClientRect().width > 0) {
    placeLabels(svg);
  } else if (tries < 600) {
    requestAnimationFrame(() => placeLabelsWhenShown(svg, tries + 1));
  }
}

function putLabel(label, place) {
  label.setAttribute("x", place.x);
  label.setAttribute("y", place.y);
  if (place.transform) label.setAttribute("transform", place.transform); else label.removeAttribute("transform");
  if (place.anchor) label.setAttribute("text-anchor", place.anchor); else label.removeAttribute("text-anchor");
}

const GAP = 2;  // px kept between two labels
const overlaps = (a, b) => a.left < b.right + GAP && b.left < a.right + GAP && a.top < b.bottom + GAP && b.top < a.bottom + GAP;

function placeLabels(svg) {
  const frame = svg.querySelector("rect.frame").getBoundingClientRect();
  const points = [...svg.querySelectorAll("circle.point")].map((c) => c.getBoundingClientRect());
  const placed = [];
  for (const label of svg.querySelectorAll("g.roof-labels text.roof-label")) {
    let clear = null, free = null;
    for (const place of label.candidates || []) {
      putLabel(label, place);
      const r = label.getBoundingClientRect();
      const inside = r.left >= frame.left && r.right <= frame.right && r.top >= frame.top && r.bottom <= frame.bottom;
      if (!inside || placed.some((q) => overlaps(r, q))) continue;
      if (!free) free = place;
      if (!points.some((q) => overlaps(r, q))) { clear = place; break; }
    }
    const place = clear || free;
    label.hidden = !place;
    label.style.display = place ? "" : "none";
    if (place) {
      putLabel(label, place);
      placed.push(label.getBoundingClientRect());
    }
  }
  svg.dataset.labelsPlaced = "1";
}

// -- the overlay of a second run --------------------------------------------------------------
function overlayPicker(ctx, overlay) {
  const others = ctx.runs.filter((r) => !r.error && r.run !== ctx.state.run && Array.isArray(r.views) && r.views.includes("roofline"));
  if (!others.length) return null;
  const picked = overlay ? overlay.run : "";
  return h("label", null, " Overlay ", h("select", {"data-role": "overlay-picker", onchange: (e) => ctx.navigate({overlay: e.target.value || null})},
    h("option", {value: "", selected: !picked}, "none"),
    others.map((r) => h("option", {value: r.run, selected: r.run === picked}, r.run))));
}

/** The overlay run's kernels as hollow circles (ringed in their bound colour); not clickable: the
 * drawer shows the picked run's launches. */
function overlayGroup(points, level, X, Y, {tooltip, wrap}) {
  const g = s("g", {class: "overlay-points"});
  for (const p of points) {
    const ai = p[`ai_${level}`];
    g.appendChild(s("circle", {cx: X(ai), cy: Y(p.flop_per_s), r: 5, class: "overlay-point", fill: "none",
      stroke: fmt.boundColour(p.bound), "stroke-width": 2, "data-overlay-launch": p.launch_id, "data-ai": ai,
      "data-flops": p.flop_per_s, tabindex: 0,
      onmouseenter: (e) => showTip(tooltip, wrap, e, p, ai),
      onmousemove: (e) => placeTip(tooltip, wrap, e),
      onmouseleave: () => { tooltip.hidden = true; }}));
  }
  return g;
}

function sourceTag(roof) {
  return roof.source === "datasheet" ? " (datasheet)" : "";
}

/** One circle per operator shape: area by GPU time, colour by category; a click opens the operator. */
function opPointsGroup(opPoints, X, Y, {tooltip, wrap, ctx}) {
  const maxNs = Math.max(...opPoints.map((p) => p.gpu_ns || 0), 0);
  const radius = (ns) => (maxNs > 0 && ns > 0 ? R_MIN + (R_MAX - R_MIN) * Math.sqrt(ns / maxNs) : R_MIN);
  const g = s("g", {class: "op-points"});
  const open = (p) => ctx.navigate({view: "operators", op: p.op, sort: null, q: null, page: null});
  for (const p of opPoints.slice().sort((a, b) => (b.gpu_ns || 0) - (a.gpu_ns || 0))) {
    g.appendChild(s("circle", {
      cx: X(p.intensity), cy: Y(p.flop_per_s), r: radius(p.gpu_ns), fill: categoryColour(p.category),
      class: "point op-point", "data-op": p.op, "data-category": p.category || null, "data-ai": p.intensity,
      "data-flops": p.flop_per_s, "data-duration": p.gpu_ns ?? null, "data-bound": p.bound || null, tabindex: 0,
      onmouseenter: (e) => showLines(tooltip, wrap, e, opTipLines(p)),
      onmousemove: (e) => placeTip(tooltip, wrap, e),
      onmouseleave: () => { tooltip.hidden = true; },
      onfocus: (e) => showLines(tooltip, wrap, e, opTipLines(p)),
      onblur: () => { tooltip.hidden = true; },
      onclick: () => open(p),
      onkeydown: (e) => { if (e.key === "Enter") open(p); },
    }));
  }
  return g;
}

function opTipLines(p) {
  return [
    ["", p.op || "(unnamed)"],
    ["inputs", `${p.input_dims || fmt.MISSING} ${p.input_types || ""}`],
    ["category", p.category || fmt.MISSING],
    ["calls", fmt.int(p.calls)],
    ["GPU time", fmt.duration(p.gpu_ns)],
    ["intensity", `${fmt.num(p.intensity)} FLOP/byte`],
    ["performance", fmt.flops(p.flop_per_s)],
    ["bound", p.bound ? `${p.bound}${p.bound_reason ? `: ${p.bound_reason}` : ""}` : fmt.MISSING],
  ];
}

function tipLines(p, ai) {
  return [
    ["", p.name || "(unnamed)"],
    ["intensity", `${fmt.num(ai)} FLOP/byte`],
    ["performance", fmt.flops(p.flop_per_s)],
    ["duration", fmt.duration(p.duration_ns)],
    ["bound", p.bound ? `${p.bound}${p.binding_roof ? ` (roof: ${p.binding_roof})` : ""}` : fmt.MISSING],
  ];
}

function showTip(tooltip, wrap, e, p, ai) {
  showLines(tooltip, wrap, e, tipLines(p, ai));
}

function showLines(tooltip, wrap, e, lines) {
  replace(tooltip, lines.map(([k, v]) =>
    h("div", {class: k ? "tip-row" : "tip-name mono"}, k ? h("span", {class: "muted"}, `${k}: `) : null, v)));
  tooltip.hidden = false;
  placeTip(tooltip, wrap, e);
}

function placeTip(tooltip, wrap, e) {
  const box = wrap.getBoundingClientRect();
  let x = e.clientX, y = e.clientY;
  if (!x && !y && e.target.getBoundingClientRect) {  // keyboard focus: next to the circle
    const r = e.target.getBoundingClientRect();
    x = r.right; y = r.top;
  }
  tooltip.style.left = `${Math.min(x - box.left + 12, box.width - 260)}px`;
  tooltip.style.top = `${y - box.top + 12}px`;
}

function legend(compute, memory, points, multiDevice, opPoints) {
  const swatch = (dash) => s("svg", {width: 28, height: 10, class: "swatch"},
    s("line", {x1: 0, x2: 28, y1: 5, y2: 5, "stroke-dasharray": dash || null}));
  const roofItem = (r, label, value, dash) => h("li", {"data-roof": r.key, "data-source": r.source},
    swatch(dash), ` ${multiDevice ? `GPU ${r.device.id} ` : ""}${label} ${value} `,
    h("span", {class: `source source-${r.source || "unknown"}`, title: r.how || null}, r.source || "source unknown"));
  const bounds = [...new Set(points.map((p) => p.bound || "unknown"))];
  return h("div", {class: "legend-grid"},
    h("div", null, h("h4", null, "Roofs"), h("ul", {class: "legend-list", "data-role": "roof-legend"},
      compute.map((c) => roofItem(c, `${PREC_LABEL[c.prec] || c.prec} peak`, fmt.flops(c.value), PREC_DASH[c.prec])),
      memory.map((m) => roofItem(m, `${LEVEL_LABEL[m.level] || m.level} bandwidth`, fmt.human(m.value, "byte/s"), LEVEL_DASH[m.level]))),
      h("p", {class: "muted small"}, "measured: from the tool's own peak metrics and clocks; datasheet: vendor figures. Hover a tag for the formula.")),
    points.length || !opPoints.length ? h("div", null, h("h4", null, "Bound label"), h("ul", {class: "legend-list"},
      bounds.map((b) => h("li", null, h("span", {class: "dot", style: {"--bound": fmt.boundColour(b)}}), ` ${b}`)))) : null,
    opPoints.length ? h("div", null, h("h4", null, "Operator category"), h("ul", {class: "legend-list", "data-role": "category-legend"},
      [...new Set(opPoints.map((p) => p.category || "other"))].map((c) =>
        h("li", {"data-category": c}, h("span", {class: "dot", style: {"--bound": categoryColour(c)}}), ` ${c}`)))) : null);
}
