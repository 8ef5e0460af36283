// The plugin's JSON routes (docs/http_api.md).  Static files are served at
// /data/plugin/tb_hwprof/static/<file>, data at /data/plugin/tb_hwprof/<route>,
// so the routes resolve against the folder above this module.

export const API = new URL("../", import.meta.url);

export class ApiError extends Error {
  constructor(status, message, route) {
    super(message);
    this.status = status;
    this.route = route;
  }
}

const cache = new Map();

async function getJSON(route, params = {}) {
  const url = new URL(route, API);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, String(v));
  const key = url.href;
  if (!cache.has(key)) {
    const pending = (async () => {
      let response;
      try {
        response = await fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}});
      } catch (e) {
        throw new ApiError(0, `cannot reach TensorBoard (${e.message})`, route);
      }
      let body = null;
      try {
        body = await response.json();
      } catch (e) {
        body = null;
      }
      if (!response.ok) {
        const message = body && typeof body.error === "string" ? body.error : `HTTP ${response.status} ${response.statusText}`;
        throw new ApiError(response.status, message, route);
      }
      if (body === null || typeof body !== "object") throw new ApiError(response.status, `${route}: response is not JSON`, route);
      return body;
    })();
    cache.set(key, pending);
    pending.catch(() => cache.delete(key));  // errors are retried on the next visit
  }
  return cache.get(key);
}

export function clearCache() {
  cache.clear();
}

/**
 * Cells of a columnar table (/kernels, docs/http_api.md): get(column, row) whichever way the
 * column was sent: value by value ("data"), as steps from row to row ("delta": summed once here),
 * once for every row ("constant"), or as its distinct strings plus one index per row
 * ("dictionary").  A missing column or cell reads as null.
 */
export function columnReader(doc) {
  const columns = new Map();
  for (const [key, values] of Object.entries(doc.data || {})) {
    if (Array.isArray(values)) columns.set(key, (i) => values[i]);
  }
  for (const [key, steps] of Object.entries(doc.delta || {})) {
    if (!Array.isArray(steps)) continue;
    const values = new Float64Array(steps.length);
    let sum = 0;
    steps.forEach((step, i) => { sum += step; values[i] = sum; });
    columns.set(key, (i) => values[i]);
  }
  for (const [key, value] of Object.entries(doc.constant || {})) columns.set(key, () => value);
  for (const [key, entry] of Object.entries(doc.dictionary || {})) {
    if (entry && Array.isArray(entry.values) && Array.isArray(entry.codes)) {
      columns.set(key, (i) => entry.values[entry.codes[i]]);
    }
  }
  return (key, i) => {
    const column = columns.get(key);
    const value = column ? column(i) : null;
    return value === undefined ? null : value;
  };
}

export const api = {
  runs: () => getJSON("runs"),
  kernels: (run) => getJSON("kernels", {run}),
  kernelGroups: (run) => getJSON("kernel_groups", {run}),
  kernel: (run, launch) => getJSON("kernel", {run, launch}),
  roofline: (run) => getJSON("roofline", {run}),
  bottlenecks: (run) => getJSON("bottlenecks", {run}),
  compare: (base, run) => getJSON("compare", {base, run}),
  summary: (run, name) => getJSON("summary", {run, name}),
  cpuHotspots: (run) => getJSON("cpu_hotspots", {run}),
  overview: (run) => getJSON("overview", {run}),
  phases: (run) => getJSON("phases", {run}),
  timeline: (run, start, end, maxEvents) => getJSON("timeline", {
    run, ...(start === null || start === undefined ? {} : {start: Math.round(start)}),
    ...(end === null || end === undefined ? {} : {end: Math.round(end)}), max_events: maxEvents}),
};
