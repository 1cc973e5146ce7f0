// The engine, live: GET /api/live about once a second while the tab is open
// and the page visible. Counters become rates here (tokens per second is the
// change in generated tokens over the change in the server's time_s); the
// block map is drawn as a grid of SVG squares, one per cell of the map.
import { apiJson } from "./api.js";
import { $, el, number, svg } from "./dom.js";

const PERIOD_MS = 1000;
const HISTORY = 120;   // samples: two minutes
const COLUMNS = 64;    // cells a row of the grid
const CELL = 10;       // viewBox units a cell, gap included

let visible = false;
let timer = 0;
let inFlight = false;  // one poll at a time, however often the tab is shown
let previous = null;   // the last answer, for rates
let history = [];      // [{t, tps, used}]
let cells = [];        // the grid's <rect>s, reused while the pool keeps its size

function percent(ratio) {
  return number(ratio * 100, 1) + "%";
}

function drawGrid(map) {
  const grid = $("live-grid");
  if (cells.length !== map.length) {
    const rows = Math.max(1, Math.ceil(map.length / COLUMNS));
    grid.setAttribute("viewBox", `0 0 ${COLUMNS * CELL} ${rows * CELL}`);
    cells = Array.from(map, (_, i) => svg("rect", { x: (i % COLUMNS) * CELL, y: Math.floor(i / COLUMNS) * CELL,
                                                    width: CELL - 1.5, height: CELL - 1.5, rx: 1.5 }));
    grid.replaceChildren(...cells);
  }
  for (let i = 0; i < map.length; i++) if (cells[i].getAttribute("class") !== map[i]) cells[i].setAttribute("class", map[i]);
}

function drawHistory() {
  const W = 1000, H = 200, left = 52, right = 52, top = 14, bottom = 22;  // the viewBox of #live-history
  const box = $("live-history");
  if (history.length < 2) {
    box.replaceChildren(svg("text", { x: left, y: H / 2, text: "collecting..." }));
    return;
  }
  const t0 = history[history.length - 1].t - HISTORY * PERIOD_MS / 1000;
  const x = (t) => left + Math.max(0, (t - t0) / (HISTORY * PERIOD_MS / 1000)) * (W - left - right);
  const maxTps = Math.max(1, ...history.map((h) => h.tps));
  const maxUsed = Math.max(1, ...history.map((h) => h.used));
  const line = (key, max) => history.map((h, i) =>
    `${i ? "L" : "M"}${x(h.t).toFixed(1)},${(H - bottom - h[key] / max * (H - top - bottom)).toFixed(1)}`).join("");
  box.replaceChildren(
    svg("line", { class: "axis", x1: left, x2: W - right, y1: H - bottom, y2: H - bottom }),
    svg("path", { class: "line-total", d: line("tps", maxTps) }),
    svg("path", { class: "line-used", d: line("used", maxUsed) }),
    svg("text", { x: left - 4, y: top + 4, "text-anchor": "end", class: "total", text: number(maxTps) }),
    svg("text", { x: left + 4, y: top + 4, class: "total", text: "tokens/s" }),
    svg("text", { x: W - right + 4, y: top + 4, class: "used", text: number(maxUsed) }),
    svg("text", { x: W - right - 4, y: top + 4, "text-anchor": "end", class: "used", text: "blocks in use" }),
    svg("text", { x: left, y: H - 4, text: "two minutes ago" }),
    svg("text", { x: W - right, y: H - 4, "text-anchor": "end", text: "now" }));
}

// A card per cascade: the share of its answers the large model gave.
function drawCascades(cascades) {
  const box = $("live-cascades");
  box.hidden = !cascades.length;
  box.replaceChildren(...cascades.map((c) => {
    const total = c.answered_small + c.answered_large;
    return el("div", {
      class: "card",
      title: `${c.small} answered ${number(c.answered_small)}, ${c.large} ${number(c.answered_large)}`,
    }, [
      el("b", { text: total ? percent(c.answered_large / total) : "-" }),
      el("span", { text: `of ${number(total)} ${c.name} answers escalated to ${c.large}` }),
    ]);
  }));
}

function draw(s) {
  const kv = s.kv;
  let tps = 0;
  if (previous && s.time_s > previous.time_s)
    tps = (s.tokens.generation - previous.tokens.generation) / (s.time_s - previous.time_s);
  $("live-running").textContent = number(s.num_running);
  $("live-waiting").textContent = number(s.num_waiting);
  $("live-tps").textContent = previous ? number(tps, 1) : "-";
  $("live-used").textContent = number(kv.num_used_blocks);
  $("live-cached").textContent = number(kv.num_cached_free_blocks);
  const pc = s.prefix_cache;
  $("live-hit").textContent = pc.num_queried_tokens ? percent(pc.token_hit_rate) : "-";
  $("live-hit").title = `${number(pc.num_hit_tokens)} of ${number(pc.num_queried_tokens)} prompt tokens found cached`;
  $("live-preempt").textContent = number(s.num_preemptions);
  const spec = s.speculation;
  $("live-spec").textContent = spec.num_proposed_tokens ? percent(spec.acceptance_rate) : "-";
  $("live-spec").title = `${number(spec.num_accepted_tokens)} of ${number(spec.num_proposed_tokens)} proposed tokens accepted`;
  $("live-finished").textContent = number(s.num_requests_finished);
  $("live-pool").textContent = `(${number(kv.num_blocks)} blocks of ${number(kv.block_size)} tokens, ` +
    `${number(kv.bytes / 2 ** 20, 1)} MiB` + (kv.blocks_per_cell > 1 ? `; a square is ${kv.blocks_per_cell} blocks)` : ")");
  drawGrid(kv.map);
  history.push({ t: s.time_s, tps, used: kv.num_used_blocks });
  if (history.length > HISTORY) history.shift();
  drawHistory();
  previous = s;
}

async function poll() {
  timer = 0;
  if (!visible || document.hidden || inFlight) return;
  inFlight = true;
  const begun = performance.now();
  try {
    const s = await apiJson("/api/live");
    drawCascades(s.cascades || []);
    if (!s.ready) {
      $("live-status").textContent = "the model is loading...";
    } else {
      draw(s);
      $("live-status").textContent = "updated " + new Date().toLocaleTimeString();
    }
  } catch (e) {
    $("live-status").textContent = "cannot read the engine: " + e.message;
  } finally {
    inFlight = false;
  }
  if (visible && !timer) timer = setTimeout(poll, Math.max(100, PERIOD_MS - (performance.now() - begun)));
}

export function setUpLive() {
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && visible && !timer) poll();
  });
}

export function showLive(on) {
  visible = on;
  if (on && !timer) poll();
  if (!on && timer) {
    clearTimeout(timer);
    timer = 0;
  }
}
