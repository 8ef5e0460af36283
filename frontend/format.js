// Human formatting of the kernels table's units.  Missing values (null/NaN)
// show as an em dash: missing is not zero.

export const MISSING = "—";

export function isMissing(v) {
  return v === null || v === undefined || v === "" || (typeof v === "number" && !Number.isFinite(v));
}

const SCALES = {
  ns: [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]],
  bytes: [[1, "B"], [1e3, "KB"], [1e6, "MB"], [1e9, "GB"], [1e12, "TB"]],
  "FLOP/s": [[1, "FLOP/s"], [1e3, "kFLOP/s"], [1e6, "MFLOP/s"], [1e9, "GFLOP/s"], [1e12, "TFLOP/s"], [1e15, "PFLOP/s"]],
  "byte/s": [[1, "B/s"], [1e3, "KB/s"], [1e6, "MB/s"], [1e9, "GB/s"], [1e12, "TB/s"]],
  FLOP: [[1, "FLOP"], [1e3, "kFLOP"], [1e6, "MFLOP"], [1e9, "GFLOP"], [1e12, "TFLOP"]],
  count: [[1, ""], [1e3, "thousand"], [1e6, "million"], [1e9, "billion"], [1e12, "trillion"]],
};

/** The scale [factor, label] of `unit` that suits magnitude `v`. */
export function scaleFor(unit, v) {
  const steps = SCALES[unit];
  if (!steps) return [1, unit || ""];
  let chosen = steps[0];
  const a = Math.abs(v);
  for (const step of steps) if (a >= step[0]) chosen = step;
  return chosen;
}

/** Scale for a whole column: from the median of its present values. */
export function columnScale(unit, values) {
  if (!SCALES[unit]) return [1, unit || ""];
  const present = values.filter((v) => !isMissing(v) && v !== 0).map(Math.abs).sort((a, b) => a - b);
  if (!present.length) return SCALES[unit][0];
  return scaleFor(unit, present[Math.floor(present.length / 2)]);
}

/** 3 significant digits, thousands grouped above 1000. */
export function num(v, digits = 3) {
  if (isMissing(v)) return MISSING;
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString("en-US");
  if (a < 1e-3) return v.toExponential(2);
  return String(Number(v.toPrecision(digits)));
}

export function int(v) {
  return isMissing(v) ? MISSING : Math.round(v).toLocaleString("en-US");
}

/** One decimal; two significant digits below 0.1 so a small share never reads as "0.0". */
export function pct(v) {
  if (isMissing(v)) return MISSING;
  const a = Math.abs(v);
  return a > 0 && a < 0.1 ? String(Number(v.toPrecision(2))) : v.toFixed(1);
}

/** Value with its own best unit, e.g. 4.79 ms, 151 MB, 449 GFLOP/s. */
export function human(v, unit) {
  if (isMissing(v)) return MISSING;
  const [factor, label] = scaleFor(unit, v);
  return `${num(v / factor)} ${label}`.trim();
}

/** A value of a column scaled as a whole ([factor, label] from columnScale): in the column's unit,
 * except a value a hundred times smaller than it, which reads in its own unit ("5.95 MB/s" in a
 * TB/s column, not "5.95e-6"). */
export function inColumnScale(v, unit, [factor]) {
  const scaled = v / factor;
  return scaled !== 0 && Math.abs(scaled) < 1e-2 ? human(v, unit) : num(scaled);
}

/** [step, axis top] of a linear axis from 0 to `max`: a 1 / 2 / 5 step giving about five ticks. */
export function axisTicks(max) {
  if (!(max > 0)) return [1, 1];
  const raw = max / 5;
  const base = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * base).find((v) => v >= raw);
  return [step, Math.ceil(max / step) * step];
}

export const duration = (ns) => human(ns, "ns");
export const bytes = (b) => human(b, "bytes");
export const flops = (f) => human(f, "FLOP/s");

/** "1 launch", "3 launches": a count with its noun in the right number. */
export function plural(n, one, many) {
  return `${int(n)} ${n === 1 ? one : many}`;
}

export function ratio(v) {
  return isMissing(v) ? MISSING : `${v.toFixed(2)}×`;
}

export function signed(v, digits = 1, suffix = "") {
  if (isMissing(v)) return MISSING;
  const s = v.toFixed(digits);
  return (v > 0 ? "+" : v < 0 ? "" : "±") + s.replace("-", "−") + suffix;
}

export function basename(path) {
  if (!path) return "";
  const parts = String(path).split(/[\\/]/);
  return parts[parts.length - 1];
}

/** Guidance colouring: "good" / "mid" / "weak" or "" when no guidance applies. */
export function grade(kind, v) {
  if (isMissing(v)) return "";
  if (kind === "occupancy") return v >= 50 ? "good" : v >= 25 ? "mid" : "weak";
  if (kind === "throughput") return v >= 80 ? "good" : v >= 60 ? "mid" : "weak";
  return "";
}

export const BOUND_COLOURS = {
  compute: "#d9480f",
  memory: "#1c7ed6",
  latency: "#7048e8",
  "small-grid": "#a61e4d",
  balanced: "#2b8a3e",
  unknown: "#868e96",
};

export function boundColour(label) {
  return BOUND_COLOURS[label] || BOUND_COLOURS.unknown;
}
