// "How big is the cache?": the controls make a query, POST /api/capacity
// answers it with the C++ planner's figures and words (those of
// `folio kv-calc`), and this file only draws them: the stacked bar of
// weights + KV + reserve against the device's memory, the rows with their
// arithmetic, and the decode bound as users are added. No sums are done here
// beyond turning bytes into a bar's width.
import { apiJson } from "./api.js";
import { $, el, number, svg } from "./dom.js";

const CUSTOM = "custom";
const EXAMPLES = {
  // The vLLM paper's: 800 KB (KiB) of KV per token, 1.6 GB (1,600 MiB) for a 2,048-token request.
  "example-opt": { model: "OPT-13B", device: "A100", weights: "f16", kv: "f16", context_tokens: 2048, num_users: 1 },
  // 512 KiB per token; 32 users x 4,096 tokens hold 64 GiB of KV: more than an 80 GB H100 has beside the weights.
  "example-llama": { model: "Llama-2-7B", device: "H100", weights: "f16", kv: "f16", context_tokens: 4096,
                     num_users: 32 },
};

let menus = null;
let kvHeads = null;       // the chosen number of KV heads; null: the model's own
let pending = null;       // the AbortController of the query in flight
let timer = 0;
let started = false;

function modelMenu(id) {
  return menus.models.find((m) => m.id === id);
}

function option(value, text) {
  return el("option", { value, text });
}

function fillWeights(modelId) {
  const select = $("p-weights");
  const before = select.value;
  const names = (modelId === "loaded" ? ["stored"] : []).concat(menus.weight_formats);
  select.replaceChildren(...names.map((n) => option(n, n === "stored" ? "as stored in the file" : n)));
  select.value = names.includes(before) ? before : names[0];
}

function kvHeadsText(m, n) {
  if (!m.kv_head_choices.length)
    return m.kv_latent_dim > 0 ? "one latent row per layer (MLA): no KV heads" : `${n} (query heads unknown)`;
  if (n === m.num_heads) return `${n} (MHA: one per query head)`;
  if (n === 1) return `1 (MQA: all ${m.num_heads} query heads share it)`;
  return `${n} (GQA: ${m.num_heads / n} query heads share each)`;
}

// The KV-heads slider walks the divisors of the query heads, MQA to MHA.
function fillKvHeads(m) {
  const range = $("p-kv-heads");
  const choices = m.kv_head_choices;
  const n = kvHeads ?? m.num_kv_heads;
  range.disabled = choices.length < 2;
  range.max = String(Math.max(0, choices.length - 1));
  range.value = String(Math.max(0, choices.indexOf(n)));
  $("p-kv-heads-text").textContent = kvHeadsText(m, n);
}

function query() {
  const q = {
    model: $("p-model").value,
    device: $("p-device").value,
    weights: $("p-weights").value,
    kv: $("p-kv").value,
    context_tokens: Number($("p-context").value),
    num_users: Number($("p-users").value),
  };
  if (kvHeads !== null) q.num_kv_heads = kvHeads;
  if (q.device === CUSTOM) {
    q.memory_bytes = Number($("p-custom-memory").value) * 1e9;
    q.bandwidth_bytes_per_s = Number($("p-custom-bandwidth").value) * 1e9;
  }
  return q;
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(ask, 120);
}

async function ask() {
  if (pending) pending.abort();
  const controller = new AbortController();
  pending = controller;
  try {
    const answer = await apiJson("/api/capacity", query(), controller.signal);
    $("p-error").hidden = true;
    draw(answer);
  } catch (e) {
    if (e.name === "AbortError") return;
    $("p-error").textContent = e.message;
    $("p-error").hidden = false;
  } finally {
    if (pending === controller) pending = null;
  }
}

function gb(bytes) {
  return number(bytes / 1e9, bytes < 10e9 ? 2 : 1) + " GB";
}

// Weights, KV and reserve side by side, spare after them; past the memory a dashed wall.
function drawBar(a) {
  const p = a.plan;
  const memory = a.device.memory_bytes;
  const scale = 1000 / Math.max(memory, p.needed_bytes);
  const parts = [
    ["weights", p.weight_bytes],
    ["kv", p.kv_bytes_total],
    ["reserve", p.reserve_bytes],
    ["spare", Math.max(0, memory - p.needed_bytes)],
  ];
  const nodes = [];
  let x = 0;
  for (const [name, bytes] of parts) {
    const w = bytes * scale;
    if (w <= 0) continue;
    nodes.push(svg("rect", { class: name, x, y: 8, width: w, height: 48 }, [svg("title", { text: `${name}: ${gb(bytes)}` })]));
    if (w > 70) nodes.push(svg("text", { x: x + 6, y: 37, class: "on-bar", text: gb(bytes) }));
    x += w;
  }
  const wall = memory * scale;
  nodes.push(svg("line", { class: "wall", x1: wall, x2: wall, y1: 2, y2: 62 }));
  nodes.push(svg("text", { x: Math.min(wall, 1000) - 4, y: 82, "text-anchor": "end",
                           text: `${a.device.name}: ${gb(memory)}` }));
  if (p.needed_bytes > memory)
    nodes.push(svg("text", { x: 4, y: 82, class: "over", text: `needs ${gb(p.needed_bytes)}` }));
  $("p-bar").replaceChildren(...nodes);
}

function drawVerdict(a) {
  const p = a.plan;
  const users = `${number(a.num_users)} user${a.num_users === 1 ? "" : "s"} \u00d7 ${number(a.context_tokens)} tokens`;
  const verdict = p.fits ? el("span", { class: "yes", text: "fits" }) : el("span", { class: "no", text: "does not fit" });
  const most = p.kv_budget_bytes > 0 ? `; at most ${number(p.max_users)} users at this context` :
    "; the weights alone do not fit";
  $("p-verdict").replaceChildren(`${a.model.name} on ${a.device.name}, ${users}: `, verdict, most);
}

function drawRows(a) {
  $("p-rows").tBodies[0].replaceChildren(...a.rows.map((r) => el("tr", { "data-key": r.key }, [
    el("td", { text: r.name }),
    el("td", {}, [el("span", { class: "value", text: r.value }), el("span", { class: "how", text: "= " + r.how })]),
  ])));
  $("p-notes").replaceChildren(...a.notes.map((n) => el("li", { text: n })));
}

// Tokens per second, in all and per user, against users on a log scale.
function drawCurve(a) {
  const box = $("p-curve");
  const points = a.by_users;
  if (!a.device.bandwidth_bytes_per_s || points.length < 2) {
    box.replaceChildren(svg("text", { x: 20, y: 110, text: "no bandwidth given: no decode bound" }));
    return;
  }
  const W = 1000, H = 260, left = 64, right = 64, top = 16, bottom = 36;  // the viewBox of #p-curve
  const xs = points.map((p) => Math.log2(p.num_users));
  const x = (v) => left + (v - xs[0]) / (xs[xs.length - 1] - xs[0]) * (W - left - right);
  const maxTotal = Math.max(...points.map((p) => p.decode_tokens_per_s_total));
  const maxUser = Math.max(...points.map((p) => p.decode_tokens_per_s_per_user));
  const yTotal = (v) => H - bottom - v / maxTotal * (H - top - bottom);
  const yUser = (v) => H - bottom - v / maxUser * (H - top - bottom);
  const path = (y, key) => points.map((p, i) => `${i ? "L" : "M"}${x(xs[i]).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
  const nodes = [
    svg("line", { class: "axis", x1: left, x2: W - right, y1: H - bottom, y2: H - bottom }),
    svg("path", { class: "line-total", d: path(yTotal, "decode_tokens_per_s_total") }),
    svg("path", { class: "line-user", d: path(yUser, "decode_tokens_per_s_per_user") }),
    svg("text", { x: left - 4, y: top + 4, "text-anchor": "end", class: "total", text: number(maxTotal) }),
    svg("text", { x: W - right + 4, y: top + 4, class: "user", text: number(maxUser, 1) }),
    svg("text", { x: left, y: H - 4, text: "users \u2192" }),
    svg("text", { x: left - 4, y: H - bottom + 4, "text-anchor": "end", text: "0" }),
    svg("text", { x: left + 60, y: top + 4, class: "total", text: "tok/s in all" }),
    svg("text", { x: W - right - 4, y: top + 4, "text-anchor": "end", class: "user", text: "tok/s per user" }),
  ];
  points.forEach((p, i) => {
    nodes.push(svg("circle", { class: p.fits ? "dot" : "dot over", cx: x(xs[i]), cy: yTotal(p.decode_tokens_per_s_total),
                               r: p.num_users === a.num_users ? 5 : 3 },
                   [svg("title", { text: `${number(p.num_users)} users: ${number(p.decode_tokens_per_s_total)} tok/s in all, ` +
                                         `${number(p.decode_tokens_per_s_per_user, 1)} per user${p.fits ? "" : " (does not fit)"}` })]));
    nodes.push(svg("text", { x: x(xs[i]), y: H - bottom + 16, "text-anchor": "middle", class: "tick",
                             text: number(p.num_users) }));
  });
  box.replaceChildren(...nodes);
}

function draw(a) {
  kvHeads = a.model.num_kv_heads === a.model.default_num_kv_heads ? null : a.model.num_kv_heads;
  fillKvHeads(a.model);
  drawVerdict(a);
  drawBar(a);
  drawRows(a);
  drawCurve(a);
}

function showCustom() {
  const custom = $("p-device").value === CUSTOM;
  $("p-custom-memory-label").hidden = !custom;
  $("p-custom-bandwidth-label").hidden = !custom;
}

function choose(values) {
  $("p-model").value = values.model;
  fillWeights(values.model);
  $("p-device").value = values.device;
  $("p-weights").value = values.weights;
  $("p-kv").value = values.kv;
  $("p-context").value = values.context_tokens;
  $("p-users").value = values.num_users;
  kvHeads = null;
  fillKvHeads(modelMenu(values.model));
  showCustom();
  schedule();
}

async function start() {
  try {
    menus = await apiJson("/api/capacity");
  } catch (e) {
    $("p-error").textContent = e.message;
    $("p-error").hidden = false;
    started = false;  // try again when the tab is next opened
    return;
  }
  $("p-model").replaceChildren(...menus.models.map((m) => option(m.id, m.id === "loaded" ? `${m.name} (served here)` : m.name)));
  $("p-device").replaceChildren(...menus.devices.map((d) => option(d.id, d.id === "this-machine" ?
    `this machine (${gb(d.memory_bytes)}, ${number(d.bandwidth_bytes_per_s / 1e9)} GB/s measured)` : d.name)),
    option(CUSTOM, "custom..."));
  $("p-kv").replaceChildren(...menus.kv_formats.map((n) => option(n, n)));
  $("p-context").max = menus.limits.context_tokens;
  $("p-users").max = menus.limits.num_users;
  const d = menus.defaults;
  choose({ model: d.model, device: d.device, weights: d.model === "loaded" ? "stored" : d.weights, kv: d.kv,
           context_tokens: d.context_tokens, num_users: d.num_users });
}

export function setUpPlanner() {
  $("p-model").addEventListener("change", () => {
    kvHeads = null;
    fillWeights($("p-model").value);
    fillKvHeads(modelMenu($("p-model").value));
    schedule();
  });
  $("p-device").addEventListener("change", () => {
    showCustom();
    schedule();
  });
  for (const id of ["p-weights", "p-kv", "p-context", "p-users", "p-custom-memory", "p-custom-bandwidth"])
    $(id).addEventListener("input", schedule);
  $("p-kv-heads").addEventListener("input", () => {
    const m = modelMenu($("p-model").value);
    kvHeads = m.kv_head_choices[Number($("p-kv-heads").value)];
    $("p-kv-heads-text").textContent = kvHeadsText(m, kvHeads);
    schedule();
  });
  for (const [id, values] of Object.entries(EXAMPLES))
    $(id).addEventListener("click", () => menus && choose(values));
}

// The menus are read the first time the tab is shown (the server measures
// this machine's bandwidth then, once).
export function showPlanner(visible) {
  if (visible && !started) {
    started = true;
    start();
  }
}
