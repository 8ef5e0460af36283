// Fetching the plugin's JSON routes (docs/http_api.md).  Static files are served at
// /data/plugin/tb_hwprof/static/<file>, data at /data/plugin/tb_hwprof/<route>,
// so the routes resolve against the folder above this module.  The routes themselves
// come from the server (GET /runs lists each view's), not from a list here.

export const API = new URL("../", import.meta.url);

export class ApiError extends Error {
  constructor(status, message, route) {
    super(message);
    this.status = status;
    this.route = route;
  }
}

const cache = new Map();

/** URL of `route` ("/overview" or "overview") with `params` (null / undefined ones left out). */
export function routeURL(route, params = {}) {
  const url = new URL(String(route).replace(/^\/+/, ""), API);
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

/** The JSON document of `route`, fetched once per URL (until clearCache); rejects with an ApiError. */
export function getJSON(route, params = {}) {
  const url = routeURL(route, params);
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
