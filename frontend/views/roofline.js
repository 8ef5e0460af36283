// Roofline: inline SVG, log-log (arithmetic intensity FLOP/byte vs FLOP/s).
// Points: one mark per kernel launch with FLOP/s and an intensity (a <circle>, data-launch-id) and,
// for PyTorch runs, one per operator input shape (op_points of /roofline: a <path> whose shape says
// the operator's category, data-op, data-shape).  Every mark has data-role=point, class "point" and
// its centre and radius as data-cx/data-cy/data-r; its colour is its bound label and nothing else,
// its area its GPU time.  A click on the plot opens the point under the cursor (hit-tested, so a
// point covered by a later-drawn one can be picked), or lists them when several lie there.
// Roofs whose lines coincide (FP16 = FP32 on many GPUs) are one line with one label naming them all
// (data-roofs lists their keys); a label's x/y lie on its own line (dy lifts the text just above it).
// The <svg> carries its scale so tests (and people) can check placement:
// data-x-min/x-max/y-min/y-max are the log10 domain, data-plot-left/right/top/bottom
// the plot box in SVG user units; a point sits at
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
// Colour is the bound label's (fmt.boundColour) for every point; an operator's category is its shape.
// Kernels are circles, so no category is.
const CATEGORY_SHAPES = {GEMM: "square", SDPA: "diamond", CONV: "triangle", elementwise: "triangle-down",
  reduction: "pentagon", normalisation: "hexagon", communication: "star", other: "plus"};
const categoryShape = (c) => CATEGORY_SHAPES[c] || CATEGORY_SHAPES.other;
const COINCIDE_PX = 2;  // roofs drawn closer than this are one line (one label naming each)
const HIT_SLACK = 4;    // a click this far outside a point's mark still picks it
const LABEL_LIFT = -5;  // a roof label's baseline, above its line
// The order names are joined in when roofs coincide ("FP32 = FP16").
const NAME_ORDER = ["fp32", "fp64", "fp16", "tensor", "tensor_tf32", "tensor_fp16", "tensor_bf16", "tensor_fp8",
  "tensor_fp64", ...LEVELS];

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
  for (const c of root.querySelectorAll("[data-role=point][data-launch-id]")) {
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
  // Roofs that coincide on the plot are drawn once (a group), labelled with each one's name.
  const roofs = s("g", {class: "roofs", "clip-path": `url(#${clipId})`});
  const labels = s("g", {class: "roof-labels"});
  const devPrefix = (d) => (devices.length > 1 ? `GPU ${d.id} ` : "");
  const xLo = 10 ** xMin, xHi = 10 ** xMax;
  const computeGroups = coinciding(compute, Y), memoryGroups = coinciding(memory, Y);
  // On log-log axes a bandwidth roof rises one decade per decade: its label turns to match.
  const angle = Math.atan2(Y(10) - Y(1), X(10) - X(1)) * 180 / Math.PI;
  for (const m of memoryGroups) {
    const cMax = Math.max(...compute.filter((c) => c.device === m.device).map((c) => c.value), 0) || m.value * xHi;
    const xEnd = Math.min(xHi, cMax / m.value);
    roofs.appendChild(s("line", {class: `roof memory-roof level-${m.level}`, ...groupData(m),
      x1: X(xLo), y1: Y(xLo * m.value), x2: X(xEnd), y2: Y(xEnd * m.value),
      "stroke-dasharray": LEVEL_DASH[m.level] || null}));
    const places = memoryLabelPlaces(m, xd, yd, xEnd, X, Y, angle);
    if (places.length) {
      const label = s("text", {class: "roof-label", ...groupData(m), dy: LABEL_LIFT},
        groupLabel(m, devPrefix(m.device), (r) => LEVEL_LABEL[r.level] || r.level, (v) => fmt.human(v, "byte/s")));
      label.candidates = places;
      putLabel(label, places[0]);
      labels.appendChild(label);
    }
  }
  for (const c of computeGroups) {
    const mMax = Math.max(...memory.filter((m) => m.device === c.device).map((m) => m.value), 0);
    const xStart = mMax ? Math.max(xLo, c.value / mMax) : xLo;
    roofs.appendChild(s("line", {class: `roof compute-roof prec-${c.prec}`, ...groupData(c),
      x1: X(xStart), y1: Y(c.value), x2: X(xHi), y2: Y(c.value), "stroke-dasharray": PREC_DASH[c.prec] || null}));
    const label = s("text", {class: "roof-label", ...groupData(c), dy: LABEL_LIFT},
      groupLabel(c, devPrefix(c.device), (r) => PREC_LABEL[r.prec] || r.prec, fmt.flops));
    label.candidates = computeLabelPlaces(X(xStart), BOX.right - 4, Y(c.value));
    putLabel(label, label.candidates[0] || {x: BOX.right - 4, y: Y(c.value), anchor: "end"});
    labels.appendChild(label);
  }
  roofs.append(...ridgeMarks(devices, computeGroups, X, Y, BOX));
  svg.append(roofs);

  // Points: colour by bound label, shape by operator category (kernels: circles), area by GPU time.
  const tooltip = h("div", {class: "tooltip", "data-role": "tooltip", hidden: true});
  const pointList = h("div", {class: "point-list", "data-role": "point-list", hidden: true, role: "dialog",
    "aria-label": "points under the cursor"});
  const wrap = h("div", {class: "roofline-wrap"});
  const marks = [];  // every clickable point in drawing order: what a click is hit-tested against
  const tips = {tooltip, wrap};
  svg.appendChild(kernelPointsGroup(drawable, level, X, Y, {...tips, ctx, marks}));
  if (opPoints.length) svg.appendChild(opPointsGroup(opPoints, X, Y, {...tips, ctx, marks}));
  if (overlayPoints.length) svg.appendChild(overlayGroup(overlayPoints, level, X, Y, tips));
  svg.appendChild(labels);  // above the points (and clear of them where a place along the roof allows)
  svg.addEventListener("click", (e) => clickPlot(e, svg, marks, {pointList, tooltip, wrap}));
  wrap.append(svg, tooltip, pointList);
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
    `${counts}; marker area ∝ GPU time; click a point for details (a list where points overlap).`)),
    wrap, notes.map((n) => h("p", {class: "muted note"}, n)), legend(computeGroups, memoryGroups, drawable, devices.length > 1, opPoints)];
}

// -- roofs that coincide ---------------------------------------------------------------------
/** Roofs of one device whose lines lie within COINCIDE_PX of each other (FP16 = FP32 on many GPUs),
 * as groups: the group is its first member by NAME_ORDER, at the highest value, with `members`. */
function coinciding(roofs, Y) {
  const groups = [];
  for (const roof of roofs.slice().sort((a, b) => b.value - a.value)) {
    const same = groups.find((g) => g.device === roof.device && Math.abs(Y(g.value) - Y(roof.value)) < COINCIDE_PX);
    if (same) same.members.push(roof); else groups.push({value: roof.value, device: roof.device, members: [roof]});
  }
  const rank = (r) => { const i = NAME_ORDER.indexOf(r.prec || r.level); return i < 0 ? NAME_ORDER.length : i; };
  return groups.map((g) => {
    const members = g.members.slice().sort((a, b) => rank(a) - rank(b));
    return {...members[0], value: g.value, members};
  });
}

/** data-roof: the group's first key (what tests and the legend name it by); data-roofs: every key. */
function groupData(g) {
  return {"data-roof": g.key, "data-roofs": g.members.map((m) => m.key).join(" "), "data-source": g.source};
}

/** "FP32 = FP16 31.2 TFLOP/s" when the values read the same, else "FP32 20.9 TFLOP/s ≈ FP64 20.3 TFLOP/s". */
function groupLabel(g, prefix, nameOf, valueText) {
  const sameValue = g.members.every((m) => valueText(m.value) === valueText(g.value));
  const sameSource = g.members.every((m) => m.source === g.source);
  const tag = (m) => (sameSource ? "" : sourceTag(m));
  const text = sameValue
    ? `${g.members.map((m) => nameOf(m) + tag(m)).join(" = ")} ${valueText(g.value)}`
    : g.members.map((m) => `${nameOf(m)} ${valueText(m.value)}${tag(m)}`).join(" ≈ ");
  return `${prefix}${text}${sameSource ? sourceTag(g) : ""}`;
}

/** Where a memory roof meets a compute roof, on the compute roof's drawn line. */
function ridgeMarks(devices, computeGroups, X, Y, BOX) {
  const marks = [];
  for (const dev of devices) {
    for (const [prec, byLevel] of Object.entries(dev.ridge_points || {})) {
      const group = computeGroups.find((g) => g.device === dev && g.members.some((m) => m.prec === prec));
      if (!group) continue;
      for (const [lvl, x] of Object.entries(byLevel || {})) {
        if (!(x > 0)) continue;
        const px = X(x), py = Y(group.value);
        marks.push(s("line", {class: "ridge-guide", x1: px, x2: px, y1: py, y2: BOX.bottom}),
          s("path", {class: "ridge", "data-ridge": `${prec}/${lvl}`, "data-value": x,
            d: `M ${px} ${py - 5} L ${px + 5} ${py} L ${px} ${py + 5} L ${px - 5} ${py} Z`},
          s("title", null, `ridge ${PREC_LABEL[prec] || prec} / ${LEVEL_LABEL[lvl] || lvl}: ${fmt.num(x)} FLOP/byte`)));
      }
    }
  }
  return marks;
}

// -- roof labels: each on its roof, clear of the others and of the points where it can be --------
// A label carries `candidates`: places along its roof ({x, y, transform, anchor}), the first where it
// was drawn.  A place's (x, y) lies on the roof's line and the label's dy lifts the text just above
// it: a label is never drawn below its roof, where it would read as the label of the roof beneath.
// Once the plot is on the page (text needs layout to be measured) each label takes, among its places
// inside the plot that overlap no label placed before it, the first that covers the fewest points,
// ridge marks and other flat roofs (and stays over its own line); a label with no such place is
// hidden (the legend still lists its roof).
function computeLabelPlaces(xStart, xEnd, y) {
  const places = [];
  for (let right = xEnd; right > xStart + 40; right -= 18) places.push({x: right, y, anchor: "end", from: xStart});
  return places;
}

function memoryLabelPlaces(m, [xMin, xMax], [yMin, yMax], xEnd, X, Y, angle) {
  const places = [];
  for (let f = 0.03; f < 0.9; f += 0.02) {
    const lx = 10 ** (xMin + f * (xMax - xMin)), ly = lx * m.value;
    if (!(ly > 10 ** yMin && ly < 10 ** yMax && lx < xEnd)) continue;
    places.push({x: X(lx), y: Y(ly), transform: `rotate(${angle} ${X(lx)} ${Y(ly)})`});
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
  const ctm = svg.getScreenCTM();
  const box = (e) => e.getBoundingClientRect();
  // What a label would rather not cover: points, ridge marks, and the flat roofs other than its own.
  const marks = [...svg.querySelectorAll("[data-role=point], path.ridge")].map(box);
  const flatRoofs = [...svg.querySelectorAll("line.compute-roof")].map((l) => ({roof: l.dataset.roof, r: box(l)}));
  const placed = [];
  for (const label of svg.querySelectorAll("g.roof-labels text.roof-label")) {
    const avoid = marks.concat(flatRoofs.filter((f) => f.roof !== label.dataset.roof).map((f) => f.r));
    let best = null, bestCost = Infinity;
    for (const place of label.candidates || []) {
      putLabel(label, place);
      const r = label.getBoundingClientRect();
      const inside = r.left >= frame.left && r.right <= frame.right && r.top >= frame.top && r.bottom <= frame.bottom;
      if (!inside || placed.some((q) => overlaps(r, q))) continue;
      // A flat roof's label reads best over its own line: text reaching left of its start costs two.
      const pastStart = place.from !== undefined && ctm && r.left < ctm.a * place.from + ctm.e ? 2 : 0;
      const cost = avoid.filter((q) => overlaps(r, q)).length + pastStart;
      if (cost < bestCost) { best = place; bestCost = cost; }
      if (cost === 0) break;
    }
    label.hidden = !best;
    label.style.display = best ? "" : "none";
    if (best) {
      putLabel(label, best);
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

// -- points ----------------------------------------------------------------------------------
/** Radius by GPU time: area ∝ time, R_MIN..R_MAX. */
function radiusBy(times) {
  const max = Math.max(...times.map((t) => t || 0), 0);
  return (t) => (max > 0 && t > 0 ? R_MIN + (R_MAX - R_MIN) * Math.sqrt(t / max) : R_MIN);
}

/** What every point mark shares: its role, centre, radius, bound colour, tooltip and keyboard opening;
 * `mark` goes into `marks`, which clicks are hit-tested against (clickPlot). */
function pointAttrs(mark, lines, {tooltip, wrap, marks}) {
  marks.push(mark);
  return {
    "data-role": "point", "data-cx": mark.x, "data-cy": mark.y, "data-r": mark.r, fill: mark.colour, tabindex: 0,
    onmouseenter: (e) => showLines(tooltip, wrap, e, lines),
    onmousemove: (e) => placeTip(tooltip, wrap, e),
    onmouseleave: () => { tooltip.hidden = true; },
    onfocus: (e) => showLines(tooltip, wrap, e, lines),
    onblur: () => { tooltip.hidden = true; },
    onkeydown: (e) => { if (e.key === "Enter") mark.open(); },
  };
}

/** One circle per kernel launch, the longest drawn first (short ones stay on top). */
function kernelPointsGroup(points, level, X, Y, {tooltip, wrap, ctx, marks}) {
  const radius = radiusBy(points.map((p) => p.duration_ns));
  const g = s("g", {class: "points"});
  for (const p of points.slice().sort((a, b) => (b.duration_ns || 0) - (a.duration_ns || 0))) {
    const ai = p[`ai_${level}`];
    const mark = {x: X(ai), y: Y(p.flop_per_s), r: radius(p.duration_ns), colour: fmt.boundColour(p.bound), shape: "circle",
      launch: String(p.launch_id), name: p.name || "(unnamed)",
      detail: `launch ${p.launch_id} · ${fmt.duration(p.duration_ns)} · ${p.bound || "no bound label"}`,
      open: () => ctx.openLaunch(p.launch_id)};
    g.appendChild(s("circle", {
      cx: mark.x, cy: mark.y, r: mark.r, ...pointAttrs(mark, tipLines(p, ai), {tooltip, wrap, marks}),
      class: ["point", String(p.launch_id) === String(ctx.state.launch) ? "selected" : ""], "data-shape": "circle",
      "data-launch-id": p.launch_id, "data-ai": ai, "data-flops": p.flop_per_s,
      "data-duration": p.duration_ns ?? null, "data-bound": p.bound || null,
    }));
  }
  return g;
}

/** One mark per operator shape: its category's shape, its bound colour, area by GPU time; it opens
 * the operator. */
function opPointsGroup(opPoints, X, Y, {tooltip, wrap, ctx, marks}) {
  const radius = radiusBy(opPoints.map((p) => p.gpu_ns));
  const g = s("g", {class: "op-points"});
  for (const p of opPoints.slice().sort((a, b) => (b.gpu_ns || 0) - (a.gpu_ns || 0))) {
    const shape = categoryShape(p.category);
    const mark = {x: X(p.intensity), y: Y(p.flop_per_s), r: radius(p.gpu_ns), colour: fmt.boundColour(p.bound), shape,
      op: p.op || "", name: p.op || "(unnamed)",
      detail: `${p.input_dims || fmt.MISSING} · ${fmt.duration(p.gpu_ns)} · ${p.bound || "no bound label"}`,
      open: () => ctx.navigate({view: "operators", op: p.op, sort: null, q: null, page: null})};
    g.appendChild(s("path", {
      d: markerPath(shape, mark.x, mark.y, mark.r), ...pointAttrs(mark, opTipLines(p), {tooltip, wrap, marks}),
      class: "point op-point", "data-shape": shape, "data-op": p.op, "data-category": p.category || null,
      "data-ai": p.intensity, "data-flops": p.flop_per_s, "data-duration": p.gpu_ns ?? null, "data-bound": p.bound || null,
    }));
  }
  return g;
}

/** The SVG path of a marker of `shape` centred on (x, y), of about the area of a circle of radius r
 * (so size still reads as time whatever the shape). */
function markerPath(shape, x, y, r) {
  const polygon = (n, R, degrees, inner = null) => {
    const corners = [];
    const step = inner === null ? 1 : 2;
    for (let i = 0; i < n * step; i++) {
      const a = (degrees + i * 360 / (n * step)) * Math.PI / 180;
      const radius = inner !== null && i % 2 ? inner : R;
      corners.push(`${(x + radius * Math.cos(a)).toFixed(2)} ${(y + radius * Math.sin(a)).toFixed(2)}`);
    }
    return `M ${corners.join(" L ")} Z`;
  };
  const area = (n) => r * Math.sqrt(2 * Math.PI / (n * Math.sin(2 * Math.PI / n)));  // circumradius of a regular n-gon of area πr²
  switch (shape) {
    case "square": return polygon(4, area(4), 45);
    case "diamond": return polygon(4, area(4) * 1.1, 0);
    case "triangle": return polygon(3, area(3), -90);
    case "triangle-down": return polygon(3, area(3), 90);
    case "pentagon": return polygon(5, area(5), -90);
    case "hexagon": return polygon(6, area(6), 0);
    case "star": return polygon(5, 1.55 * r, -90, 0.7 * r);
    case "plus": {
      const a = 0.45 * r, l = 1.15 * r;
      return `M ${x - a} ${y - l} H ${x + a} V ${y - a} H ${x + l} V ${y + a} H ${x + a} V ${y + l} H ${x - a} V ${y + a} H ${x - l} V ${y - a} H ${x - a} Z`;
    }
    default: return `M ${x - r} ${y} A ${r} ${r} 0 1 0 ${x + r} ${y} A ${r} ${r} 0 1 0 ${x - r} ${y} Z`;
  }
}

// -- clicks: the point under the cursor, or a list when there are several -------------------------
/** The marks whose drawn area (plus HIT_SLACK) holds the client point (clientX, clientY), nearest
 * first (on a tie, the one drawn on top first).  Hit-tested by centre and radius in the svg's own
 * units, so a point under a later-drawn one is found too. */
function marksAt(svg, marks, clientX, clientY) {
  const ctm = svg.getScreenCTM();
  if (!ctm) return [];
  const at = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
  return marks.map((mark, order) => ({mark, order, d: Math.hypot(mark.x - at.x, mark.y - at.y)}))
    .filter(({mark, d}) => d <= mark.r + HIT_SLACK)
    .sort((a, b) => a.d - b.d || b.order - a.order)
    .map(({mark}) => mark);
}

/** A click anywhere on the plot: one point under it opens, several are listed to pick from. */
function clickPlot(e, svg, marks, {pointList, tooltip, wrap}) {
  const under = marksAt(svg, marks, e.clientX, e.clientY);
  hidePointList(pointList);
  if (under.length === 1) under[0].open();
  else if (under.length > 1) showPointList(pointList, {tooltip, wrap}, e, under);
}

function hidePointList(list) {
  list.hidden = true;
  replace(list);
}

/** A small list of the points under the cursor (names as text); picking one opens it. */
function showPointList(list, {tooltip, wrap}, e, under) {
  const pick = (mark) => { hidePointList(list); mark.open(); };
  replace(list,
    h("div", {class: "point-list-head"}, h("span", null, `${under.length} points here: pick one`),
      h("button", {type: "button", class: "point-list-close", title: "close", "aria-label": "close",
        onclick: () => hidePointList(list)}, "×")),
    h("ul", null, under.map((mark) => h("li", null, h("button", {
      type: "button", "data-launch-id": mark.launch ?? null, "data-op": mark.op ?? null, onclick: () => pick(mark)},
    legendMark(mark.shape, mark.colour), h("span", {class: "point-name mono", title: mark.name}, mark.name),
    h("span", {class: "point-detail muted"}, mark.detail))))));
  list.onkeydown = (k) => { if (k.key === "Escape") hidePointList(list); };
  tooltip.hidden = true;
  list.hidden = false;
  const box = wrap.getBoundingClientRect();
  list.style.left = `${Math.max(0, Math.min(e.clientX - box.left + 8, box.width - 420))}px`;
  list.style.top = `${e.clientY - box.top + 8}px`;
  list.querySelector("li button").focus({preventScroll: true});
}

/** A small SVG of one marker (legend rows, the point list). */
function legendMark(shape, colour) {
  const attrs = {class: "legend-mark", fill: colour};
  return s("svg", {width: 16, height: 16, viewBox: "0 0 16 16", class: "legend-marker", "aria-hidden": "true"},
    shape === "circle" ? s("circle", {cx: 8, cy: 8, r: 5.5, ...attrs}) : s("path", {d: markerPath(shape, 8, 8, 5), ...attrs}));
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
    ["bound (roofline)", p.bound ? `${p.bound}${p.bound_reason ? `: ${p.bound_reason}` : ""}` : fmt.MISSING],
  ];
}

function tipLines(p, ai) {
  return [
    ["", p.name || "(unnamed)"],
    ["intensity", `${fmt.num(ai)} FLOP/byte`],
    ["performance", fmt.flops(p.flop_per_s)],
    ["duration", fmt.duration(p.duration_ns)],
    ["bound (counters)", p.bound ? `${p.bound}${p.bound_reason ? `: ${p.bound_reason}` : ""}` : fmt.MISSING],
    ["bound (roofline)", p.roofline_bound ? `${p.roofline_bound}: ${p.roofline_reason || ""}` : fmt.MISSING],
    ...(p.bound_note ? [["methods", "they disagree: open the launch for why"]] : []),
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

// -- the legend: roofs; colour = bound label; shape = operator category -----------------------------
const NEUTRAL = "#fff";  // the category swatches' fill: a shape there says nothing about the bound

function legend(computeGroups, memoryGroups, points, multiDevice, opPoints) {
  const swatch = (dash) => s("svg", {width: 28, height: 10, class: "swatch"},
    s("line", {x1: 0, x2: 28, y1: 5, y2: 5, "stroke-dasharray": dash || null}));
  // One row per roof; a roof drawn on another's line (they coincide) says so.
  const roofItems = (groups, label, value, dash) => groups.flatMap((g) => g.members.map((r) => h("li", {"data-roof": r.key, "data-source": r.source},
    swatch(dash(g)), ` ${multiDevice ? `GPU ${r.device.id} ` : ""}${label(r)} ${value(r.value)} `,
    h("span", {class: `source source-${r.source || "unknown"}`, title: r.how || null}, r.source || "source unknown"),
    r === g.members[0] ? null : h("span", {class: "muted small"}, ` (one line with ${label(g)})`))));
  const bounds = [...new Set(points.map((p) => p.bound || "unknown").concat(opPoints.map((p) => p.bound || "unknown")))];
  const categories = [...new Set(opPoints.map((p) => p.category || "other"))];
  return h("div", {class: "legend-grid"},
    h("div", null, h("h4", null, "Roofs"), h("ul", {class: "legend-list", "data-role": "roof-legend"},
      roofItems(computeGroups, (r) => `${PREC_LABEL[r.prec] || r.prec} peak`, fmt.flops, (g) => PREC_DASH[g.prec]),
      roofItems(memoryGroups, (r) => `${LEVEL_LABEL[r.level] || r.level} bandwidth`, (v) => fmt.human(v, "byte/s"), (g) => LEVEL_DASH[g.level])),
      h("p", {class: "muted small"}, "measured: from the tool's own peak metrics and clocks; datasheet: vendor figures. Hover a tag for the formula.")),
    bounds.length && (points.length || opPoints.length) ? h("div", {"data-role": "bound-legend"},
      h("h4", {title: "kernels by their counters (Nsight Compute's speed-of-light rule), operator shapes by the side of the ridge point they fall on"},
        "Colour: bound (kernels: counters; operators: roofline)"), h("ul", {class: "legend-list"},
        bounds.map((b) => h("li", {"data-bound": b}, legendMark("circle", fmt.boundColour(b)), ` ${b}`)))) : null,
    opPoints.length ? h("div", {"data-role": "category-legend"}, h("h4", null, "Shape: operator category"),
      h("ul", {class: "legend-list"},
        points.length ? h("li", {"data-kernel": ""}, legendMark("circle", NEUTRAL), " kernel launch") : null,
        categories.map((c) => h("li", {"data-category": c}, legendMark(categoryShape(c), NEUTRAL), ` ${c}`)))) : null);
}
