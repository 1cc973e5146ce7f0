// Chat: conversations with the served model, kept in localStorage, each reply
// streamed from POST /v1/chat/completions (server-sent events) as any client
// would. Stop aborts the request: the connection closes and the server
// frees the request's KV blocks within a step. Each reply shows its time to
// first token, its decode rate and how many prompt tokens the prefix cache
// served (usage.prompt_tokens_details.cached_tokens).
import { apiFetch, errorText } from "./api.js";
import { $, el, number } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const STORE = "folio.conversations";
const SETTINGS = "folio.chatSettings";
const MAX_CONVERSATIONS = 50;
const DEFAULT_SETTINGS = { system: "", temperature: 0.7, top_p: 0.95, max_tokens: 512, seed: "" };

let model = "";
let conversations = [];  // [{id, title, messages: [{role, content, figures?, error?}]}], newest first
let current = null;
let running = null;      // {controller} while a reply streams

function load() {
  try {
    conversations = JSON.parse(localStorage.getItem(STORE) || "[]").filter((c) => Array.isArray(c.messages));
  } catch {
    conversations = [];
  }
}

function save() {
  conversations = conversations.slice(0, MAX_CONVERSATIONS);
  try {
    localStorage.setItem(STORE, JSON.stringify(conversations));
  } catch {
    // Storage full or refused (a private window): the chat goes on, unsaved.
  }
}

function settings() {
  let stored = {};
  try {
    stored = JSON.parse(localStorage.getItem(SETTINGS) || "{}");
  } catch {}
  return Object.assign({}, DEFAULT_SETTINGS, stored);
}

function bindSettings() {
  const s = settings();
  const fields = { system: "set-system", temperature: "set-temperature", top_p: "set-top-p",
                   max_tokens: "set-max-tokens", seed: "set-seed" };
  for (const [key, id] of Object.entries(fields)) {
    const input = $(id);
    input.value = s[key];
    input.addEventListener("change", () => {
      const next = settings();
      next[key] = input.value;
      localStorage.setItem(SETTINGS, JSON.stringify(next));
    });
  }
}

function newConversation() {
  if (current && !current.messages.length) return;  // the empty one is already there
  current = { id: String(Date.now()) + Math.random().toString(16).slice(2, 6), title: "New chat", messages: [] };
  conversations.unshift(current);
  drawList();
  drawMessages();
}

function drawList() {
  const list = $("conversation-list");
  list.replaceChildren(...conversations.map((c) => el("li", { class: c === current ? "current" : "" }, [
    el("button", { class: "open", title: c.title, text: c.title, onclick: () => open(c) }),
    el("button", { class: "delete", title: "Delete this chat", "aria-label": "delete", text: "\u00d7",
                   onclick: () => remove(c) }),
  ])));
  $("chat-title").textContent = current ? current.title : "";
}

function open(c) {
  if (running) return;
  current = c;
  $("conversations").classList.remove("open");
  drawList();
  drawMessages();
}

function remove(c) {
  if (running && c === current) return;
  conversations = conversations.filter((x) => x !== c);
  save();
  if (c === current) {
    current = conversations.length ? conversations[0] : null;
    if (!current) return newConversation();
  }
  drawList();
  drawMessages();
}

function figuresText(f) {
  if (!f) return "";
  const parts = [];
  if (f.completion_tokens !== undefined) parts.push(`${number(f.completion_tokens)} tokens`);
  else if (f.num_deltas) parts.push(`~${number(f.num_deltas)} tokens`);  // stopped: no usage came; a delta is about a token
  if (f.ttft_s !== undefined) parts.push(`first token ${number(f.ttft_s, 2)} s`);
  if (f.tokens_per_s) parts.push(`${number(f.tokens_per_s, 1)} tok/s`);
  if (f.prompt_tokens !== undefined)
    parts.push(`prompt ${number(f.prompt_tokens)} tokens, ${number(f.cached_tokens || 0)} from the prefix cache`);
  if (f.stopped) parts.push("stopped");
  if (f.finish_reason && f.finish_reason !== "stop") parts.push(`finish: ${f.finish_reason}`);
  return parts.join(" \u00b7 ");
}

// One message's element; an assistant's is rendered from Markdown.
function messageNode(m) {
  const body = el("div", { class: "body" });
  if (m.role === "assistant" && !m.error) renderMarkdown(m.content, body);
  else body.textContent = m.content;
  return el("div", { class: `message ${m.role}${m.error ? " error" : ""}` }, [
    body,
    m.role === "assistant" ? el("div", { class: "figures", text: figuresText(m.figures) }) : null,
  ]);
}

function drawMessages() {
  const box = $("messages");
  box.replaceChildren(...current.messages.map(messageNode));
  box.scrollTop = box.scrollHeight;
}

function requestBody(history) {
  const s = settings();
  const messages = [];
  if (s.system.trim()) messages.push({ role: "system", content: s.system });
  for (const m of history) if (!m.error && m.content) messages.push({ role: m.role, content: m.content });
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (model) body.model = model;
  const num = (v) => (v === "" || v === null || v === undefined ? undefined : Number(v));
  if (num(s.temperature) !== undefined) body.temperature = num(s.temperature);
  if (num(s.top_p) !== undefined) body.top_p = num(s.top_p);
  if (num(s.max_tokens) !== undefined) body.max_tokens = Math.round(num(s.max_tokens));
  if (num(s.seed) !== undefined) body.seed = Math.round(num(s.seed));
  return body;
}

// The data of each complete server-sent event in `buffer`; returns the rest.
function takeEvents(buffer, onData) {
  let cut;
  while ((cut = buffer.indexOf("\n\n")) !== -1) {
    const event = buffer.slice(0, cut);
    buffer = buffer.slice(cut + 2);
    const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
    if (data) onData(data);
  }
  return buffer;
}

async function send() {
  const input = $("chat-input");
  const text = input.value.trim();
  if (!text || running) return;
  input.value = "";
  const conversation = current;
  if (!conversation.messages.length) conversation.title = text.slice(0, 60);
  conversation.messages.push({ role: "user", content: text });
  const reply = { role: "assistant", content: "", figures: {} };
  const body = requestBody(conversation.messages);
  conversation.messages.push(reply);
  save();
  drawList();
  drawMessages();

  const node = $("messages").lastElementChild;
  const bodyNode = node.querySelector(".body");
  const figuresNode = node.querySelector(".figures");
  let drawPending = false;
  const draw = () => {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => {
      drawPending = false;
      renderMarkdown(reply.content, bodyNode);
      figuresNode.textContent = figuresText(reply.figures);
      const box = $("messages");
      if (box.scrollHeight - box.scrollTop - box.clientHeight < 120) box.scrollTop = box.scrollHeight;
    });
  };

  const controller = new AbortController();
  running = { controller };
  setRunning(true);
  const started = performance.now();
  let first = null;
  let last = null;
  let deltas = 0;
  try {
    const response = await apiFetch("/v1/chat/completions", {
      method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" },
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorText(response));
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = takeEvents(buffer + decoder.decode(value, { stream: true }), (data) => {
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        const choice = chunk.choices && chunk.choices[0];
        if (choice && choice.delta && choice.delta.content) {
          const now = performance.now();
          if (first === null) {
            first = now;
            reply.figures.ttft_s = (now - started) / 1000;
          }
          last = now;
          deltas++;
          reply.content += choice.delta.content;
        }
        if (choice && choice.finish_reason) reply.figures.finish_reason = choice.finish_reason;
        if (chunk.usage) {
          reply.figures.prompt_tokens = chunk.usage.prompt_tokens;
          reply.figures.completion_tokens = chunk.usage.completion_tokens;
          reply.figures.cached_tokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
          if (first !== null && last > first && chunk.usage.completion_tokens > 1)
            reply.figures.tokens_per_s = (chunk.usage.completion_tokens - 1) / ((last - first) / 1000);
        }
        draw();
      });
    }
  } catch (e) {
    if (e.name === "AbortError") {
      reply.figures.stopped = true;
      reply.figures.num_deltas = deltas;
      if (deltas > 1) reply.figures.tokens_per_s = (deltas - 1) / ((last - first) / 1000);
    } else {
      reply.error = true;
      reply.content = (reply.content ? reply.content + "\n\n" : "") + "Error: " + e.message;
    }
  } finally {
    controller.abort();  // after an error, the rest of the stream is not read
    running = null;
    setRunning(false);
    save();
    if (conversation === current) drawMessages();
  }
}

function setRunning(on) {
  $("send").hidden = on;
  $("stop").hidden = !on;
  document.body.classList.toggle("generating", on);
}

export function setUpChat(modelName) {
  model = modelName;
  load();
  bindSettings();
  if (conversations.length) current = conversations[0];
  else newConversation();
  drawList();
  drawMessages();
  $("new-chat").addEventListener("click", () => {
    if (!running) newConversation();
    $("conversations").classList.remove("open");
  });
  $("send").addEventListener("click", send);
  $("stop").addEventListener("click", () => running && running.controller.abort());
  $("chat-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("toggle-settings").addEventListener("click", () => { $("settings").hidden = !$("settings").hidden; });
  $("toggle-conversations").addEventListener("click", () => $("conversations").classList.toggle("open"));
}

export function setChatModel(modelName) {
  model = modelName;
}
