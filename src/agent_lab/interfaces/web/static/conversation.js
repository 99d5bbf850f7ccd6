// The conversation view: user turns, streamed assistant text, collapsible tool calls
// with their results, and per-round stats chips. Text only — never HTML.

import { h, ms, num, parseJson, pretty } from "./dom.js";
import { historyTurns } from "./history.js";

export class Conversation {
  constructor(root, emptyHint) {
    this.root = root;
    this.emptyHint = emptyHint;
    this.reset();
  }

  reset() {
    this.root.replaceChildren(this.emptyHint);
    this.emptyHint.hidden = false;
    this.turns = new Map();
    this.calls = new Map();
    this.current = null;
    this.round = null;
  }

  renderRecord(record) {
    for (const turn of historyTurns(record)) {
      this.user(turn.index, turn.user);
      for (const round of turn.rounds) this.renderRound(round);
      if (turn.extra.length) this.delta(turn.extra.join(" "));
      if (turn.status === "failed" || turn.status === "cancelled") this.error(failureText(turn), turn.status);
      this.round = null;
    }
    this.applyRecords(record.records || []);
    this.scroll(true);
  }

  // The turn records know what the tool calls ran with: dual_agent arguments resolved
  // after the event was shown, and how they were resolved.
  applyRecords(records) {
    for (const turn of records) {
      for (const event of turn.events || []) {
        const call = this.calls.get(event.event_id);
        if (call) setArguments(call, event.arguments, event.resolved_by);
      }
    }
  }

  renderRound(round) {
    this.startRound(round.index);
    if (round.text) this.delta(round.text);
    for (const event of round.events) this.event(event);
    for (const [id, message] of round.results) this.toolResult({ ...message, tool_call_id: id });
    if (round.stats) this.stats(round.stats);
  }

  user(index, text) {
    const turn = this.turn(index);
    turn.el.prepend(h("div", { class: "msg user" },
      h("div", { class: "msg-meta" }, `You · turn ${index}`),
      h("div", { class: "msg-text" }, text || "(empty)")));
    this.scroll();
  }

  turn(index) {
    if (!this.turns.has(index)) {
      this.emptyHint.hidden = true;
      const el = h("section", { class: "turn", dataset: { turn: String(index) } });
      this.root.append(el);
      this.turns.set(index, { index, el, rounds: new Map() });
    }
    this.current = this.turns.get(index);
    return this.current;
  }

  startRound(index) {
    const turn = this.current || this.turn(1);
    if (!turn.rounds.has(index)) {
      const text = document.createTextNode("");
      const bubble = h("div", { class: "msg assistant" },
        h("div", { class: "msg-meta" }, `Assistant · round ${index}`),
        h("div", { class: "msg-text" }, text));
      bubble.hidden = true;
      const calls = h("div", { class: "calls" });
      const el = h("div", { class: "round" }, bubble, calls);
      turn.el.append(el);
      turn.rounds.set(index, { index, el, bubble, text, calls });
    }
    this.round = turn.rounds.get(index);
    return this.round;
  }

  delta(content) {
    const round = this.round || this.startRound(this.nextRoundIndex());
    round.bubble.hidden = false;
    round.bubble.classList.add("streaming");
    round.text.appendData(content);
    this.scroll();
  }

  nextRoundIndex() {
    const turn = this.current || this.turn(1);
    return Math.max(0, ...turn.rounds.keys()) + 1;
  }

  event(event) {
    const round = this.round || this.startRound(this.nextRoundIndex());
    const call = toolCall(event);
    this.calls.set(event.id, call);
    round.calls.append(call.el);
    this.scroll();
  }

  toolResult(message) {
    let call = this.calls.get(message.tool_call_id);
    if (!call) {
      call = toolCall({ id: message.tool_call_id, name: message.name || "tool", arguments: {} });
      this.calls.set(message.tool_call_id, call);
      (this.round || this.startRound(this.nextRoundIndex())).calls.append(call.el);
    }
    setResult(call, message);
    this.scroll();
  }

  stats(stats) {
    const round = this.round || this.startRound(stats.round_index || this.nextRoundIndex());
    round.bubble.classList.remove("streaming");
    round.el.querySelector(".stats")?.remove();
    round.el.append(statsChips(stats));
    this.round = null;
    this.scroll();
  }

  turnDone() {
    for (const bubble of this.root.querySelectorAll(".streaming")) bubble.classList.remove("streaming");
    this.round = null;
  }

  error(message, status = "failed") {
    const turn = this.current;
    this.closeRunning(turn, status === "cancelled" ? "cancelled" : "failed");
    const el = h("div", { class: "msg error" }, h("div", { class: "msg-text" }, message));
    (turn ? turn.el : this.root).append(el);
    this.emptyHint.hidden = true;
    this.turnDone();
    this.scroll();
  }

  // A turn that ended (failed or cancelled) leaves no call "running…".
  closeRunning(turn, status) {
    const root = turn ? turn.el : this.root;
    for (const el of root.querySelectorAll('.call[data-status="running"]')) {
      el.dataset.status = status;
      el.querySelector(".call-status").textContent = status;
      const result = el.querySelector(".call-body .call-pre:nth-of-type(2)");
      if (result && result.textContent === "waiting for the result…") result.textContent = `no result: the turn was ${status}`;
    }
  }

  notice(message) {
    this.emptyHint.hidden = true;
    this.root.append(h("div", { class: "notice" }, message));
    this.scroll();
  }

  scroll(force = false) {
    const root = this.root;
    const nearBottom = root.scrollHeight - root.scrollTop - root.clientHeight < 160;
    if (force || nearBottom) root.scrollTop = root.scrollHeight;
  }
}

function failureText(turn) {
  if (turn.failure_reason) return `turn ${turn.status}: ${turn.failure_reason}${turn.failure_message ? ` — ${turn.failure_message}` : ""}`;
  return `turn ${turn.status}`;
}

function toolCall(event) {
  const args = event.arguments && Object.keys(event.arguments).length ? event.arguments : null;
  const status = h("span", { class: "call-status" }, "running…");
  const result = h("pre", { class: "call-pre" }, "waiting for the result…");
  const el = h("details", { class: "call", dataset: { status: "running", id: event.id } },
    h("summary", {},
      h("span", { class: "call-icon", "aria-hidden": "true" }, "⚡"),
      h("span", { class: "call-name" }, event.name),
      h("span", { class: "call-args" }, args ? JSON.stringify(args) : ""),
      status),
    h("div", { class: "call-body" },
      h("div", { class: "call-label" }, "Arguments"),
      h("pre", { class: "call-pre" }, args ? pretty(args) : "resolved by the event agent"),
      h("div", { class: "call-label" }, "Result"),
      result,
      h("div", { class: "call-id" }, `id ${event.id}`)));
  return { el, status, result, argsLine: el.querySelector(".call-args"), argsPre: el.querySelector(".call-body .call-pre") };
}

const RESOLVED = {
  model: "written by the chat model", resolver: "the tool's argument resolver",
  argument_fallback: "an argument fallback call", argument_generation: "an argument generation call",
  empty: "no arguments needed", not_resolved: "not resolved",
};

function setArguments(call, args, resolvedBy) {
  const how = resolvedBy ? ` (${RESOLVED[resolvedBy] || resolvedBy})` : "";
  if (args && Object.keys(args).length) {
    call.argsLine.textContent = JSON.stringify(args);
    call.argsPre.textContent = pretty(args) + how;
  } else if (resolvedBy) {
    call.argsPre.textContent = `resolved by the event agent${how}; arguments not recorded`;
  }
  call.el.dataset.resolvedBy = resolvedBy || "";
}

function setResult(call, message) {
  const payload = parseJson(message.content);
  const failed = payload && typeof payload === "object" && !Array.isArray(payload) && "error" in payload;
  call.result.textContent = pretty(message.content);
  call.status.textContent = failed ? "error" : "done";
  call.el.dataset.status = failed ? "error" : "done";
}

function statsChips(stats) {
  const chip = (label, value, title) => h("span", { class: "chip", title }, h("b", {}, label), " ", value);
  return h("div", { class: "stats" },
    chip("round", String(stats.round_index ?? "?"), "chat round"),
    chip("TTFT", ms(stats.ttft_ms), "visible time to first token"),
    chip("elapsed", ms(stats.elapsed_ms), "round wall time"),
    chip("tokens", num(stats.total_tokens), `prompt ${num(stats.prompt_tokens)} · completion ${num(stats.completion_tokens)}`),
    chip("cached", num(stats.cached_tokens), "cached prompt tokens"),
    stats.had_event ? h("span", { class: "chip chip-event", title: "this round ran tools" }, "tools") : null);
}
