// A small Markdown renderer for model replies, which are untrusted: it builds
// DOM nodes and puts every piece of text in as a text node, so no reply can
// inject markup or script. Links open only http(s) and mailto addresses.
// Covers what chat models write: paragraphs, headings, fenced code, lists,
// quotes, tables, rules; inline code, bold, italic, strike-through, links.
// A reply still streaming is rendered as it stands (an open fence is code).
import { el } from "./dom.js";

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const BULLET = /^(\s*)([-*+])\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

export function renderMarkdown(text, into) {
  into.replaceChildren(...blocks(text.replace(/\r\n?/g, "\n").split("\n")));
}

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      i++;
    } else if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) code.push(lines[i]);
      i++;  // the closing fence, if it has come yet
      out.push(codeBlock(code.join("\n"), m[2]));
    } else if ((m = HEADING.exec(line))) {
      out.push(el("h" + Math.min(6, m[1].length + 2), {}, inline(m[2])));
      i++;
    } else if (RULE.test(line)) {
      out.push(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const inner = [];
      for (; i < lines.length && (m = QUOTE.exec(lines[i])); i++) inner.push(m[1]);
      out.push(el("blockquote", {}, blocks(inner)));
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      i = list(lines, i, out);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]) &&
               lines[i + 1].includes("-")) {
      i = table(lines, i, out);
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() && !startsBlock(lines[i]); i++) para.push(lines[i].trim());
      const children = [];
      para.forEach((p, k) => {
        if (k > 0) children.push(el("br"));
        children.push(...inline(p));
      });
      out.push(el("p", {}, children));
    }
  }
  return out;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || BULLET.test(line) ||
    ORDERED.test(line);
}

function codeBlock(code, lang) {
  const codeNode = el("code", lang ? { "data-lang": lang } : {}, [code]);
  const copy = el("button", { class: "copy quiet", type: "button", text: "copy" });
  copy.addEventListener("click", () => {
    navigator.clipboard?.writeText(code).then(() => { copy.textContent = "copied"; }, () => {});
  });
  return el("pre", {}, [copy, codeNode]);
}

const indentOf = (line) => line.search(/\S/);

// A list from line i: items of the same marker and indent; lines indented
// deeper belong to the item (a nested list among them), as do lines that
// start no other block.
function list(lines, i, out) {
  const ordered = !BULLET.test(lines[i]);
  const marker = ordered ? ORDERED : BULLET;
  const first = marker.exec(lines[i]);
  const indent = first[1].length;
  const node = el(ordered ? "ol" : "ul", ordered && first[2] !== "1" ? { start: Number(first[2]) } : {});
  const strip = new RegExp(`^\\s{0,${indent + 4}}`);
  while (i < lines.length) {
    const m = marker.exec(lines[i]);
    if (!m || m[1].length !== indent) break;
    const itemLines = [m[3]];
    for (i++; i < lines.length; i++) {
      const line = lines[i];
      if (!line.trim()) {
        const next = lines[i + 1];
        if (next !== undefined && next.trim() && indentOf(next) > indent) {
          itemLines.push("");
          continue;
        }
        break;
      }
      if (indentOf(line) > indent) itemLines.push(line.replace(strip, ""));
      else if (!startsBlock(line)) itemLines.push(line.trim());
      else break;
    }
    node.append(el("li", {}, itemLines.length === 1 ? inline(itemLines[0]) : blocks(itemLines)));
    // A blank line between two items of the same list keeps it one list.
    let j = i;
    while (j < lines.length && !lines[j].trim()) j++;
    const again = j < lines.length ? marker.exec(lines[j]) : null;
    if (j > i && again && again[1].length === indent) i = j;
  }
  out.push(node);
  return i;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

function table(lines, i, out) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : null);
  const row = (values, tag) => el("tr", {}, head.map((_, k) =>
    el(tag, align[k] ? { class: "align-" + align[k] } : {}, inline(values[k] || ""))));
  const body = [];
  for (i += 2; i < lines.length && lines[i].includes("|") && lines[i].trim(); i++) body.push(row(cells(lines[i]), "td"));
  out.push(el("table", {}, [el("thead", {}, [row(head, "th")]), el("tbody", {}, body)]));
  return i;
}

// Inline spans. Each maker is given the text and a position where its
// opening character stands; it answers {node, end} or null (not a span here).
const EMPHASIS = [
  { re: /\*\*(?=\S)([\s\S]*?\S)\*\*/y, tag: "strong" },
  { re: /__(?=\S)([\s\S]*?\S)__(?!\w)/y, tag: "strong" },
  { re: /\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)/y, tag: "em" },
  { re: /(?<!\w)_(?=\S)([\s\S]*?\S)_(?!\w)/y, tag: "em" },
  { re: /~~(?=\S)([\s\S]*?\S)~~/y, tag: "del" },
];
const LINK = /\[([^\]\n]+)\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/y;
const AUTOLINK = /https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"*_~]/y;
const SAFE_URL = /^(https?:\/\/|mailto:)/i;
const ESCAPABLE = /[\\`*_{}\[\]()#+\-.!|~>]/;

function sticky(re, text, at) {
  re.lastIndex = at;
  return re.exec(text);
}

function spanAt(text, at) {
  const c = text[at];
  if (c === "`") return codeSpan(text, at);
  if (c === "[") {
    const m = sticky(LINK, text, at);
    if (m && SAFE_URL.test(m[2]))
      return { node: anchor(m[2], inline(m[1])), end: at + m[0].length };
    return null;  // javascript:, data: and the like stay text
  }
  if (c === "h") {
    const m = sticky(AUTOLINK, text, at);
    return m && (at === 0 || !/\w/.test(text[at - 1])) ? { node: anchor(m[0], [m[0]]), end: at + m[0].length } : null;
  }
  for (const { re, tag } of EMPHASIS) {
    const m = sticky(re, text, at);
    if (m) return { node: el(tag, {}, inline(m[1])), end: at + m[0].length };
  }
  return null;
}

function inline(text) {
  const out = [];
  let plain = "";
  for (let i = 0; i < text.length;) {
    const c = text[i];
    if (c === "\\" && ESCAPABLE.test(text[i + 1] || "")) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    const span = "`[h*_~".includes(c) ? spanAt(text, i) : null;
    if (span) {
      if (plain) out.push(plain);
      plain = "";
      out.push(span.node);
      i = span.end;
    } else {
      plain += c;
      i++;
    }
  }
  if (plain) out.push(plain);
  return out;
}

// `code`, ``code with ` inside``: a run of backticks closes with an equal run.
function codeSpan(text, at) {
  let ticks = 0;
  while (text[at + ticks] === "`") ticks++;
  const run = "`".repeat(ticks);
  let close = text.indexOf(run, at + ticks);
  while (close !== -1 && text[close + ticks] === "`") {
    while (text[close] === "`") close++;
    close = text.indexOf(run, close);
  }
  if (close === -1) return { node: run, end: at + ticks };
  let code = text.slice(at + ticks, close);
  if (/^ [\s\S]* $/.test(code) && code.trim()) code = code.slice(1, -1);
  return { node: el("code", {}, [code]), end: close + ticks };
}

function anchor(url, children) {
  return el("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, children);
}
