// Phases: the run's NVTX ranges, one row per (domain, name, style): instances, CPU wall
// time and the GPU time of the kernels launched inside them (the NVTX projection).

import {h} from "../dom.js";
import {DataTable} from "./table.js";
import {runView} from "./common.js";

const COLUMNS = [
  {key: "name", label: "NVTX range", kind: "name"},
  {key: "domain", label: "Domain", kind: "text"},
  {key: "style", label: "Style", kind: "text", title: "PushPop or StartEnd"},
  {key: "instances", label: "Count", kind: "int"},
  {key: "total_ns", label: "CPU time", unit: "ns", kind: "num", title: "wall time on the CPU, summed over instances"},
  {key: "avg_ns", label: "CPU avg", unit: "ns", kind: "num"},
  {key: "gpu_time_ns", label: "GPU time (projected)", unit: "ns", kind: "num",
    title: "GPU time of the kernels whose launch call started inside the range on its thread (nvtx_gpu_proj_sum's rule)"},
  {key: "kernels", label: "Kernels", kind: "int", title: "kernels launched inside, over all instances"},
  {key: "gpu_span_ns", label: "GPU span", unit: "ns", kind: "num", title: "first kernel start to last kernel end, per instance, summed"},
];

export const render = runView({draw});

function draw(doc, ctx) {
  const data = doc.data || {};
  const get = (key, i) => (data[key] ? data[key][i] : null);
  // The default NVTX domain has no name: say so rather than show a missing value.
  const columns = COLUMNS.filter((c) => (doc.columns || []).includes(c.key)).map((c) => (c.key === "domain"
    ? {...c, display: (i) => get("domain", i) || h("span", {class: "muted"}, "default")} : c));
  const table = new DataTable({
    columns, rows: doc.rows || 0, get, noun: "ranges", role: "phases", state: ctx.state, defaultSort: "total_ns:desc",
    filterPlaceholder: "Filter by range name…", filterText: (i) => String(get("name", i) ?? ""),
    rowAttrs: (i) => ({"data-name": get("name", i)}), onState: (patch) => ctx.update(patch),
  });
  return [
    h("p", {class: "muted", "data-role": "phases-source"}, doc.source === "nvtx_sum"
      ? "From `nsys stats` output: CPU wall time only (no GPU projection without the export's launch records)."
      : "CPU time is the ranges' wall time; GPU time projects the kernels launched inside each range onto it (a kernel counts for every enclosing range)."),
    table.element];
}
