// Plan: the run's candidate optimisations ranked by the step time each could save (GET /plan, built
// from the run's plan table: tb_hwprof/analysis/plan.py).  Each row says what to try, where, the
// saving in time and as a share of the step, its source and how sure it is; its evidence opens
// below it.  Rows may cover the same time, so no total is drawn.

import {h} from "../dom.js";
import * as fmt from "../format.js";
import {runView} from "./common.js";

const SOURCES = {"ncu rule": "Nsight Compute rule", headroom: "headroom to the roof", idle: "GPU idle",
  communication: "communication", copies: "pageable copies"};

export const render = runView({draw});

function draw(doc, ctx) {
  const rows = Array.isArray(doc.rows) ? doc.rows : [];
  const ranked = rows.filter((r) => r.rank > 0);
  const unranked = rows.filter((r) => !(r.rank > 0));
  if (!rows.length) return h("p", {class: "muted", "data-role": "plan-empty"}, doc.empty || "Nothing to rank in this run.");
  return [
    h("p", {class: "muted"}, `${fmt.plural(ranked.length, "change", "changes")} ranked by the time each could save, `,
      `as a share of ${doc.of || "the run's time"}. Rows may cover the same time: each saving is what that change `,
      "alone could save, so they are not added. Click a row for its evidence."),
    rankedTable(ranked),
    unranked.length ? h("section", {"data-role": "plan-unranked"},
      h("h3", null, `Rules without an estimated speedup (${unranked.length})`),
      h("ul", {class: "notes"}, unranked.map((r) => h("li", {"data-key": r.key}, h("span", {class: "mono"}, r.ops || ""), `: ${r.evidence}`)))) : null,
    h("p", {class: "muted small", "data-role": "plan-check"}, "After a change: ",
      h("code", null, `tb-hwprof compare <logdir>/${ctx.state.run} <logdir>/<run after the change>`),
      " shows what happened to each row's time."),
  ];
}

function rankedTable(rows) {
  const head = ["#", "Saving", "Share", "Source", "Where", "What to try"];
  const body = h("tbody");
  for (const r of rows) {
    const evidence = h("tr", {class: "plan-evidence", hidden: true, "data-evidence-of": r.rank},
      h("td", {colspan: head.length}, h("div", null, r.evidence), h("div", {class: "muted small"}, r.confidence)));
    const toggle = () => { evidence.hidden = !evidence.hidden; };
    body.append(h("tr", {"data-row-id": r.rank, "data-key": r.key, "data-source": r.source, tabindex: 0, class: "clickable",
      onclick: toggle, onkeydown: (e) => { if (e.key === "Enter") toggle(); }},
    h("td", {"data-col": "rank", class: "numeric"}, String(r.rank)),
    h("td", {"data-col": "saving_ns", class: "numeric", "data-value": r.saving_ns}, fmt.duration(r.saving_ns)),
    h("td", {"data-col": "saving_pct", class: "numeric", "data-value": r.saving_pct},
      fmt.isMissing(r.saving_pct) ? fmt.MISSING : `${fmt.pct(r.saving_pct)} %`),
    h("td", {"data-col": "source", title: r.confidence || null}, SOURCES[r.source] || r.source),
    h("td", {"data-col": "ops", class: "mono"}, r.ops || "(whole step)",
      r.module ? h("div", {class: "muted small", "data-role": "plan-module"}, `in ${r.module}`) : null),
    h("td", {"data-col": "action"}, r.action)), evidence);
  }
  return h("table", {class: "data plan", "data-role": "plan"},
    h("thead", null, h("tr", null, head.map((t) => h("th", null, t)))), body);
}
