// Two sessions side by side: totals, per-turn metrics and the chosen turn's waterfall
// on a shared time scale.

import { h, ms, num, shortId } from "./dom.js";
import { groupAudits } from "./history.js";
import { buildTimeline, renderWaterfall } from "./timeline.js";

export function sessionOption(session) {
  const title = session.title || "Untitled";
  const short = title.length > 34 ? `${title.slice(0, 33)}…` : title;
  const label = `${session.mode || "?"} · ${short} · ${shortId(session.id)}`;
  return h("option", { value: session.id }, label);
}

export function renderCompare(columns, records, turnIndex, onSelect) {
  const models = records.map((record) => record && modelFor(record, turnIndex));
  const scale = Math.max(1, ...models.filter(Boolean).map((model) => model.total));
  columns.forEach((column, index) => {
    const record = records[index];
    if (!record) {
      column.replaceChildren(h("p", { class: "empty" }, "Pick a session."));
      return;
    }
    const chart = h("div", { class: "waterfall-wrap" });
    const other = index === 1 ? records[0] : null;
    const parts = [header(record), totals(record), other ? deltas(record, other) : null,
      turnTable(record, turnIndex), h("h3", { class: "section-title" }, `Turn ${turnIndex} timeline`), chart];
    column.replaceChildren(...parts.filter(Boolean));
    renderWaterfall(chart, models[index], { scale, onSelect });
  });
}

function modelFor(record, turnIndex) {
  const audits = groupAudits(record.audit || []).get(turnIndex) || [];
  return buildTimeline(audits, record.calls || [], turnIndex);
}

function header(record) {
  const session = record.session;
  const chat = session.config?.chat_agent || {};
  return h("div", { class: "compare-title" },
    h("h2", {}, session.title || "Untitled session"),
    h("div", { class: "compare-sub" },
      h("span", { class: `badge mode-${session.mode}` }, session.mode || "?"),
      h("span", { class: "mono" }, shortId(session.id)),
      h("span", {}, `model ${chat.model || "?"}`)));
}

function totals(record) {
  const usage = record.usage || {};
  const metric = (label, value) => h("div", { class: "metric" }, h("div", { class: "metric-value" }, value), h("div", { class: "metric-label" }, label));
  return h("div", { class: "metrics" },
    metric("turns", num(usage.turn_count)),
    metric("wall time", ms(usage.turn_wall_time_ms)),
    metric("tokens", num(usage.total_tokens)),
    metric("cached", num(usage.cached_tokens)),
    metric("model calls", num(usage.model_calls)),
    metric("tools", num(usage.tool_count)),
    metric("fallbacks", num(usage.fallback_count)));
}

function deltas(record, base) {
  const b = record.usage || {};
  const a = base.usage || {};
  const delta = (label, key, format) => {
    const diff = (b[key] ?? 0) - (a[key] ?? 0);
    const sign = diff > 0 ? "+" : diff < 0 ? "−" : "±";
    return h("span", { class: `delta ${diff > 0 ? "up" : diff < 0 ? "down" : ""}` }, `${label} ${sign}${format(Math.abs(diff))}`);
  };
  return h("div", { class: "deltas" }, h("span", { class: "delta-label" }, "vs A"),
    delta("wall", "turn_wall_time_ms", ms), delta("tokens", "total_tokens", num),
    delta("model calls", "model_calls", num), delta("tools", "tool_count", num));
}

function turnTable(record, selected) {
  const firstTtft = new Map();
  for (const call of record.calls || []) {
    if (call.call_kind === "chat" && call.round_index === 1) firstTtft.set(call.turn_index, call.ttft_ms);
  }
  const rows = (record.turns || []).map((turn) =>
    h("tr", { class: turn.turn_index === selected ? "selected" : "" },
      h("td", { class: "num" }, String(turn.turn_index)),
      h("td", { class: "clip", title: turn.user_message || "" }, turn.user_message || ""),
      h("td", { class: "num" }, ms(turn.turn_wall_time_ms)),
      h("td", { class: "num" }, ms(firstTtft.get(turn.turn_index))),
      h("td", { class: "num" }, num(turn.round_count)),
      h("td", { class: "num" }, num(turn.total_tokens)),
      h("td", { class: "num" }, num(turn.tool_count))));
  return h("table", { class: "turn-table" },
    h("thead", {}, h("tr", {},
      h("th", { class: "num" }, "#"), h("th", {}, "User"), h("th", { class: "num" }, "Wall"),
      h("th", { class: "num", title: "provider time to first chunk, round 1" }, "TTFT"),
      h("th", { class: "num" }, "Rounds"), h("th", { class: "num" }, "Tokens"), h("th", { class: "num" }, "Tools"))),
    h("tbody", {}, rows));
}
