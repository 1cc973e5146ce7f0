// The page's start: the key dialog, the three tabs (the address's #hash names
// the open one, so a reload or a link keeps it), and the served model's name,
// or a menu of them when the server serves several (the choice is kept).
import { apiJson, setUpKeyDialog } from "./api.js";
import { setChatModel, setUpChat } from "./chat.js";
import { $, el } from "./dom.js";
import { setUpLive, showLive } from "./live.js";
import { setUpPlanner, showPlanner } from "./planner.js";

const TABS = ["chat", "planner", "live"];

function showTab(name) {
  if (!TABS.includes(name)) name = "chat";
  for (const tab of TABS) {
    $(tab).hidden = tab !== name;
    $("tab-" + tab).setAttribute("aria-selected", String(tab === name));
  }
  showPlanner(name === "planner");
  showLive(name === "live");
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
}

const PICKED = "folio.model";

async function loadModelName() {
  try {
    const models = await apiJson("/v1/models");
    const ids = (models.data || []).map((m) => m.id);
    const kept = localStorage.getItem(PICKED);
    const name = ids.includes(kept) ? kept : ids[0] || "";
    $("model-name").textContent = name;
    setChatModel(name);
    if (ids.length < 2) return;
    const pick = $("model-pick");
    // A model not loaded yet loads when the first message names it.
    pick.replaceChildren(...models.data.map((m) => el("option", {
      value: m.id,
      text: m.status && m.status.value !== "loaded" ? `${m.id} (${m.status.value})` : m.id,
    })));
    pick.value = name;
    pick.hidden = false;
    $("model-name").hidden = true;
    pick.addEventListener("change", () => {
      localStorage.setItem(PICKED, pick.value);
      $("model-name").textContent = pick.value;
      setChatModel(pick.value);
    });
  } catch (e) {
    $("model-name").textContent = "(" + e.message + ")";
  }
}

setUpKeyDialog();
setUpChat("");
setUpPlanner();
setUpLive();
for (const tab of TABS) $("tab-" + tab).addEventListener("click", () => showTab(tab));
window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));
showTab(location.hash.slice(1));
loadModelName();
