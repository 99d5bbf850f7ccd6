// Two sessions side by side: totals, per-turn metrics and deltas, and the chosen turn's
// waterfall on a shared time scale. Cold-start calls are flagged when the record says so
// (`cold_start` on a call); cost shows when the record has it, "unknown" otherwise, and
// tokens say "not reported" for calls whose provider sent no usage.

import { h, ms, num, shortId } from "./dom.js";
import { cachedText, fullyReported, tokensText, usd } from "./figures.js";
import { groupAudits } from "./records.js";
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
    const parts = [header(record), totals(record), other ? deltas(record, other, turnIndex) : null,
      turnTable(record, turnIndex), h("h3", { class: "section-title" }, `Turn ${turnIndex} timeline`), chart];
    column.replaceChildren(...parts.filter(Boolean));
    renderWaterfall(chart, models[index], { scale, onSelect: (item) => onSelect(item, record.session.id) });
  });
}

function modelFor(record, turnIndex) {
  const audits = groupAudits(record.audit || []).get(turnIndex) || [];
  const turn = (record.records || []).find((entry) => entry.turn_index === turnIndex) || null;
  return buildTimeline(audits, turn);
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
    ...usageFigures(usage).map(([label, value]) => metric(label, value)),
    metric("cost", usd(usage.cost)));
}

// What a usage summary row shows, a session's or a turn's: [label, text] pairs.
export function usageFigures(row) {
  return [
    ["wall time", ms(row.turn_wall_time_ms)],
    ["tokens", tokensText(row)],
    ["cached", cachedText(row)],
    ["model calls", num(row.model_calls)],
    ["tools", num(row.tool_count)],
    ["fallbacks", num(row.fallback_count)],
  ];
}

// A turn's time to first token: its first round's chat call's, among a session's calls.
export function firstTtft(summary, turnIndex) {
  const call = (summary?.calls || []).find((entry) => entry.call_kind === "chat" && entry.round_index === 1 && entry.turn_index === turnIndex);
  return call?.ttft_ms ?? null;
}

function coldTurns(record) {
  return new Set((record.calls || []).filter((call) => call.cold_start === true).map((call) => call.turn_index));
}

// Deltas of turn `turnIndex` of B against the same turn of A (not whole-session totals,
// which mean nothing when the sessions ran different numbers of turns).
function deltas(record, base, turnIndex) {
  const countA = (base.turns || []).length;
  const countB = (record.turns || []).length;
  const note = countA !== countB
    ? h("div", { class: "count-note" }, `A has ${countA} turn${countA === 1 ? "" : "s"}, B has ${countB}: deltas compare turn by turn.`)
    : null;
  const b = (record.turns || []).find((turn) => turn.turn_index === turnIndex);
  const a = (base.turns || []).find((turn) => turn.turn_index === turnIndex);
  if (!a || !b) {
    return h("div", { class: "deltas" }, note, h("span", { class: "delta-label" }, `turn ${turnIndex}`),
      h("span", {}, `only in ${a ? "A" : b ? "B" : "neither"}: no delta`));
  }
  const delta = (label, valueB, valueA, format) => {
    if (typeof valueB !== "number" || typeof valueA !== "number") return h("span", { class: "delta" }, `${label} –`);
    const diff = valueB - valueA;
    const sign = diff > 0 ? "+" : diff < 0 ? "−" : "±";
    return h("span", { class: `delta ${diff > 0 ? "up" : diff < 0 ? "down" : ""}` }, `${label} ${sign}${format(Math.abs(diff))}`);
  };
  const coldIn = [["A", base], ["B", record]].filter(([, side]) => coldTurns(side).has(turnIndex)).map(([name]) => name);
  const coldNote = coldIn.length
    ? h("div", { class: "cold cold-note" }, `cold start in ${coldIn.join(" and ")}: turn ${turnIndex}'s TTFT includes opening the provider connection`)
    : null;
  return h("div", { class: "deltas" }, note, coldNote, h("span", { class: "delta-label" }, `turn ${turnIndex} vs A`),
    delta("wall", b.turn_wall_time_ms, a.turn_wall_time_ms, ms),
    delta("TTFT", firstTtft(record, turnIndex), firstTtft(base, turnIndex), ms),
    fullyReported(a) && fullyReported(b)
      ? delta("tokens", b.total_tokens, a.total_tokens, num)
      : h("span", { class: "delta", title: "a call of this turn reported no usage" }, "tokens – (not reported)"),
    delta("model calls", b.model_calls, a.model_calls, num),
    delta("tools", b.tool_count, a.tool_count, num));
}

function turnTable(record, selected) {
  const cold = coldTurns(record);
  const rows = (record.turns || []).map((turn) =>
    h("tr", { class: turn.turn_index === selected ? "selected" : "" },
      h("td", { class: "num" }, String(turn.turn_index)),
      h("td", { class: "clip", title: turn.user_message || "" }, turn.user_message || ""),
      h("td", { class: "num" }, ms(turn.turn_wall_time_ms)),
      h("td", { class: "num" }, ms(firstTtft(record, turn.turn_index)),
        cold.has(turn.turn_index) ? h("span", { class: "cold", title: "its first model call opened the provider connection (the first call of the server process or of the session's own endpoint)" }, " cold") : null),
      h("td", { class: "num" }, num(turn.round_count)),
      h("td", { class: "num" }, tokensText(turn)),
      h("td", { class: "num" }, num(turn.tool_count)),
      h("td", { class: "num" }, usd(turn.cost))));
  return h("table", { class: "turn-table" },
    h("thead", {}, h("tr", {},
      h("th", { class: "num" }, "#"), h("th", {}, "User"), h("th", { class: "num" }, "Wall"),
      h("th", { class: "num", title: "provider time to first chunk, round 1" }, "TTFT"),
      h("th", { class: "num" }, "Rounds"), h("th", { class: "num" }, "Tokens"), h("th", { class: "num" }, "Tools"),
      h("th", { class: "num" }, "Cost"))),
    h("tbody", {}, rows));
}
