// A sortable, filterable, paginated table over columnar data.  Only one page
// (200 rows by default) is in the DOM at a time, so 100k launches stay fast.
//
// column: {key, label, unit?, kind: "num"|"int"|"pct"|"text"|"name"|"bound"|"ratio",
//          grade?: "occupancy"|"throughput", sortKey?, title?, value?(i), display?(i, scale)}
// Cells carry data-col (the column key) and data-value (the raw number or string);
// missing values carry data-missing and show as "—".
// The first column (the row's name) stays in sight when the table scrolls sideways, and cannot be
// hidden; the "Columns" chooser hides the others, remembered per table role (data-role).

import {h, replace, kernelName, debounce} from "../dom.js";
import * as fmt from "../format.js";

export const PAGE_SIZE = 200;
const HIDDEN_KEY = "tb_hwprof.hidden-columns.v1";  // {role: [column keys hidden]}
let choosers = 0;  // ids that tie each chooser button to its panel

function storedHidden() {
  try {
    const all = JSON.parse(localStorage.getItem(HIDDEN_KEY) || "{}");
    return all && typeof all === "object" && !Array.isArray(all) ? all : {};
  } catch (e) {
    return {};  // storage may be disabled or hold something else: nothing hidden
  }
}

/** The columns the user hid in tables of this role. */
function loadHidden(role) {
  const keys = storedHidden()[role];
  return new Set(Array.isArray(keys) ? keys.map(String) : []);
}

function saveHidden(role, hidden) {
  const all = storedHidden();
  if (hidden.size) all[role] = [...hidden]; else delete all[role];
  try {
    localStorage.setItem(HIDDEN_KEY, JSON.stringify(all));
  } catch (e) {
    // storage may be disabled: the choice lasts as long as the page
  }
}

/** The columns with a value in at least one of the n rows, and those in `keep` whatever they hold. */
export function withValues(columns, get, n, keep = new Set()) {
  const has = (key) => {
    for (let i = 0; i < n; i++) if (!fmt.isMissing(get(key, i))) return true;
    return false;
  };
  return columns.filter((c) => keep.has(c.key) || has(c.key));
}

export class DataTable {
  constructor(opts) {
    this.opts = opts;
    this.columns = opts.columns;
    this.n = opts.rows;
    this.get = opts.get;  // (key, i) -> raw value
    this.pageSize = opts.pageSize || PAGE_SIZE;
    this.noun = opts.noun || "rows";
    const st = opts.state || {};
    const [sortKey, sortDir] = String(st.sort || opts.defaultSort || "").split(":");
    this.sortKey = this.columns.some((c) => c.key === sortKey) ? sortKey : null;
    this.sortDir = sortDir === "asc" ? "asc" : "desc";
    this.query = st.q || "";
    this.page = Math.max(0, parseInt(st.page || "0", 10) || 0);
    this.selected = opts.selected ?? null;
    this.role = opts.role || "table";
    this.hidden = loadHidden(this.role);
    this.scales = {};
    for (const col of this.columns) {
      if (col.unit) {
        const values = [];
        for (let i = 0; i < this.n; i++) values.push(this.raw(col, i));
        this.scales[col.key] = fmt.columnScale(col.unit, values);
      }
    }
    this.build();
    this.refresh();
  }

  /** The columns shown: the first (the row's name) always, the others unless hidden. */
  shown() {
    return this.columns.filter((c, index) => index === 0 || !this.hidden.has(c.key));
  }

  /** Hide (or show again) the columns `keys`, and remember it for tables of this role. */
  setHidden(keys, hide) {
    for (const key of keys) if (hide) this.hidden.add(key); else this.hidden.delete(key);
    saveHidden(this.role, this.hidden);
    this.chooserButton.textContent = this.chooserLabel();
    for (const box of this.chooserPanel.querySelectorAll("input[data-col]")) {
      box.checked = box.disabled || !this.hidden.has(box.dataset.col);
    }
    this.refresh();
  }

  chooserLabel() {
    const n = this.columns.slice(1).filter((c) => this.hidden.has(c.key)).length;
    return n ? `Columns (${n} hidden)` : "Columns";
  }

  /** "Columns": a button opening the list of columns with checkboxes; Escape or a click elsewhere closes it. */
  buildChooser() {
    const id = `table-columns-${++choosers}`;
    const options = this.columns.map((col, index) => h("label", {class: "column-option", title: index ? null : "always shown"},
      h("input", {type: "checkbox", "data-col": col.key, checked: index === 0 || !this.hidden.has(col.key), disabled: index === 0,
        onchange: (e) => this.setHidden([col.key], !e.target.checked)}), ` ${col.label}`));
    this.chooserPanel = h("div", {class: "column-panel", id, role: "group", "aria-label": "columns shown", hidden: true,
      "data-role": "columns-panel"}, h("div", {class: "column-options"}, options),
    h("button", {type: "button", class: "show-all", "data-role": "columns-show-all",
      onclick: () => this.setHidden([...this.hidden], false)}, "Show all"));
    this.chooserButton = h("button", {type: "button", class: "column-button", "data-role": "columns-button",
      "aria-expanded": "false", "aria-controls": id, onclick: () => this.openChooser(this.chooserPanel.hidden)},
    this.chooserLabel());
    this.closeOutside = (e) => { if (!this.chooser.contains(e.target)) this.openChooser(false); };
    this.chooser = h("div", {class: "column-chooser", onkeydown: (e) => {
      if (e.key === "Escape" && !this.chooserPanel.hidden) {
        this.openChooser(false);
        this.chooserButton.focus();
      }
    }}, this.chooserButton, this.chooserPanel);
    return this.chooser;
  }

  openChooser(open) {
    this.chooserPanel.hidden = !open;
    this.chooserButton.setAttribute("aria-expanded", String(open));
    if (open) document.addEventListener("click", this.closeOutside, true);
    else document.removeEventListener("click", this.closeOutside, true);
  }

  raw(col, i) {
    return col.value ? col.value(i) : this.get(col.key, i);
  }

  sortValue(col, i) {
    return col.sortKey ? this.get(col.sortKey, i) : this.raw(col, i);
  }

  headerLabel(col) {
    const scale = this.scales[col.key];
    if (scale && scale[1]) return `${col.label} (${scale[1]})`;
    if (col.kind === "pct") return `${col.label} %`;
    return col.label;
  }

  build() {
    this.filterInput = h("input", {
      type: "search", class: "filter", placeholder: this.opts.filterPlaceholder || "Filter by name…",
      value: this.query, "aria-label": "filter by name", "data-role": "filter",
      oninput: debounce(() => {
        this.query = this.filterInput.value;
        this.page = 0;
        this.refresh();
      }, 150),
    });
    this.info = h("span", {class: "info", "data-role": "table-info"});
    this.pager = h("span", {class: "pager"});
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table = h("table", {class: "data", "data-role": this.opts.role || "table"}, this.thead, this.tbody);
    this.element = h("div", {class: "table-wrap"},
      h("div", {class: "toolbar"}, this.filterInput, this.opts.toolbarExtra || null, this.buildChooser(), this.info, this.pager),
      h("div", {class: "scroll"}, this.table));
  }

  filtered() {
    const q = this.query.trim().toLowerCase();
    const idx = [];
    for (let i = 0; i < this.n; i++) {
      if (!q || this.opts.filterText(i).toLowerCase().includes(q)) idx.push(i);
    }
    if (this.sortKey) {
      const col = this.columns.find((c) => c.key === this.sortKey);
      const dir = this.sortDir === "asc" ? 1 : -1;
      const vals = new Map(idx.map((i) => [i, this.sortValue(col, i)]));
      idx.sort((a, b) => {
        const va = vals.get(a), vb = vals.get(b);
        const ma = fmt.isMissing(va), mb = fmt.isMissing(vb);
        if (ma || mb) return ma === mb ? a - b : ma ? 1 : -1;  // missing always last
        if (typeof va === "number" && typeof vb === "number") return (va - vb) * dir || a - b;
        return String(va).localeCompare(String(vb)) * dir || a - b;
      });
    }
    return idx;
  }

  setSort(key) {
    const col = this.columns.find((c) => c.key === key);
    if (this.sortKey === key) {
      this.sortDir = this.sortDir === "asc" ? "desc" : "asc";
    } else {
      this.sortKey = key;
      this.sortDir = ["text", "name", "bound"].includes(col.kind) ? "asc" : "desc";
    }
    this.refresh();
  }

  setSelected(rowId) {
    this.selected = rowId;
    for (const tr of this.tbody.children) {
      tr.classList.toggle("selected", this.selected !== null && tr.dataset.rowId === String(this.selected));
    }
  }

  refresh() {
    const idx = this.filtered();
    const pages = Math.max(1, Math.ceil(idx.length / this.pageSize));
    this.page = Math.min(this.page, pages - 1);
    const start = this.page * this.pageSize;
    const shown = idx.slice(start, start + this.pageSize);

    const columns = this.shown();
    replace(this.thead, h("tr", null, columns.map((col, index) => {
      const active = this.sortKey === col.key;
      return h("th", {
        class: ["sortable", col.kind === "text" || col.kind === "name" || col.kind === "bound" ? "" : "numeric", active ? "sorted" : "",
          index === 0 ? "pinned" : ""],
        "data-col": col.key, "data-sort": active ? this.sortDir : null, title: col.title || null,
        "aria-sort": active ? (this.sortDir === "asc" ? "ascending" : "descending") : "none",
        onclick: () => this.setSort(col.key),
      }, this.headerLabel(col), h("span", {class: "arrow"}, active ? (this.sortDir === "asc" ? " ▲" : " ▼") : ""));
    })));

    const rows = shown.map((i) => this.renderRow(i, columns));
    replace(this.tbody, rows.length ? rows : h("tr", null, h("td", {class: "empty", colspan: columns.length},
      this.n ? `No ${this.noun} match “${this.query}”.` : `No ${this.noun}.`)));

    const from = idx.length ? start + 1 : 0;
    this.info.textContent = `${fmt.int(from)}–${fmt.int(start + shown.length)} of ${fmt.int(idx.length)} ${this.noun}` +
      (idx.length !== this.n ? ` (filtered from ${fmt.int(this.n)})` : "");
    const go = (p) => () => { this.page = p; this.refresh(); };
    replace(this.pager,
      h("button", {type: "button", onclick: go(0), disabled: this.page === 0, title: "first page"}, "«"),
      h("button", {type: "button", onclick: go(this.page - 1), disabled: this.page === 0, "data-role": "prev-page", title: "previous page"}, "‹"),
      h("span", {class: "page-no", "data-role": "page-no"}, ` page ${this.page + 1} / ${pages} `),
      h("button", {type: "button", onclick: go(this.page + 1), disabled: this.page >= pages - 1, "data-role": "next-page", title: "next page"}, "›"),
      h("button", {type: "button", onclick: go(pages - 1), disabled: this.page >= pages - 1, title: "last page"}, "»"));

    if (this.opts.onState) {
      this.opts.onState({
        sort: this.sortKey ? `${this.sortKey}:${this.sortDir}` : null,
        q: this.query || null,
        page: this.page ? String(this.page) : null,
      });
    }
  }

  renderRow(i, columns) {
    const attrs = this.opts.rowAttrs ? this.opts.rowAttrs(i) : {};
    const rowId = this.opts.rowId ? this.opts.rowId(i) : i;
    const tr = h("tr", {
      ...attrs, "data-row-id": rowId,
      class: [attrs.class, this.opts.onRowClick ? "clickable" : "", this.selected !== null && String(rowId) === String(this.selected) ? "selected" : ""],
      onclick: this.opts.onRowClick ? () => this.opts.onRowClick(i) : null,
    });
    columns.forEach((col, index) => tr.appendChild(this.renderCell(col, i, index === 0)));
    return tr;
  }

  renderCell(col, i, pinned = false) {
    const v = this.raw(col, i);
    const missing = fmt.isMissing(v);
    const attrs = {"data-col": col.key, "data-value": missing ? null : v, "data-missing": missing ? "1" : null};
    const cls = [];
    let content;
    if (col.display) {
      content = col.display(i, this.scales[col.key]);
    } else if (missing) {
      content = fmt.MISSING;
    } else if (col.kind === "name") {
      content = kernelName(v, this.opts.fullName ? this.opts.fullName(i) : v);
    } else if (col.kind === "bound") {
      content = boundChip(v, this.get("bound_level", i), this.get("bound_reason", i));
    } else if (col.unit) {
      content = fmt.inColumnScale(v, col.unit, this.scales[col.key]);
    } else if (col.kind === "pct") {
      content = fmt.pct(v);
    } else if (col.kind === "int") {
      content = fmt.int(v);
    } else if (col.kind === "ratio") {
      content = fmt.ratio(v);
    } else if (pinned) {
      content = h("span", {class: "pinned-text", title: String(v)}, String(v));  // a long name clipped, not the table
    } else {
      content = String(v);
    }
    if (missing) cls.push("missing");
    if (col.grade) cls.push(fmt.grade(col.grade, v));
    if (!["text", "name", "bound"].includes(col.kind)) cls.push("numeric");
    if (pinned) cls.push("pinned");
    return h("td", {...attrs, class: cls}, content);
  }
}

/** The label a bound shows: "unknown" of a trace (its reason says "not measured (trace): ...") as that reason's head. */
export function boundText(label, reason) {
  const head = String(reason || "").split(":")[0];
  return label === "unknown" && head.startsWith("not measured") ? head : label;
}

export function boundChip(label, level, reason) {
  if (fmt.isMissing(label)) return fmt.MISSING;
  const text = boundText(label, reason);
  const shown = level && !fmt.isMissing(level) ? `${text} (${level})` : text;
  return h("span", {class: "bound-chip", "data-bound": label, title: reason || null,
    style: {"--bound": fmt.boundColour(label)}}, shown);
}
