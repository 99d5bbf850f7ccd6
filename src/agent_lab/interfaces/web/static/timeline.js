// The turn waterfall: chat rounds, event-agent work, tool executions and argument
// calls laid out on the turn's `turn_elapsed_ms` clock. Pure model + DOM renderer.

import { h, ms, pretty } from "./dom.js";

// Session-level records share the first or last turn's clock but are not turn work.
const SESSION_EVENTS = new Set(["session_started", "session_finished"]);

const MARKERS = {
  turn_started: "turn started",
  event_policy_decision: "policy decision",
  terminal_completed: "terminal",
  turn_completed: "turn completed",
};

export function buildTimeline(audits, calls = [], turnIndex = null) {
  const items = [];
  const markers = [];
  const at = (audit) => audit.details?.turn_elapsed_ms ?? 0;
  let end = 0;
  for (const audit of audits) if (!SESSION_EVENTS.has(audit.event)) end = Math.max(end, at(audit));
  items.push(...chatRounds(audits, at, end));
  items.push(...agentSpans(audits, at, end));
  items.push(...toolBars(audits, at));
  items.push(...argumentCalls(audits, calls, at, turnIndex));
  for (const audit of audits) {
    if (MARKERS[audit.event]) markers.push({ at: at(audit), label: MARKERS[audit.event], audit });
  }
  items.sort((a, b) => a.start - b.start || a.order - b.order);
  const total = Math.max(end, ...items.map((item) => item.end), 1);
  return { items, markers, total };
}

function byRound(audits, name) {
  const found = new Map();
  for (const audit of audits) if (audit.event === name) found.set(audit.details?.round_index, audit);
  return found;
}

function chatRounds(audits, at, end) {
  const finished = byRound(audits, "chat_round_finished");
  const requests = byRound(audits, "chat_agent_request");
  const firstTokens = byRound(audits, "chat_message_stream_started");
  const responses = byRound(audits, "chat_agent_response");
  return audits.filter((audit) => audit.event === "chat_round_started").map((started) => {
    const r = started.details.round_index;
    const request = requests.get(r);
    const first = firstTokens.get(r) || responses.get(r);
    const stop = finished.get(r);
    const item = bar("chat", `chat round ${r}`, at(started), stop ? at(stop) : end, 0);
    if (request && first) item.wait = { start: at(request), end: at(first) };
    item.live = !stop;
    item.details = compact({ chat_agent_request: request, chat_agent_response: responses.get(r), chat_round_started: started, chat_round_finished: stop });
    return item;
  });
}

function agentSpans(audits, at, end) {
  const spans = [];
  const opened = new Map();
  for (const audit of audits) {
    const scope = audit.details?.scope;
    if (audit.event === "event_agent_request" || audit.event === "event_batch_started") {
      if (!opened.has(scope)) opened.set(scope, { start: audit, parts: {} });
      opened.get(scope).parts[audit.event] = audit;
    } else if (opened.has(scope)) {
      opened.get(scope).parts[audit.event] = audit;
    }
  }
  for (const [scope, span] of opened) {
    const agent = span.parts.event_agent_request;
    const done = span.parts.event_agent_completed || span.parts.provider_tools_completed;
    const round = span.start.details.round_index;
    const label = agent ? `event agent · round ${round}` : `tool batch · round ${round}`;
    const begin = agent || span.start;
    const item = bar("agent", label, at(begin), done ? at(done) : end, 1);
    item.live = !done;
    item.details = { scope, ...span.parts };
    spans.push(item);
  }
  return spans;
}

function toolBars(audits, at) {
  const bars = [];
  for (const audit of audits.filter((entry) => entry.event === "event_batch_results")) {
    const stop = at(audit);
    for (const result of audit.details.results || []) {
      const latency = result.tool_latency_ms ?? 0;
      const item = bar("tool", result.event_name, Math.max(0, stop - latency), stop, 2);
      item.status = result.status;
      const call = callOf(audits, result.event_id);
      item.details = compact({ arguments: call.arguments, result: call.result, status: result, event_batch_results: audit });
      bars.push(item);
    }
  }
  return bars;
}

// The arguments a call ran with and the result it returned, found in the turn's audits:
// the last object `{id: eventId, arguments}` and the `{tool_call_id: eventId, content}` reply.
export function callOf(audits, eventId) {
  const found = { arguments: null, result: null };
  const visit = (value, depth) => {
    if (!value || typeof value !== "object" || depth > 6) return;
    if (Array.isArray(value)) return value.forEach((entry) => visit(entry, depth + 1));
    if (value.id === eventId && value.arguments && typeof value.arguments === "object") {
      const given = Object.keys(value.arguments).length > 0;
      if (given || found.arguments === null) found.arguments = given ? value.arguments : "{} (none in the call; the event agent fills them in)";
    }
    if (value.tool_call_id === eventId && typeof value.content === "string") found.result = value.content;
    for (const entry of Object.values(value)) visit(entry, depth + 1);
  };
  if (eventId) for (const audit of audits) visit(audit.details, 0);
  return found;
}

function argumentCalls(audits, calls, at, turnIndex) {
  const requests = new Map();
  for (const audit of audits) {
    if (audit.event === "event_agent_request") requests.set(audit.details.round_index, audit);
  }
  return calls
    .filter((call) => (call.call_kind === "argument_fallback" || call.call_kind === "argument_generation")
      && (turnIndex === null || call.turn_index === turnIndex))
    .map((call) => {
      const request = requests.get(call.round_index);
      const start = request ? at(request) : 0;
      const kind = call.call_kind === "argument_fallback" ? "fallback" : "arguments";
      const item = bar("fallback", `${kind} · ${call.event_name}`, start, start + (call.latency_ms ?? 0), 3);
      item.details = { call };
      return item;
    });
}

function bar(kind, label, start, end, order) {
  return { kind, label, start, end: Math.max(start, end), order };
}

function compact(object) {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value));
}

export const MIN_BAR_PX = 10;

export function renderWaterfall(container, model, { scale = null, onSelect = null } = {}) {
  const total = scale || model.total;
  const pct = (value) => `${Math.min(100, (value / total) * 100)}%`;
  const rows = model.items.map((item) => waterfallRow(item, pct, onSelect));
  const overlay = h("div", { class: "wf-markers", "aria-hidden": "true" },
    model.markers.map((marker, index) => markerLine(marker, index, pct)));
  const narrow = (container.clientWidth || 800) < 520;
  container.replaceChildren(h("div", { class: "wf" },
    h("div", { class: "wf-row wf-axis" }, h("div", { class: "wf-label" }, "turn_elapsed_ms"), axis(total, pct, narrow ? 3 : 6)),
    h("div", { class: "wf-rows" }, overlay, rows),
    model.markers.length ? markerRow(model.markers, pct) : null),
    markerLegend(model.markers));
  if (!model.items.length) container.append(h("p", { class: "empty" }, "No audit records for this turn yet."));
}

function markerLegend(markers) {
  if (!markers.length) return null;
  return h("div", { class: "wf-markers-legend", "aria-label": "Dashed lines" },
    markers.map((marker, index) => h("span", { class: "wf-marker-key" }, `${index + 1} ${marker.label} · ${ms(marker.at)}`)));
}

function waterfallRow(item, pct, onSelect) {
  const barEl = h("button", {
    type: "button",
    class: `wf-bar wf-${item.kind}${item.live ? " wf-live" : ""}${item.status && item.status !== "success" ? " wf-failed" : ""}`,
    title: `${item.label}: ${ms(item.start)} → ${ms(item.end)} (${ms(item.end - item.start)})`,
    onclick: () => onSelect && onSelect(item),
  });
  barEl.style.setProperty("left", pct(item.start));
  barEl.style.setProperty("width", `max(${MIN_BAR_PX}px, ${pct(item.end - item.start)})`);
  barEl.setAttribute("aria-label", barEl.title);
  if (item.wait) {
    const wait = h("span", { class: "wf-wait" });
    const span = Math.max(1, item.end - item.start);
    wait.style.setProperty("left", `${((item.wait.start - item.start) / span) * 100}%`);
    wait.style.setProperty("width", `${((item.wait.end - item.wait.start) / span) * 100}%`);
    barEl.append(wait);
  }
  return h("div", { class: `wf-row wf-row-${item.kind}` },
    h("div", { class: "wf-label", title: item.label, tabindex: "0" }, h("span", { class: `dot dot-${item.kind}` }), item.label),
    h("div", { class: "wf-track" }, barEl, h("span", { class: "wf-dur" }, ms(item.end - item.start))));
}

function markerLine(marker, index, pct) {
  const line = h("div", { class: "wf-marker", title: `${marker.label} · ${ms(marker.at)}` });
  line.style.setProperty("left", pct(marker.at));
  return line;
}

// The dashed lines' numbers, in their own row under the bars (keyed in the legend).
function markerRow(markers, pct) {
  const badges = markers.map((marker, index) => {
    const badge = h("span", { class: "wf-marker-label", title: `${marker.label} · ${ms(marker.at)}` }, String(index + 1));
    badge.style.setProperty("left", pct(marker.at));
    badge.style.setProperty("top", `${(index % 2) * 12}px`);
    return badge;
  });
  return h("div", { class: "wf-row wf-marker-row" }, h("div", { class: "wf-label" }, "markers"), h("div", { class: "wf-track" }, badges));
}

function axis(total, pct, count = 6) {
  const step = niceStep(total / count);
  const ticks = [];
  for (let value = 0; value <= total + 0.001; value += step) {
    const tick = h("span", { class: "wf-tick" }, ms(value));
    tick.style.setProperty("left", pct(value));
    ticks.push(tick);
  }
  return h("div", { class: "wf-track wf-ticks" }, ticks);
}

function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  for (const factor of [1, 2, 5, 10]) if (power * factor >= raw) return power * factor;
  return power * 10;
}

export function renderDetail(container, item) {
  if (!item) {
    container.replaceChildren(h("div", { class: "detail-empty" }, "Click a bar to inspect what was sent and received."));
    return;
  }
  const sections = Object.entries(item.details || {}).map(([name, value], index) =>
    h("details", { class: "detail-section", open: index < 2 },
      h("summary", {}, name),
      h("pre", {}, pretty(value && value.details ? value.details : value))));
  container.replaceChildren(
    h("div", { class: "detail-head" },
      h("h3", {}, item.label),
      h("div", { class: "detail-times" },
        `${ms(item.start)} → ${ms(item.end)} · ${ms(item.end - item.start)}`,
        item.wait ? ` · first token after ${ms(item.wait.end - item.wait.start)}` : "")),
    ...sections);
}
