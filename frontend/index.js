// tb_hwprof TensorBoard plugin frontend.  TensorBoard loads this file as an ES
// module inside the plugin's iframe and calls render().  Plain ES modules, no
// build step, nothing loaded from outside this folder.

import {api, clearCache} from "./api.js";
import {h, replace, errorBox, loading} from "./dom.js";
import * as stateStore from "./state.js";
import * as runsView from "./views/runs.js";
import * as kernelsView from "./views/kernels.js";
import * as rooflineView from "./views/roofline.js";
import * as bottlenecksView from "./views/bottlenecks.js";
import * as compareView from "./views/compare.js";
import * as cpuView from "./views/cpu.js";
import * as overviewView from "./views/overview.js";
import * as timelineView from "./views/timeline.js";
import * as phasesView from "./views/phases.js";
import {renderDetail} from "./views/detail.js";

const VIEWS = {
  runs: {label: "Runs", module: runsView},
  kernels: {label: "Kernels", module: kernelsView},
  roofline: {label: "Roofline", module: rooflineView},
  bottlenecks: {label: "Bottlenecks", module: bottlenecksView},
  compare: {label: "Compare", module: compareView},
  // `when(runInfo)`: the nav shows the entry only for runs that can fill it.
  cpu: {label: "CPU hotspots", module: cpuView, when: hasSummary("cpu_hotspots")},
  overview: {label: "Overview", module: overviewView},
  timeline: {label: "Timeline", module: timelineView, when: (info) => Boolean(info && info.has_timeline)},
  phases: {label: "Phases", module: phasesView, when: (info) => hasSummary("nvtx_phases")(info) || hasSummary("nvtx_sum")(info)},
};

function hasSummary(name) {
  return (info) => Boolean(info && Array.isArray(info.summaries) && info.summaries.includes(name));
}
// Views that open the kernel-detail drawer when the state names a launch.
const DETAIL_VIEWS = new Set(["kernels", "roofline", "bottlenecks"]);

function ensureStylesheet() {
  const href = new URL("./style.css", import.meta.url).href;
  if (![...document.querySelectorAll("link[rel=stylesheet]")].some((l) => l.href === href)) {
    document.head.appendChild(h("link", {rel: "stylesheet", href}));
  }
}

class App {
  constructor(root) {
    this.root = root;
    this.state = stateStore.load();
    this.runs = null;
    this.runsError = null;
    this.seq = 0;
    this.currentView = null;
    this.build();
    window.addEventListener("hashchange", () => {
      const next = stateStore.parse(location.hash);
      if (stateStore.format(next) !== stateStore.format(this.state)) {
        this.state = next.view ? next : {view: "runs"};
        if (this.runs !== null) this.show();  // else start() shows it once the runs are listed
      }
    });
  }

  build() {
    this.nav = h("nav", {class: "views"}, Object.entries(VIEWS).map(([key, v]) =>
      h("button", {type: "button", "data-view": key, onclick: () => this.navigate({view: key, launch: null})}, v.label)));
    this.picker = h("select", {id: "run-picker", "aria-label": "run", onchange: () => this.navigate({run: this.picker.value, launch: null, page: null, start: null, end: null})});
    this.share = h("a", {class: "share", target: "_blank", rel: "noopener", title: "a link that opens this view on its own"}, "link");
    const reload = h("button", {type: "button", title: "reload runs and data", onclick: () => this.reload()}, "⟳");
    this.header = h("header", {class: "top"},
      h("span", {class: "brand"}, "HW profile"), this.nav,
      h("span", {class: "spacer"}), h("label", {class: "run-pick"}, "Run ", this.picker), reload, this.share);
    this.main = h("main", {id: "view"});
    this.drawer = h("aside", {id: "detail", class: "drawer", hidden: true, "aria-label": "kernel detail"});
    replace(this.root, h("div", {class: "hwprof"}, this.header, this.main, this.drawer));
  }

  async start() {
    replace(this.main, loading("runs"));
    await this.loadRuns();
    this.show();
  }

  async loadRuns() {
    try {
      const doc = await api.runs();
      this.runs = Array.isArray(doc.runs) ? doc.runs : [];
      this.runsError = null;
    } catch (e) {
      this.runs = [];
      this.runsError = e;
    }
  }

  async reload() {
    clearCache();
    await this.loadRuns();
    this.show();
  }

  goodRuns() {
    return this.runs.filter((r) => !r.error);
  }

  runInfo(name) {
    return this.runs.find((r) => r.run === name) || null;
  }

  /** Fill in a run (first readable one) when the state has none or an unknown one. */
  normalise() {
    const st = this.state;
    if (!VIEWS[st.view]) st.view = "runs";
    if (!st.run || !this.runInfo(st.run)) {
      const first = this.goodRuns()[0] || this.runs[0];
      if (first) st.run = first.run; else delete st.run;
    }
  }

  /** Change state and re-render the view. */
  navigate(patch) {
    this.state = {...this.state, ...patch};
    for (const [k, v] of Object.entries(patch)) if (v === null || v === undefined) delete this.state[k];
    this.show();
  }

  /** Change state without re-rendering (table sort/filter/page). */
  update(patch) {
    for (const [k, v] of Object.entries(patch)) {
      if (v === null || v === undefined || v === "") delete this.state[k]; else this.state[k] = v;
    }
    this.persist();
  }

  persist() {
    stateStore.save(this.state);
    this.share.setAttribute("href", stateStore.shareLink(this.state));
  }

  openLaunch(launch) {
    this.update({launch: launch === null ? null : String(launch)});
    this.renderDrawer();
    if (this.currentView && this.currentView.onSelect) this.currentView.onSelect(launch);
  }

  renderPicker() {
    replace(this.picker, this.runs.map((r) =>
      h("option", {value: r.run, selected: r.run === this.state.run, "data-error": r.error ? "1" : null},
        r.error ? `${r.run} (error)` : r.run)));
    this.picker.disabled = !this.runs.length;
    this.picker.closest("label").hidden = this.state.view === "compare";
  }

  show() {
    this.normalise();
    this.persist();
    const seq = ++this.seq;
    for (const b of this.nav.children) b.classList.toggle("active", b.dataset.view === this.state.view);
    const info = this.runInfo(this.state.run);
    for (const b of this.nav.children) {
      const when = VIEWS[b.dataset.view].when;
      b.hidden = Boolean(when) && !when(info) && b.dataset.view !== this.state.view;
    }
    this.renderPicker();
    document.body.dataset.view = this.state.view;
    const container = h("div", {class: "view", "data-view": this.state.view});
    replace(this.main, container);
    const ctx = {
      state: {...this.state},
      runs: this.runs,
      runInfo: (name) => this.runInfo(name),
      isCurrent: () => seq === this.seq,
      navigate: (patch) => this.navigate(patch),
      update: (patch) => { if (seq === this.seq) this.update(patch); },
      openLaunch: (launch) => { if (seq === this.seq) this.openLaunch(launch); },
    };
    this.currentView = null;
    if (this.runsError) {
      container.appendChild(errorBox(`Cannot list runs: ${this.runsError.message}`));
    } else if (!this.runs.length) {
      container.appendChild(h("div", {class: "empty-state"},
        h("p", null, "No tb_hwprof runs in this logdir yet."),
        h("p", null, "Export a profiler report, then reload:"),
        h("pre", null, "tb-hwprof export report.ncu-rep --logdir LOGDIR --run NAME")));
    } else {
      try {
        this.currentView = VIEWS[this.state.view].module.render(container, ctx) || null;
      } catch (e) {
        container.appendChild(errorBox(`This view failed: ${e.message}`));
        console.error(e);
      }
    }
    this.renderDrawer();
  }

  renderDrawer() {
    const launch = this.state.launch;
    const open = launch !== undefined && this.state.run && DETAIL_VIEWS.has(this.state.view);
    this.drawer.hidden = !open;
    document.body.classList.toggle("drawer-open", Boolean(open));
    if (!open) {
      replace(this.drawer);
      return;
    }
    renderDetail(this.drawer, {
      run: this.state.run,
      launch,
      count: (this.runInfo(this.state.run) || {}).kernel_count ?? null,
      isCurrent: () => this.state.launch === launch && this.state.run !== undefined,
      close: () => this.openLaunch(null),
      open: (other) => this.openLaunch(other),
    });
  }
}

let app = null;

export async function render() {
  ensureStylesheet();
  app = new App(document.body);
  await app.start();
  return app;
}
