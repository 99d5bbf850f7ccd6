// The Compare tab: pick two sessions and a turn; records are cached per update time.

import { api } from "./api.js";
import { renderCompare, sessionOption } from "./compare.js";
import { $, h, toast } from "./dom.js";
import { renderDetail } from "./timeline.js";

export async function loadCompare(state, refreshList) {
  try {
    if (refreshList) await fillCompareSelects(state);
    const ids = [$("#compare-a").value, $("#compare-b").value];
    const records = await Promise.all(ids.map((id) => (id ? compareRecord(state, id) : null)));
    const turnSelect = $("#compare-turn");
    const maxTurn = Math.max(1, ...records.filter(Boolean).map((record) => (record.turns || []).length));
    const chosen = Math.min(Number(turnSelect.value) || 1, maxTurn);
    turnSelect.replaceChildren(...Array.from({ length: maxTurn }, (_, i) => h("option", { value: String(i + 1), selected: i + 1 === chosen }, `turn ${i + 1}`)));
    renderCompare([$("#compare-col-a"), $("#compare-col-b")], records, chosen, showCompareDetail);
  } catch (error) {
    toast(String(error.message), "error");
  }
}

function showCompareDetail(item, sessionId) {
  const panel = $("#compare-detail");
  panel.hidden = false;
  renderDetail(panel, item, sessionId);
  panel.prepend(h("button", { type: "button", class: "ghost small detail-close", onclick: () => { panel.hidden = true; } }, "Close"));
}

async function fillCompareSelects(state) {
  const { sessions } = await api("/api/sessions");
  state.sessions = sessions;
  for (const [selector, mode, fallback] of [["#compare-a", "dual_agent", 0], ["#compare-b", "chat_agent_tools", 1]]) {
    const select = $(selector);
    const previous = select.value;
    select.replaceChildren(h("option", { value: "" }, "— choose a session —"), ...sessions.map(sessionOption));
    const preferred = sessions.find((s) => s.mode === mode) || sessions[fallback];
    select.value = sessions.some((s) => s.id === previous) ? previous : preferred?.id || "";
  }
}

async function compareRecord(state, id) {
  const summary = state.sessions.find((session) => session.id === id);
  const key = `${id}@${summary?.updated_at}`;
  if (!state.compareCache.has(key)) state.compareCache.set(key, await api(`/api/sessions/${encodeURIComponent(id)}`));
  return state.compareCache.get(key);
}
