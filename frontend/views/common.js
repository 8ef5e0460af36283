// Helpers shared by the per-run views.

import {h, replace, errorBox, loading} from "../dom.js";

/** Header of a per-run view: title + the run's identity. */
export function runHeader(title, ctx) {
  const info = ctx.runInfo(ctx.state.run);
  const dev = info && Array.isArray(info.devices) ? info.devices.map((d) => d.name).filter(Boolean).join(", ") : "";
  return h("div", {class: "view-head"},
    h("h2", null, title),
    h("span", {class: "mono run-name"}, ctx.state.run || ""),
    dev ? h("span", {class: "muted"}, ` · ${dev}`) : null,
    info && info.tool ? h("span", {class: "muted"}, ` · ${info.tool} ${info.tool_version || ""}`) : null);
}

/**
 * Await `promise` while showing a loading line in `slot`; on failure show the
 * error (HTTP status + the backend's one-line message) and return null.
 */
export async function fetchInto(slot, promise, what, ctx) {
  replace(slot, loading(what));
  try {
    const value = await promise;
    if (!ctx.isCurrent()) return null;
    replace(slot);
    return value;
  } catch (e) {
    if (!ctx.isCurrent()) return null;
    replace(slot, errorBox(`Cannot load ${what}: ${e.message}`, e.status ? `HTTP ${e.status}` : null));
    return null;
  }
}
