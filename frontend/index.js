// tb_hwprof TensorBoard plugin frontend.  TensorBoard loads this file as an ES
// module inside the plugin's iframe and calls render().  Plain ES modules, no
// build step, nothing loaded from outside this folder.

import {getJSON, clearCache} from "./api.js";
import {h, replace, errorBox, loading} from "./dom.js";
import * as stateStore from "./state.js";
import {renderDetail} from "./views/detail.js";

// The views and which runs have them come from the server (GET /runs: "views", and each run's
// "views"); a view named N is drawn by the module views/N.js, loaded on first use.
const modules = new Map();  // name -> the import's promise
const loaded = new Map();  // name -> module, once imported: later visits render without waiting

function viewModule(name) {
  if (!/^[a-z][a-z0-9_]*$/.test(name)) return Promise.reject(new Error(`bad view name ${JSON.stringify(name)}`));
  if (!modules.has(name)) {
    modules.set(name, import(`./views/${name}.js`).then((module) => { loaded.set(name, module); return module; }));
  }
  return modules.get(name);
}

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
    this.views = [];  // the server's views, in nav order: {name, title, route, per_run}
    this.runsError = null;
    this.seq = 0;
    this.currentView = null;
    this.build();
    window.addEventListener("hashchange", () => {
      const next = stateStore.parse(location.hash);
      if (stateStore.format(next) !== stateStore.format(this.state)) {
        this.state = next.view || next.run ? next : {view: "runs"};
        if (this.runs !== null) this.show();  // else start() shows it once the runs are listed
      }
    });
  }

  build() {
    this.nav = h("nav", {class: "views"});
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
      const doc = await getJSON("runs");
      this.runs = Array.isArray(doc.runs) ? doc.runs : [];
      this.views = Array.isArray(doc.views) ? doc.views : [];
      this.runsError = null;
    } catch (e) {
      this.runs = [];
      this.runsError = e;
    }
    this.renderNav();
  }

  renderNav() {
    replace(this.nav, this.views.map((v) => h("button", {type: "button", "data-view": v.name,
      onclick: () => this.navigate({view: v.name, launch: null})}, v.title)));
  }

  viewInfo(name) {
    return this.views.find((v) => v.name === name) || null;
  }

  /** Whether the nav offers `view` for run `info`: views about all runs always, the others when the server lists them. */
  offers(view, info) {
    return !view.per_run || Boolean(info && Array.isArray(info.views) && info.views.includes(view.name));
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

  /** Fill in a run (first readable one) when the state has none or an unknown one, and a view
   * the server lists when it has none or an unknown one: the run's first, else the first. */
  normalise() {
    const st = this.state;
    if (!st.run || !this.runInfo(st.run)) {
      const first = this.goodRuns()[0] || this.runs[0];
      if (first) st.run = first.run; else delete st.run;
    }
    if (!this.viewInfo(st.view)) {
      const own = (this.runInfo(st.run) || {}).views;
      st.view = Array.isArray(own) && own.length ? own[0] : this.views.length ? this.views[0].name : "runs";
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
    const info = this.runInfo(this.state.run);
    for (const b of this.nav.children) {
      b.classList.toggle("active", b.dataset.view === this.state.view);
      b.hidden = !this.offers(this.viewInfo(b.dataset.view), info) && b.dataset.view !== this.state.view;
    }
    this.renderPicker();
    document.body.dataset.view = this.state.view;
    const container = h("div", {class: "view", "data-view": this.state.view});
    replace(this.main, container);
    this.currentView = null;
    this.currentModule = null;
    if (this.runsError) {
      container.appendChild(errorBox(`Cannot list runs: ${this.runsError.message}`));
    } else if (!this.runs.length) {
      container.appendChild(h("div", {class: "empty-state"},
        h("p", null, "No tb_hwprof runs in this logdir yet."),
        h("p", null, "Export a profiler report, then reload:"),
        h("pre", null, "tb-hwprof export report.ncu-rep --logdir LOGDIR --run NAME")));
    } else {
      this.renderView(container, seq).catch((e) => console.error(e));
      return;  // renderView opens the drawer once the view's module says whether it shows one
    }
    this.renderDrawer();
  }

  async renderView(container, seq) {
    const view = this.viewInfo(this.state.view);
    const ctx = {
      state: {...this.state},
      view,
      runs: this.runs,
      runInfo: (name) => this.runInfo(name),
      viewTitle: (name) => (this.viewInfo(name) || {}).title || name,
      isCurrent: () => seq === this.seq,
      navigate: (patch) => this.navigate(patch),
      update: (patch) => { if (seq === this.seq) this.update(patch); },
      openLaunch: (launch) => { if (seq === this.seq) this.openLaunch(launch); },
    };
    try {
      // Synchronous when the module is loaded: a control that re-renders its view (a toggle)
      // is replaced at once, never missing from the page for a moment.
      const module = loaded.get(view.name) ?? await viewModule(view.name);
      if (seq !== this.seq) return;
      this.currentModule = module;
      this.currentView = module.render(container, ctx) || null;
    } catch (e) {
      container.appendChild(errorBox(`This view failed: ${e.message}`));
      console.error(e);
    }
    this.renderDrawer();
  }

  renderDrawer() {
    const launch = this.state.launch;
    // Views whose module says so (opensLaunches) show the drawer of the launch the state names.
    const open = launch !== undefined && this.state.run && Boolean(this.currentModule && this.currentModule.opensLaunches);
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
      info: this.runInfo(this.state.run) || {},
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
