// The sessions table: status and usage per session, open (to read or continue),
// export and delete.

import { h, ms, num, shortId, when } from "./dom.js";
import { cachedText, tokensText, usd } from "./figures.js";
import { modeBadge, ranIn } from "./modes.js";

export function renderSessions(body, sessions, actions) {
  body.replaceChildren(...sessions.map((session) => sessionRow(session, actions)));
}

function sessionRow(session, actions) {
  const usage = session.usage || {};
  const button = (label, handler, extra = {}) =>
    h("button", { type: "button", class: "ghost small", onclick: () => handler(session), ...extra }, label);
  const status = session.status || "unknown";
  const failed = session.failed_turns ? ` · ${session.failed_turns} failed or cancelled turn${session.failed_turns === 1 ? "" : "s"}` : "";
  return h("tr", { dataset: { session: session.id, status } },
    h("td", { class: "title-cell" },
      h("div", { class: "session-title", dir: "auto", title: session.title || "" }, session.title || "Untitled session"),
      h("div", { class: "session-id mono", title: session.id }, shortId(session.id))),
    h("td", {}, h("span", { class: `status status-${status}`, title: `last turn: ${status}${failed}` }, status),
      session.live ? h("span", { class: "live-dot", title: liveTitle(session), "aria-label": "live" }) : null),
    h("td", { class: "opt" }, modeBadge(session)),
    h("td", { class: "num", dataset: { unit: session.turn_count === 1 ? "turn" : "turns" } }, num(session.turn_count)),
    h("td", { class: "num opt", dataset: { figure: "tokens" } }, tokensText(usage)),
    h("td", { class: "num opt", dataset: { figure: "cached" } }, cachedText(usage)),
    h("td", { class: "num opt" }, num(usage.tool_count)),
    h("td", { class: "num opt" }, num(usage.fallback_count)),
    h("td", { class: "num opt" }, ms(usage.turn_wall_time_ms)),
    h("td", { class: "num opt", dataset: { figure: "cost" } }, usd(usage.cost)),
    h("td", { class: "when opt" }, when(session.updated_at)),
    h("td", { class: "actions" },
      button("Open", actions.open, { class: "small", title: "Show this session and continue it" }),
      h("span", { class: "export-group", role: "group", "aria-label": "Export" },
        button("JSON", (s) => actions.exportAs(s, "json"), { title: "Export as JSON" }),
        button("JSONL", (s) => actions.exportAs(s, "jsonl"), { title: "Export as JSON Lines" })),
      button("Delete", actions.remove, { class: "ghost small danger", disabled: session.live, title: session.live ? "Live sessions cannot be deleted" : "Delete" })));
}

function liveTitle(session) {
  if (!session.live_elsewhere) return "live: this server is running this session";
  return `live in another process: ${session.held_by || "another runtime"} drives this session`;
}

// Whether a session passes the search text and the filter of the sessions table.
export function matches(session, query, filter) {
  const text = `${session.title || ""} ${session.id}`.toLowerCase();
  if (query && !text.includes(query)) return false;
  if (!filter) return true;
  if (filter === "failed") return session.status === "failed" || session.status === "cancelled" || session.failed_turns > 0;
  if (filter === "live") return session.live;
  if (filter === "completed") return session.status === "completed";
  return ranIn(session, filter);
}
