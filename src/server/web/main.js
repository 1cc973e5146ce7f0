// The page's start: the key dialog, the three tabs (the address's #hash names
// the open one, so a reload or a link keeps it), and the served model's name.
import { apiJson, setUpKeyDialog } from "./api.js";
import { setChatModel, setUpChat } from "./chat.js";
import { $ } from "./dom.js";
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

async function loadModelName() {
  try {
    const models = await apiJson("/v1/models");
    const name = models.data && models.data.length ? models.data[0].id : "";
    $("model-name").textContent = name;
    setChatModel(name);
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
