// The Explain view: per turn, three columns — what the model saw (each request as
// sent), what is stored (transcript rows, tool batches), what the user was shown —
// with the differences between them and the repairs a restore applied. Text only.

import { api } from "./api.js";
import { $, h } from "./dom.js";

const DIFFERENCES = {
  shown_not_stored: (d) => `shown but not stored (round ${d.round_index}): ${d.text}`,
  stored_not_committed: (d) => `stored row #${d.seq} is ${d.state}, not committed`,
  stored_not_sent_next_turn: (d) => `stored row #${d.seq} (${d.role}) was not sent in the next turn`,
  sent_not_stored: (d) => `sent to the model but not in the transcript (${d.name || d.role}): ${d.text}`,
};

export async function openExplain(sessionId) {
  const dialog = $("#explain-dialog");
  const body = $("#explain-body");
  body.replaceChildren(h("p", { class: "empty" }, "loading…"));
  if (!dialog.open) dialog.showModal();
  const { turns } = await api(`/api/sessions/${encodeURIComponent(sessionId)}/explain`);
  body.replaceChildren(...turns.map(explainTurn));
  if (!turns.length) body.append(h("p", { class: "empty" }, "No turn yet."));
}

function explainTurn(turn) {
  const column = (title, ...items) => h("div", { class: "explain-col" }, h("h3", {}, title), ...items);
  return h("section", { class: "explain-turn", dataset: { turn: String(turn.turn_index) } },
    h("h2", {}, `Turn ${turn.turn_index} · ${turn.status}`),
    h("div", { class: "explain-cols" },
      column("What the model saw", ...turn.model_saw.map(request)),
      column("What is stored", ...turn.stored.messages.map((m) => line(`#${m.seq} ${m.role}${m.state && m.state !== "committed" ? ` [${m.state}]` : ""}`, m.content)),
        ...turn.stored.batches.map((b) => line(`batch round ${b.round_index} ${b.state}`, b.calls.map((c) => `${c.name} ${c.state}`).join(", ")))),
      column("What the user was shown", ...turn.shown.map(shown))),
    h("ul", { class: "explain-diffs" },
      ...turn.differences.map((d) => h("li", { class: "diff", dataset: { kind: d.kind } }, "≠ ", (DIFFERENCES[d.kind] || JSON.stringify)(d))),
      ...turn.repairs.map((r) => h("li", { class: "repair", dataset: { kind: r.kind } }, "⚒ restore: ", repair(r))),
      turn.differences.length || turn.repairs.length ? null : h("li", { class: "same" }, "= no differences, no repairs")));
}

function request(entry) {
  const offered = entry.tools.length ? entry.tools : entry.events;
  return h("div", { class: "explain-request" },
    h("div", { class: "call-label" }, `${entry.audit} · round ${entry.round_index}`),
    ...entry.messages.map((m) => line(m.name ? `${m.role}/${m.name}` : m.role, m.content)),
    offered.length ? line("offered", offered.join(", ")) : null);
}

function shown(entry) {
  if (entry.failure) return line("✗ " + entry.failure.reason, entry.failure.message);
  return h("div", {},
    line(`round ${entry.round_index}`, entry.text),
    ...entry.tools.map((tool) => line("⚡ " + (tool.name || "tool"), `${tool.status} · ${tool.event_id}`)));
}

function repair(entry) {
  if (entry.kind === "repaired_row") return `row #${entry.seq} ${entry.problem} → ${entry.repair}`;
  return `recovered call ${entry.event_name || entry.event_id}: ${entry.outcome || entry.state || ""}`;
}

function line(label, text) {
  return h("div", { class: "explain-line" }, h("b", {}, label + ": "), String(text ?? ""));
}
