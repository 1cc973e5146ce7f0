// Small DOM helpers. Text always goes in as text nodes: nothing here parses HTML.
const SVG_NS = "http://www.w3.org/2000/svg";

function fill(node, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children || []) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

// el("a", {href: url, text: "x"}, [child, "text", ...])
export function el(tag, attrs, children) {
  return fill(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function $(id) {
  return document.getElementById(id);
}

// 12345.6 -> "12,346"; 3.14159 -> "3.14"
export function number(value, digits = 0) {
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}
