// summaries: placeholder until the view is built (its engineer owns this file).

import {h} from "../dom.js";
import {runView} from "./common.js";

export const render = runView({draw});

function draw(doc, ctx) {
  return [h("p", {class: "muted"}, "Not built yet.")];
}
