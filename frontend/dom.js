// Safe DOM builders.  Every string that reaches the page from a report is
// untrusted (kernel names hold "<" and ">"), so text only ever goes in through
// text nodes / textContent, attributes through setAttribute, and event handlers
// only as functions.  Nothing in this project assigns innerHTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function setAttrs(el, attrs) {
  if (!attrs) return el;
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) {
      if (typeof value !== "function") throw new TypeError(`handler ${key} must be a function`);
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) {
        if (v !== undefined && v !== null) el.dataset[k] = String(v);
      }
    } else if (key === "class") {
      el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : String(value));
    } else if (key === "style" && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) el.style.setProperty(k, String(v));
    } else if (key === "value" && "value" in el) {
      el.value = String(value);
    } else if (key === "checked" || key === "selected" || key === "disabled") {
      el[key] = Boolean(value);
      if (key === "disabled") el.toggleAttribute("disabled", Boolean(value));
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** h("div", {class: "x", dataset: {launchId: 3}}, "text", childNode, [more]) */
export function h(tag, attrs, ...children) {
  return append(setAttrs(document.createElement(tag), attrs), children);
}

/** The same for SVG elements. */
export function s(tag, attrs, ...children) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function text(value) {
  return document.createTextNode(value === undefined || value === null ? "" : String(value));
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  return append(el, children);
}

/** A kernel name: monospace, ellipsis, full name in the title. */
export function kernelName(name, full) {
  const shown = name || full || "(unnamed)";
  return h("span", {class: "kname", title: full || shown}, shown);
}

export function errorBox(message, extra) {
  return h("div", {class: "error", role: "alert"}, message, extra ? h("div", {class: "muted"}, extra) : null);
}

export function loading(what) {
  return h("div", {class: "loading"}, `Loading ${what}…`);
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
