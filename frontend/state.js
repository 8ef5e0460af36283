// View state <-> URL hash ("#view=kernels&run=armleth%2Freport_v2&launch=0"),
// mirrored into localStorage because TensorBoard re-creates the plugin iframe
// (without our hash) when the tab is re-opened or the page reloads.

const STORAGE_KEY = "tb_hwprof.state.v1";
const KEYS = ["view", "run", "launch", "base", "group", "q", "sort", "page", "level", "start", "end", "op", "pairs", "overlay"];
// pairs: the Compare view's kernels paired by hand, a JSON list of [baseline key, run key] for the
// state's base and run (cleared when either changes), so a reload or a shared link keeps them.
// overlay: the Roofline's second run, whose points are drawn hollow on the picked run's axes.

export function parse(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^#/, ""));
  const state = {};
  for (const key of KEYS) {
    const v = params.get(key);
    if (v !== null && v !== "") state[key] = v;
  }
  return state;  // a view the server does not list, or none, is settled once the runs are listed (index.js)
}

export function format(state) {
  const params = new URLSearchParams();
  for (const key of KEYS) {
    const v = state[key];
    if (v !== undefined && v !== null && v !== "") params.set(key, String(v));
  }
  return "#" + params.toString();
}

export function load() {
  const fromHash = parse(location.hash);
  if (fromHash.view || fromHash.run) return fromHash;
  try {
    const stored = JSON.parse(localStorage.getItem(STORAGE_KEY) || "null");
    if (stored && typeof stored === "object") return parse(format(stored));
  } catch (e) {
    // unreadable storage: start from the runs view
  }
  return {view: "runs"};
}

export function save(state) {
  const hash = format(state);
  // An absolute URL: TensorBoard's plugin page has <base href="plugin/<name>/">, against
  // which a bare "#..." would resolve to another document.
  if (location.hash !== hash) history.replaceState(null, "", withHash(hash));
  try {
    localStorage.setItem(STORAGE_KEY, JSON.stringify(state));
  } catch (e) {
    // storage may be disabled: the hash still carries the state
  }
}

/** A link that opens this state on its own (the plugin page outside TensorBoard's shell). */
export function shareLink(state) {
  return withHash(format(state));
}

function withHash(hash) {
  const url = new URL(location.href);
  url.hash = hash;
  return url.href;
}
