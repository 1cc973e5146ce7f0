// The server's API as the page calls it: the API key (asked for when the
// server answers 401, kept in localStorage) goes with every request.
import { $ } from "./dom.js";

const KEY = "folio.apiKey";
let waitingForKey = null;
let dismissed = false;  // closed without a key: ask again only when the Key button is pressed

export function apiKey() {
  return localStorage.getItem(KEY) || "";
}

function headers(extra) {
  const h = Object.assign({}, extra);
  const key = apiKey();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

// Opens the key dialog; resolves once a key is saved (or the dialog closed).
export function askForKey() {
  if (waitingForKey) return waitingForKey;
  const dialog = $("key-dialog");
  $("key-input").value = apiKey();
  waitingForKey = new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      waitingForKey = null;
      resolve();
    }, { once: true });
  });
  dialog.showModal();
  $("key-input").focus();
  return waitingForKey;
}

export function setUpKeyDialog() {
  const dialog = $("key-dialog");
  $("key-save").addEventListener("click", () => {
    localStorage.setItem(KEY, $("key-input").value.trim());
    dismissed = false;
    dialog.close("saved");
  });
  dialog.addEventListener("close", () => {
    if (dialog.returnValue !== "saved") dismissed = true;
    dialog.returnValue = "";
  });
  $("key-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter") $("key-save").click();
  });
  $("key-forget").addEventListener("click", () => {
    localStorage.removeItem(KEY);
    $("key-input").value = "";
    dialog.close();
  });
  $("key-button").addEventListener("click", () => askForKey());
}

// The error message of a failed response: OpenAI's {"error": {"message"}} shape, or the status.
export async function errorText(response) {
  const text = await response.text();
  try {
    return JSON.parse(text).error.message;
  } catch {
    return `${response.status} ${response.statusText}` + (text ? `: ${text.slice(0, 300)}` : "");
  }
}

// fetch() with the key; a 401 asks for a key once and tries again.
export async function apiFetch(path, options = {}) {
  const send = () => fetch(path, Object.assign({}, options, { headers: headers(options.headers) }));
  let response = await send();
  if (response.status === 401 && !dismissed) {
    await askForKey();
    response = await send();
  }
  return response;
}

// GET or POST JSON; throws Error with the server's message.
export async function apiJson(path, body, signal) {
  const options = body === undefined ? { signal } :
    { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" }, signal };
  const response = await apiFetch(path, options);
  if (!response.ok) throw new Error(await errorText(response));
  return response.json();
}
