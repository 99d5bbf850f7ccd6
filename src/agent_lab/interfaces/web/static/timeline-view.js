// The Timeline tab: the chosen turn's waterfall, its summary (status, wall, rounds,
// tokens, TTFT, cost) and the detail panel of the bar clicked.

import { firstTtft, usageFigures } from "./compare.js";
import { $, h, ms, num, shortId } from "./dom.js";
import { usd } from "./figures.js";
import { budgetNotice, budgetSpent } from "./feedback.js";
import { buildTimeline, renderDetail, renderWaterfall } from "./timeline.js";

export function renderTimeline(state) {
  const turns = [...state.audits.keys()].filter((turn) => turn > 0).sort((a, b) => a - b);
  const select = $("#timeline-turn");
  const latest = turns[turns.length - 1] ?? null;
  const follow = state.timelineTurn === null || state.timelineTurn === Number(select.dataset.latest);
  if (follow) state.timelineTurn = latest;
  select.dataset.latest = String(latest);
  select.replaceChildren(...turns.map((turn) => h("option", { value: String(turn), selected: turn === state.timelineTurn }, `turn ${turn}`)));
  $("#timeline-session").textContent = state.sessionId ? `· ${state.record?.session?.title || shortId(state.sessionId)}` : "";
  const shownFor = `${state.sessionId ?? ""}:${state.timelineTurn ?? ""}`;
  if ($("#detail").dataset.for !== shownFor) {
    // another session or turn: the previous bar's detail no longer applies
    renderDetail($("#detail"), null);
    $("#detail").dataset.for = shownFor;
  }
  const audits = state.audits.get(state.timelineTurn) || [];
  const model = buildTimeline(audits, state.records.get(state.timelineTurn) || null);
  renderWaterfall($("#timeline"), model, { onSelect: (item) => renderDetail($("#detail"), item, state.sessionId) });
  const summary = turnSummary(state, state.timelineTurn);
  if (summary) $("#timeline").prepend(summary);
  if (!state.sessionId) $("#timeline").replaceChildren(h("p", { class: "empty" }, "Start or open a session to see its timeline."));
}

function turnSummary(state, turnIndex) {
  const turn = (state.record?.turns || []).find((entry) => entry.turn_index === turnIndex);
  if (!turn) return null;
  const chip = (label, value) => h("span", { class: "chip" }, h("b", {}, label), " ", value);
  return h("div", { class: "turn-summary" },
    h("div", { class: "turn-user", title: turn.user_message || "" }, turn.user_message || ""),
    h("div", { class: "stats" },
      chip("status", turn.status || "running"),
      chip("rounds", num(turn.round_count)),
      ...usageFigures(turn).map(([label, value]) => chip(label, value)),
      chip("TTFT", ms(firstTtft(state.record, turnIndex))),
      chip("cost", usd(turn.cost))),
    budgetLine(state, turnIndex));
}

function budgetLine(state, turnIndex) {
  const spent = (state.audits.get(turnIndex) || []).find((audit) => audit.event === "chat_round_started" && budgetSpent(audit.details || {}));
  return spent ? h("div", { class: "count-note" }, budgetNotice(spent.details)) : null;
}
