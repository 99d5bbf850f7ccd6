// The conversation view: user turns, streamed assistant text, collapsible tool calls
// with their results, and per-round stats chips. Text only — never HTML.
//
// A reopened turn is drawn from its turn record alone; a live turn streams its text,
// events and results as they come and takes the same record (`turn_record` frames) for
// what only the record knows: the arguments the event agent resolved, statuses,
// failure reasons, calls recovered after an interruption. Both go through
// `applyTurnRecord`, so a turn looks the same live and after a reload.

import { h, pretty } from "./dom.js";
import { budgetNotice, budgetSpent } from "./feedback.js";
import { chatCall, roundStats, statsChips } from "./round-chips.js";
import { callsOf, failureText, ignoredEvents, isUncertain, sessionEnds, UNCERTAIN } from "./records.js";
import { settingsChanges } from "./settings-trail.js";
import { setArguments, setExecution, setResult, toolCall } from "./tool-calls.js";

export const SESSION_ENDED = "Session ended. Send a message to continue it.";

export class Conversation {
  constructor(root, emptyHint) {
    this.root = root;
    this.emptyHint = emptyHint;
    this.pinned = false;
    this.reset();
  }

  reset() {
    this.root.replaceChildren(this.emptyHint);
    this.emptyHint.hidden = false;
    this.turns = new Map();
    this.records = new Map();
    this.calls = new Map();
    this.current = null;
    this.round = null;
  }

  // A stored session: every turn from its record, then the calls the store's effect
  // ledger still holds as unreported (uncertain until the next turn reports them).
  renderRecord(record) {
    const ends = sessionEnds(record.audit);
    const spent = spentBudgets(record.audit);
    const changes = settingsChanges(record.audit);
    this.bulk = true;  // one scroll at the end: a scroll per line lays out every turn again
    try {
      for (const turn of record.records || []) {
        this.renderTurn(turn, spent);
        if (changes.has(turn.turn_index)) this.settingsNotice(turn.turn_index, changes.get(turn.turn_index));
        if (ends.after.has(turn.turn_index)) this.sessionEnded();
      }
    } finally {
      this.bulk = false;
    }
    const unreported = record.unreported_calls || [];
    this.markUncertain(unreported);
    if (unreported.length) {
      this.notice(`Interrupted before their outcome was known (the next turn tells the model): ${unreported.map(
        (call) => `${call.event_name} (turn ${call.turn_index}) ${recoveredText(call)}`).join("; ")}`);
      this.root.lastElementChild.classList.add("unreported");
    }
    this.scroll(true);
  }

  renderTurn(record, spent = new Map()) {
    this.user(record.turn_index, record.user_message || "");
    this.recoveredNotice(record);
    for (const round of record.rounds || []) {
      this.startRound(round.round_index);
      const budget = spent.get(`${record.turn_index}:${round.round_index}`);
      if (budget) this.budget(budget);
      for (const { event } of callsOf(record).filter((c) => c.event.round_index === round.round_index)) {
        this.event({ id: event.event_id, name: event.event_name, arguments: event.arguments || {} });
      }
      if (round.status === "succeeded") this.stats(roundStats(record, round));
    }
    this.applyTurnRecord(record);
    this.round = null;
  }

  // The record of a turn (live: so far; reopened: all of it) onto what is shown.
  applyTurnRecord(record) {
    const turn = this.turns.get(record.turn_index);
    if (!turn) return;
    this.records.set(record.turn_index, record);
    this.modeNotice(turn, record);
    this.recoveredNotice(record);
    for (const { event, tool } of callsOf(record)) {
      let call = this.calls.get(event.event_id);
      if (!call) {
        call = toolCall({ id: event.event_id, name: event.event_name, arguments: event.arguments || {} });
        this.calls.set(event.event_id, call);
        this.roundOf(turn, event.round_index).calls.append(call.el);
      }
      setArguments(call, tool?.arguments ?? event.arguments, event.resolved_by);
      if (tool && !call.el.dataset.recovered) setExecution(call, tool);
    }
    this.sayRounds(turn, record);
    for (const round of turn.rounds.values()) if (round.stats) this.drawStats(turn, round);
    if (record.status !== "running") this.closeTurn(turn, record);
    this.markUncertain(record.recovered_calls || []);
  }

  // Each finished round says what the record says it said: the chat agent's words,
  // then the runtime's own sentences (template confirmations, the farewell), each on a
  // line of its own — they are separate messages, never glued to the chat text.
  sayRounds(turn, record) {
    for (const round of record.rounds || []) {
      const spoken = round.spoken || [];
      const said = round.text + spoken.join("");
      if (round.status !== "succeeded" && !said) continue; // cut off: keep what streamed
      const entry = this.roundOf(turn, round.round_index);
      if (entry.text.data !== round.text) entry.text.data = round.text;
      setSpoken(entry, spoken);
      entry.chatSaid = true; // the chat agent's text is final: later deltas are the runtime's
      entry.bubble.hidden = !said;
      entry.bubble.classList.remove("streaming");
    }
    for (const round of record.rounds || []) {
      const lines = ignoredEvents(round);
      if (lines.length) showIgnored(this.roundOf(turn, round.round_index), lines);
    }
  }

  // A closed turn leaves no call running, and a failure gives its reason (a turn read
  // as interrupted before its session was recovered takes the recovered wording).
  closeTurn(turn, record) {
    const shown = turn.el.querySelector(".msg.error");
    if (record.failure && shown?.dataset.reason === record.failure.reason) {
      shown.querySelector(".msg-text").textContent = failureText(record);
    }
    if (record.failure && !shown) {
      this.closeRunning(turn, record.status === "cancelled" ? "cancelled" : "failed");
      turn.el.append(h("div", { class: "msg error", dataset: { reason: record.failure.reason } },
        h("div", { class: "msg-text" }, failureText(record))));
    }
  }

  // A turn whose runtime started with other settings than the turns before it ran with
  // says which above it (the page that changed them said so as it sent the turn).
  settingsNotice(turnIndex, names) {
    this.turns.get(turnIndex)?.el.prepend(h("div", { class: "notice settings-change" },
      `Settings changed (${names.join(", ")}): the session went on with them from turn ${turnIndex}.`));
  }

  // A turn that ran in another tool mode than the turn before it says so above it.
  modeNotice(turn, record) {
    const earlier = [...this.records.keys()].filter((index) => index < record.turn_index);
    const before = earlier.length ? this.records.get(Math.max(...earlier)) : null;
    if (!record.mode || !before?.mode || before.mode === record.mode || turn.el.querySelector(".mode-change")) return;
    turn.el.prepend(h("div", { class: "notice mode-change" }, `Tool mode ${record.mode} from turn ${record.turn_index} (turn ${before.turn_index} ran in ${before.mode})`));
  }

  recoveredNotice(record) {
    const turn = this.turns.get(record.turn_index);
    const calls = record.recovered_calls || [];
    if (!turn || !calls.length || turn.el.querySelector(".recovered")) return;
    turn.el.querySelector(".msg.user")?.after(h("div", { class: "notice recovered" },
      "Given back to the model after an interruption: ",
      calls.map((call, index) => [index ? "; " : "", `${call.event_name} (turn ${call.turn_index}) ${recoveredText(call)}`])));
  }

  // Calls of an interrupted batch, as the effect ledger knows them: those it could not
  // confirm are shown as uncertain (not done, not cancelled: they may have run), those
  // with a recorded result as done or failed (never cancelled: they ran).
  markUncertain(calls) {
    for (const entry of calls) {
      const call = this.calls.get(entry.event_id);
      if (!call) continue;
      const uncertain = isUncertain(entry);
      if (!uncertain && !RAN[entry.status]) continue;
      call.el.dataset.status = uncertain ? "uncertain" : RAN[entry.status];
      call.el.dataset.recovered = entry.status;
      call.el.dataset.reason = `recovered:${entry.status}`;
      call.status.textContent = recoveredText(entry);
      call.status.title = entry.note || call.status.textContent;
      if (call.el.dataset.result !== "shown") {
        call.result.textContent = entry.note || "recorded before the interruption and given back to the model";
      }
      const args = entry.arguments || {};
      if (!call.argsLine.textContent && Object.keys(args).length) {
        call.argsLine.textContent = JSON.stringify(args);
        call.argsPre.textContent = `${pretty(args)} (as the effect ledger recorded them)`;
      }
    }
  }

  // A round of a turn, made if it is not there yet; the round being streamed stays.
  roundOf(turn, index) {
    const [current, round] = [this.current, this.round];
    this.current = turn;
    const found = this.startRound(index);
    [this.current, this.round] = [current, round];
    return found;
  }

  user(index, text) {
    const turn = this.turn(index);
    turn.el.prepend(h("div", { class: "msg user" },
      h("div", { class: "msg-meta" }, `You · turn ${index}`),
      h("div", { class: "msg-text", dir: "auto" }, text || "(empty)")));
    this.scroll(this.pinned);
    if (!this.bulk) this.pinned = false;
  }

  // The user sent a message: show the end of the conversation now, and their message
  // when its turn starts, wherever they had scrolled to.
  follow() {
    this.pinned = true;
    this.scroll(true);
  }

  // The round being started may not run tools: the turn's event budget is spent (said
  // from its `chat_round_started` audit, live and reopened).
  budget(details) {
    if (!budgetSpent(details)) return;
    const round = this.round || this.startRound(details.round_index);
    if (round.el.querySelector(".notice.budget")) return;
    round.el.prepend(h("div", { class: "notice budget" }, budgetNotice(details)));
    this.emptyHint.hidden = true;
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
      const said = h("div", { class: "msg-text", dir: "auto" }, text);
      const bubble = h("div", { class: "msg assistant" },
        h("div", { class: "msg-meta" }, `Assistant · round ${index}`), said);
      bubble.hidden = true;
      const calls = h("div", { class: "calls" });
      const el = h("div", { class: "round" }, bubble, calls);
      turn.el.append(el);
      turn.rounds.set(index, { index, el, bubble, text, said, spoken: [], chatSaid: false, calls });
    }
    this.round = turn.rounds.get(index);
    return this.round;
  }

  delta(content) {
    const round = this.round || this.startRound(this.nextRoundIndex());
    round.bubble.hidden = false;
    round.bubble.classList.add("streaming");
    if (round.chatSaid) setSpoken(round, [...round.spoken.map((el) => el.textContent), content]);
    else round.text.appendData(content);
    this.scroll();
  }

  nextRoundIndex() {
    const turn = this.current || this.turn(1);
    return Math.max(0, ...turn.rounds.keys()) + 1;
  }

  event(event) {
    if (this.calls.has(event.id)) return; // its turn record came first
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
    round.stats = stats;
    this.drawStats(this.current, round);
    this.round = null;
    this.scroll();
  }

  // A round's chips: the round_stats figures, with the tokens and cost of the round's
  // chat call as its turn record has them once the call ended ("not reported" when the
  // provider sent no usage, as the reopened turn says).
  drawStats(turn, round) {
    const chips = statsChips(round.stats, chatCall(this.records.get(turn?.index), round.index));
    const shown = round.el.querySelector(".stats");
    if (shown) shown.replaceWith(chips);
    else round.el.append(chips);
  }

  turnDone() {
    for (const bubble of this.root.querySelectorAll(".streaming")) bubble.classList.remove("streaming");
    this.round = null;
  }

  error(message, status = "failed") {
    const turn = this.current;
    if (turn?.el.querySelector(".msg.error")) return this.turnDone(); // the record said why
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

  // The session's runtime stopped (a terminating tool, End session, idle): live when
  // the `detached` frame comes, reopened where the stored `session_finished` audit is.
  sessionEnded() {
    this.notice(SESSION_ENDED);
    this.root.lastElementChild.classList.add("ended");
  }

  notice(message) {
    this.emptyHint.hidden = true;
    this.root.append(h("div", { class: "notice" }, message));
    this.scroll();
  }

  scroll(force = false) {
    if (this.bulk) return;
    const root = this.root;
    const nearBottom = root.scrollHeight - root.scrollTop - root.clientHeight < 160;
    if (force || nearBottom) root.scrollTop = root.scrollHeight;
  }
}

const RAN = { succeeded: "done", failed: "error" };

// The rounds of a stored trail that started with the event budget spent, by
// `turn:round`, with their `chat_round_started` details.
function spentBudgets(audits) {
  const spent = new Map();
  for (const audit of audits || []) {
    if (audit.event === "chat_round_started" && budgetSpent(audit.details || {})) {
      spent.set(`${audit.turn_index}:${audit.details.round_index}`, audit.details);
    }
  }
  return spent;
}

// Under the round's calls, one line per event name that was not on offer.
function showIgnored(round, lines) {
  let el = round.el.querySelector(".ignored-events");
  if (el && el.dataset.lines === lines.join("\n")) return;
  el?.remove();
  el = h("div", { class: "ignored-events", dataset: { lines: lines.join("\n") } },
    ...lines.map((line) => h("div", { class: "ignored-event" }, line)));
  round.calls.after(el);
}

// The runtime's own sentences of a round (template confirmations, the farewell), each
// its own line under the chat agent's text.
function setSpoken(round, sentences) {
  const shown = round.spoken.map((el) => el.textContent);
  if (shown.length === sentences.length && shown.every((text, i) => text === sentences[i])) return;
  for (const el of round.spoken) el.remove();
  round.spoken = sentences.map((text) => h("span", { class: "msg-spoken", title: "said by the runtime, not the model" }, text));
  round.said.append(...round.spoken);
}

function recoveredText(call) {
  if (call.status in UNCERTAIN) return `uncertain: ${UNCERTAIN[call.status]}`;
  return `${RAN[call.status] || call.status} (recorded before the interruption)`;
}
