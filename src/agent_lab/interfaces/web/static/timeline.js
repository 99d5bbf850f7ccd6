// The turn waterfall: chat rounds, event-agent work, tool executions and argument
// calls laid out on the turn's `turn_elapsed_ms` clock. Pure model + DOM renderer.
// What a bar's detail says of a call (its arguments and how they were resolved, its
// status, result and failure reason) comes from the turn record, live as reopened;
// the audits give the clock and the requests as sent.

import { fullAudit, isDeferred } from "./deferred.js";
import { h, ms, pretty } from "./dom.js";
import { ignoredEvents } from "./records.js";

// Session-level records share the first or last turn's clock but are not turn work.
const SESSION_EVENTS = new Set(["session_started", "session_finished"]);

const MARKERS = {
  turn_started: "turn started",
  event_policy_decision: "policy decision",
  terminal_completed: "terminal",
  turn_completed: "turn completed",
};

export function buildTimeline(audits, record = null) {
  const items = [];
  const markers = [];
  const at = (audit) => audit.details?.turn_elapsed_ms ?? 0;
  let end = 0;
  for (const audit of audits) if (!SESSION_EVENTS.has(audit.event)) end = Math.max(end, at(audit));
  items.push(...chatRounds(audits, at, end, record));
  items.push(...agentSpans(audits, at, end));
  items.push(...toolBars(audits, record, at, end));
  items.push(...argumentCalls(record));
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

function chatRounds(audits, at, end, record) {
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
    const round = (record?.rounds || []).find((entry) => entry.round_index === r);
    const ignored = round ? ignoredEvents(round) : [];
    item.details = compact({ ignored_events: ignored.length ? ignored : null, round, chat_agent_request: request, chat_agent_response: responses.get(r), chat_round_started: started, chat_round_finished: stop });
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

// One bar per tool execution of the record: finished ones end at their batch's
// results (and last their latency), running ones grow with the turn. A call that
// finished in a batch the turn's end cut off lasts its latency from its start; one
// still running then lasts until the turn ended.
function toolBars(audits, record, at, end) {
  const finished = new Map();
  for (const audit of audits.filter((entry) => entry.event === "event_batch_results")) {
    for (const result of audit.details.results || []) finished.set(`${audit.details.round_index}:${result.event_id}`, { audit, result });
  }
  const events = new Map((record?.events || []).map((event) => [`${event.round_index}:${event.event_id}`, event]));
  const entries = record?.entries || [];
  return (record?.tool_executions || []).filter((tool) => !tool.deduplicated_from).map((tool) => {
    const key = `${tool.round_index}:${tool.event_id}`;
    const done = finished.get(key);
    const started = entries[tool.seq - 1]?.at_ms ?? 0;
    const measured = tool.latency_ms ?? null;
    const stop = done ? at(done.audit) : measured === null ? end : started + measured;
    const begin = done ? Math.max(0, stop - (measured ?? 0)) : started;
    const item = bar("tool", tool.event_name, begin, stop, 2);
    item.status = tool.status === "succeeded" || tool.status === "running" ? "success" : tool.status;
    item.live = tool.status === "running";
    item.details = compact({
      arguments: shownArguments(tool, events.get(key)),
      result: tool.result ?? tool.result_capped,
      execution: tool,
      event_batch_results: done?.audit,
    });
    return item;
  });
}

const RESOLVED_BY = {
  model: "written by the chat model", resolver: "the tool's argument resolver",
  argument_fallback: "an argument fallback call", argument_generation: "an argument generation call",
  empty: "no arguments needed", not_resolved: "not resolved",
};

// The arguments a call ran with, and how they were resolved (dual_agent: by the event
// agent, after the event was shown without any).
export function shownArguments(tool, event) {
  const values = tool?.arguments ?? event?.arguments ?? null;
  const how = event?.resolved_by;
  if (!how) return values ?? "not resolved yet (the event agent fills them in)";
  const via = event.argument_call || event.resolver;
  return { arguments: values, resolved_by: RESOLVED_BY[how] || how, ...(via ? { via } : {}) };
}

function argumentCalls(record) {
  const events = new Map((record?.events || []).map((event) => [event.event_id, event]));
  return (record?.model_calls || [])
    .filter((call) => call.role === "argument_fallback" || call.role === "argument_generation")
    .map((call) => {
      const event = events.get(call.event_id);
      const start = call.started_ms ?? 0;
      const stop = call.ended_ms ?? start + (call.timings?.latency_ms ?? 0);
      const kind = call.role === "argument_fallback" ? "fallback" : "arguments";
      const item = bar("fallback", `${kind} · ${event?.event_name ?? call.event_id}`, start, stop, 3);
      item.status = call.status === "failed" ? "failed" : "success";
      item.details = compact({ call, arguments: shownArguments(null, event) });
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

// `sessionId`: the session the item's audits belong to, to fetch a request's messages
// that a stored session's trail leaves out (`deferred`).
export function renderDetail(container, item, sessionId = null) {
  if (!item) {
    container.replaceChildren(h("div", { class: "detail-empty" }, "Click a bar to inspect what was sent and received."));
    return;
  }
  const sections = Object.entries(item.details || {}).map(([name, value], index) =>
    h("details", { class: "detail-section", open: index < 2 },
      h("summary", {}, name),
      detailText(value, sessionId)));
  container.replaceChildren(
    h("div", { class: "detail-head" },
      h("h3", {}, item.label),
      h("div", { class: "detail-times" },
        `${ms(item.start)} → ${ms(item.end)} · ${ms(item.end - item.start)}`,
        item.wait ? ` · first token after ${ms(item.wait.end - item.wait.start)}` : "")),
    ...sections);
}

function detailText(value, sessionId) {
  if (!isDeferred(value) || !sessionId) return h("pre", {}, pretty(value && value.details ? value.details : value));
  const pre = h("pre", { "aria-busy": "true" }, "loading the request as sent…");
  fullAudit(sessionId, value)
    .then((full) => { pre.textContent = pretty(full.details); })
    .catch((error) => { pre.textContent = `could not load the request: ${error.message || error}`; })
    .finally(() => pre.removeAttribute("aria-busy"));
  return pre;
}
