// Agent Lab page: wires the configuration, the live session socket, the conversation,
// the timeline, the sessions table and the compare view together.

import { api, ApiError, askToken, captureTokenFromFragment, download } from "./api.js";
import { loadCompare } from "./compare-view.js";
import { ConfigPanel } from "./config.js";
import { SessionConnections } from "./connections.js";
import { Conversation } from "./conversation.js";
import { openExplain } from "./explain.js";
import { $, h, ms, num, shortId, toast } from "./dom.js";
import { clearFieldErrors, LiveFigures, QueuedMessages } from "./feedback.js";
import { tokensText } from "./figures.js";
import { groupAudits, recordsByTurn, sessionEnds } from "./records.js";
import { modeBadge } from "./modes.js";
import { matches, renderSessions } from "./sessions.js";
import { panelSettings, rememberedRequest, rememberRequest, RunSettings, showSettingsHints } from "./settings-state.js";
import { SessionSocket } from "./socket.js";
import { markTab, wireTabs } from "./tabs.js";
import { renderTimeline } from "./timeline-view.js";
import { Refusals, restoreComposer } from "./refusals.js";

const SESSION_KEY = "agentlab.session";
const STATUS_TEXT = {
  idle: "no session", connecting: "connecting…", live: "live", running: "running",
  pending: "ready to continue", ended: "ended", reconnecting: "reconnecting…",
  stored: "stored", refused: "refused", unauthorized: "token needed",
  rejected: "not started", deleted: "deleted", restarting: "applying settings…",
};

const state = {
  sessionId: null,
  socket: null,
  phase: "idle",
  audits: new Map(),
  records: new Map(),
  liveTurn: null,
  record: null,
  applyConfig: false,
  timelineTurn: null,
  sessions: [],
  compareCache: new Map(),
  view: "lab",
  renderQueued: false,
  lastSent: "",
  liveFigures: new LiveFigures(),
  runSettings: new RunSettings(),
  restart: null,
  restartNote: null,
  checking: false,
};

const config = new ConfigPanel($("#config"));
const conversation = new Conversation($("#messages"), $("#empty-hint"));
const queued = new QueuedMessages($("#messages"), $("#drop-queued"));
const connections = new SessionConnections(config);
const refusals = new Refusals({ state, queued, conversation, setPhase });

// ---------------------------------------------------------------- boot & views

async function boot() {
  captureTokenFromFragment();
  wireControls();
  if (!(await loadServer())) return;
  const remembered = sessionStorage.getItem(SESSION_KEY);
  if (remembered) {
    state.applyConfig = true;
    connectSession(remembered);
  }
}

async function loadServer() {
  const endpoint = $("#endpoint");
  try {
    const [health, defaults, tools] = await Promise.all([api("/api/health"), api("/api/defaults"), api("/api/tools")]);
    endpoint.textContent = health.endpoint;
    endpoint.title = `Default endpoint: ${health.endpoint}`;
    endpoint.dataset.state = "ok";
    $("#enter-token").hidden = true;
    config.setTools(tools.tools);
    config.applyDefaults(defaults.request);
    return true;
  } catch (error) {
    const locked = error instanceof ApiError && error.status === 401;
    endpoint.textContent = locked ? "access token needed" : "server unreachable";
    endpoint.title = locked ? "This lab needs its access token" : String(error.message || error);
    endpoint.dataset.state = locked ? "locked" : "down";
    $("#enter-token").hidden = !locked;
    if (!locked) toast(String(error.message || error), "error");
    return false;
  }
}

async function unlock() {
  if (!(await askToken({ retry: true }))) return;
  if (await loadServer()) {
    const remembered = sessionStorage.getItem(SESSION_KEY);
    if (remembered && !state.socket) { state.applyConfig = true; connectSession(remembered); }
  }
}

function wireControls() {
  $("#enter-token").addEventListener("click", unlock);
  $("#drop-queued").addEventListener("click", () => state.socket?.send({ type: "drop_queued" }));
  $("#sessions-search").addEventListener("input", showSessions);
  $("#sessions-filter").addEventListener("change", showSessions);
  wireTabs(showView);
  $("#composer").addEventListener("submit", (event) => { event.preventDefault(); sendTurn(); });
  $("#composer-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); sendTurn(); }
  });
  $("#cancel-turn").addEventListener("click", () => state.socket?.send({ type: "cancel" }));
  $("#end-session").addEventListener("click", () => state.socket?.send({ type: "close" }));
  $("#new-session").addEventListener("click", newSession);
  $("#explain-turns").addEventListener("click", () => {
    if (state.sessionId) openExplain(state.sessionId).catch((error) => toast(`explain failed: ${error.message}`));
  });
  $("#explain-close").addEventListener("click", () => $("#explain-dialog").close());
  $("#reset-config").addEventListener("click", () => { connections.reset(config.reset()); showHints(); });
  $("#config").addEventListener("input", showHints);
  $("#config").addEventListener("change", showHints);
  $("#refresh-sessions").addEventListener("click", loadSessions);
  $("#timeline-turn").addEventListener("change", (event) => { state.timelineTurn = Number(event.target.value); renderTimeline(state); });
  for (const id of ["#compare-a", "#compare-b", "#compare-turn"]) $(id).addEventListener("change", () => loadCompare(state, id !== "#compare-turn"));
}

function showView(name) {
  state.view = name;
  markTab(name);
  for (const view of document.querySelectorAll(".view")) view.hidden = view.dataset.view !== name;
  if (name === "timeline") renderTimeline(state);
  if (name === "sessions") loadSessions();
  if (name === "compare") loadCompare(state, true);
}

function setPhase(phase) {
  state.phase = phase;
  const pill = $("#status");
  pill.dataset.state = phase;
  pill.textContent = STATUS_TEXT[phase] || phase;
  $("#cancel-turn").disabled = phase !== "running";
  $("#end-session").disabled = !(phase === "live" || phase === "running");
  $("#explain-turns").disabled = !state.sessionId || phase === "running";
  showHints();
}

function showHints() {
  showSettingsHints({ phase: state.phase, record: state.record, changed: state.runSettings.changed(panelSettings(config)) });
}

// ---------------------------------------------------------------- session socket

function newId() {
  if (crypto.randomUUID) return crypto.randomUUID().replaceAll("-", "");
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

// A start with a message starts a runtime (unless one is live) with the panel's settings.
function startCommand(firstMessage, resumeFrom, streamId) {
  const command = panelStart(firstMessage, resumeFrom, streamId);
  if (firstMessage) {
    state.runSettings.set(panelSettings(config));
    rememberRequest(state.sessionId, command.request);
  }
  return command;
}

function panelStart(message, resumeFrom = null, streamId = null) {
  const command = { type: "start", request: config.request(message), resume_from: resumeFrom, stream_id: streamId };
  const connection = config.connection();
  if (connection) command.connection = connection;
  return command;
}

function connectSession(sessionId, firstMessage = "") {
  state.socket?.close();
  resetSessionView(sessionId);
  sessionStorage.setItem(SESSION_KEY, sessionId);
  state.socket = new SessionSocket(sessionId, {
    startCommand,
    onMessage: handleMessage,
    onControl: handleControl,
    onState: (phase) => (phase === "too-large" ? refusals.tooLarge() : setPhase(phase)),
  });
  state.socket.open(firstMessage);
}

function resetSessionView(sessionId) {
  state.sessionId = sessionId;
  state.audits = new Map();
  state.records = new Map();
  state.liveTurn = null;
  state.record = null;
  state.timelineTurn = null;
  state.runSettings.clear();
  state.restart = null;
  state.restartNote = null;
  conversation.reset();
  queued.clear();
  clearFieldErrors();
  $("#conv-title").textContent = sessionId ? `Session ${shortId(sessionId)}` : "New session";
  $("#conv-usage").textContent = "";
}

function newSession() {
  connections.keep(state.sessionId);
  if (state.phase === "live") state.socket?.send({ type: "close" });
  state.socket?.close();
  state.socket = null;
  sessionStorage.removeItem(SESSION_KEY);
  resetSessionView(null);
  connections.startNew();
  setPhase("idle");
  $("#composer-input").focus();
}

function sendTurn() {
  const input = $("#composer-input");
  const text = input.value.trim();
  if (!text) return;
  if (state.phase === "deleted") return toast("This session was deleted — start a new session", "error");
  if (state.phase === "restarting" || state.checking) return toast("Applying the changed settings — send again in a moment", "error");
  state.lastSent = text;
  clearFieldErrors();
  const changed = state.runSettings.changed(panelSettings(config));
  if (!state.sessionId) {
    connectSession(newId(), text);
  } else if (!state.socket) {
    const id = state.sessionId;
    connectSession(id, text);
  } else if (state.phase === "ended" || state.phase === "rejected" || state.phase === "pending") {
    // A stored session starts a runtime with the panel's settings as they are now (the
    // request sent when it was opened may be older).
    if (!state.socket.send(startCommand(text, null, null))) return toast("Not connected", "error");
    if (state.phase !== "pending") setPhase("connecting");
  } else if (state.phase === "live" && changed.length) {
    return restartFor(text, changed);
  } else if (!state.socket.send({ type: "user", content: text })) {
    return toast("Not connected yet — try again in a moment", "error");
  } else if (state.phase === "running") {
    queued.add(text);
  }
  input.value = "";
  conversation.follow();
}

// Changed settings are first checked by the server, as the start will be: refused ones
// are said under their field while the live runtime goes on, untouched, with the message
// still in the composer. Accepted ones end the runtime; a new one starts with them.
async function restartFor(text, changed) {
  const sessionId = state.sessionId;
  state.checking = true;
  let check;
  try {
    check = await api(`/api/sessions/${encodeURIComponent(sessionId)}/check`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(panelStart(text)),
    });
  } catch (error) {
    return toast(`The changed settings could not be checked (${error.message}); the session goes on as it was`, "error");
  } finally {
    state.checking = false;
  }
  if (state.sessionId !== sessionId) return;  // another session is shown meanwhile
  if (!check.ok) return refusals.error(check.error);
  if (state.phase !== "live") return toast("The session is busy — send again when its turn is done", "error");
  if (!state.socket?.send({ type: "close" })) return toast("Not connected yet — try again in a moment", "error");
  state.restart = { text, changed };
  setPhase("restarting");
  const input = $("#composer-input");
  if (input.value.trim() === text) input.value = "";
  conversation.follow();
}

function handleControl(frame) {
  switch (frame.type) {
    case "attached":
      setPhase(frame.live ? "live" : "pending");
      if (frame.live) clearFieldErrors();
      break;
    case "queued":
      break;
    case "dropped":
      refusals.dropped(frame);
      break;
    case "deleted":
      sessionDeleted();
      break;
    case "history":
      loadHistory(frame.record, frame.truncated);
      break;
    case "detached":
      if (state.restart) return restartWithSettings();
      setPhase("ended");
      refusals.notRun(queued.take(), "the session ended before their turn");  // a server that said nothing
      conversation.sessionEnded();
      refreshRecord();
      break;
    case "cancelled":
      if (!frame.accepted) toast("No turn to cancel");
      break;
    case "error":
      refusals.error(frame);
      break;
    default:
      break;
  }
}

// The runtime ended to take the changed settings: a new one starts with them and the
// message sent (its turn follows the stored ones).
function restartWithSettings() {
  const { text, changed } = state.restart;
  state.restart = null;
  // said after the `history` frame the new runtime's start brings
  state.restartNote = `Settings changed (${changed.join(", ")}): the session goes on with them from the next turn.`;
  if (!state.socket?.send(startCommand(text, null, null))) {
    restoreComposer(text);
    setPhase("ended");
    return toast("Not connected: the message is back in the composer", "error");
  }
  setPhase("connecting");
}

function sessionDeleted() {
  queued.clear();
  setPhase("deleted");
  conversation.notice("This session was deleted in another tab or window. Start a new session to go on.");
}

function loadHistory(record, truncated) {
  // The session this page showed turns of is gone (deleted while this page was away).
  const shownBefore = Boolean(document.querySelector("#messages .msg.user"));
  if (!record && shownBefore && state.phase !== "running") return sessionDeleted();
  conversation.reset();
  state.audits = record ? groupAudits(record.audit || []) : new Map();
  state.records = recordsByTurn(record?.records);
  state.liveTurn = null;
  state.record = record;
  if (!record) return;
  if (state.applyConfig && record.session?.config) {
    config.apply(rememberedRequest(state.sessionId, record.session.config));
    state.runSettings.set(panelSettings(config));
  }
  state.applyConfig = false;
  conversation.renderRecord(record);
  if (state.restartNote) conversation.notice(state.restartNote);
  state.restartNote = null;
  // Not live and its runtime ended (not just never started or stopped by a crash): as
  // a page that watched it end reads, "ended".
  if (state.phase === "pending" && sessionEnds(record.audit).ended) setPhase("ended");
  if (truncated) conversation.notice("Part of the turn in progress was too long to replay.");
  showRecordSummary(record);
  queueTimeline();
}

function handleMessage(message) {
  switch (message.type) {
    case "user_message":
      state.liveTurn = message.turn_index;
      queued.started(message.content);
      conversation.user(message.turn_index, message.content);
      state.liveFigures.reset(message.turn_index);
      setPhase("running");
      showLiveFigures();
      break;
    case "audit":
      onAudit(message);
      break;
    case "turn_record":
      state.records.set(message.turn_index, message.record);
      conversation.applyTurnRecord(message.record);
      state.liveFigures.record(message.record);
      showLiveFigures();
      queueTimeline();
      break;
    case "message_delta":
      conversation.delta(message.content);
      break;
    case "event":
      conversation.event(message.event);
      break;
    case "tool_result":
      conversation.toolResult(message.message);
      state.liveFigures.tool();
      showLiveFigures();
      break;
    case "usage":
      state.liveFigures.usage(message.usage);
      showLiveFigures();
      break;
    case "round_stats":
      conversation.stats(message);
      state.liveFigures.round(message);
      showLiveFigures();
      break;
    case "turn_completed":
    case "error":
      onTurnEnd(message);
      break;
    case "done":
      if (!state.restart) setPhase("ended");
      break;
    default:
      break;
  }
}

function onAudit(message) {
  const details = message.details || {};
  if (message.event === "session_started") state.liveTurn = details.first_turn_index ?? state.liveTurn;
  if (message.event === "turn_started") state.liveTurn = details.turn_index;
  if (message.event === "chat_round_started") {
    conversation.startRound(details.round_index);
    conversation.budget(details);
  }
  const turn = state.liveTurn ?? details.turn_index ?? 0;
  if (!state.audits.has(turn)) state.audits.set(turn, []);
  state.audits.get(turn).push({ event: message.event, details, turn_index: turn });
  queueTimeline();
}

function onTurnEnd(message) {
  if (message.type === "error") conversation.error(message.message, message.failure_reason === "cancelled" ? "cancelled" : "failed");
  else conversation.turnDone();
  if (state.phase === "running") setPhase("live");
  refreshRecord();
}

// Only the audits stored after the last one this page holds are fetched (the live ones
// came over the socket): the whole trail again after every turn grows with the session.
async function refreshRecord() {
  if (!state.sessionId) return;
  const known = state.record?.session?.id === state.sessionId ? state.record : null;
  const after = lastAuditOffset(known);
  try {
    const query = after ? `?audit_after=${after}` : "";
    const record = await api(`/api/sessions/${encodeURIComponent(state.sessionId)}${query}`);
    if (record.session.id !== state.sessionId) return;
    if (after && known) record.audit = [...known.audit, ...(record.audit || [])];
    state.record = record;
    // Closed turns as the store has them now (a turn a dead runtime left open is closed
    // as interrupted once a later one ran), and calls the ledger holds as unreported.
    for (const turn of record.records || []) {
      if (turn.status === "running") continue;
      state.records.set(turn.turn_index, turn);
      conversation.applyTurnRecord(turn);
    }
    conversation.markUncertain(record.unreported_calls || []);
    showRecordSummary(record);
    queueTimeline();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) toast(String(error.message), "error");
  }
}

function lastAuditOffset(record) {
  const audit = record?.audit || [];
  return audit.length ? audit[audit.length - 1].offset || 0 : 0;
}

function showLiveFigures() {
  if (state.phase === "running") $("#conv-usage").replaceChildren(...state.liveFigures.chips());
}

function showRecordSummary(record) {
  if (state.phase === "running") {
    $("#conv-title").textContent = record.session?.title || `Session ${shortId(state.sessionId)}`;
    return showLiveFigures();
  }
  showHints();
  const usage = record.usage || {};
  if (!usage.turn_count) return $("#conv-usage").replaceChildren();
  $("#conv-title").textContent = record.session?.title || `Session ${shortId(state.sessionId)}`;
  $("#conv-usage").replaceChildren(
    modeBadge(record.session),
    h("span", {}, plural(usage.turn_count, "turn")),
    h("span", { dataset: { figure: "tokens" } }, tokensText(usage, usage.total_tokens === 1 ? "token" : "tokens")),
    h("span", {}, plural(usage.tool_count, "tool")),
    h("span", {}, `wall ${ms(usage.turn_wall_time_ms)}`));
}

function plural(count, noun) {
  return `${num(count ?? 0)} ${noun}${count === 1 ? "" : "s"}`;
}

// ---------------------------------------------------------------- timeline

function queueTimeline() {
  if (state.view !== "timeline" || state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => { state.renderQueued = false; renderTimeline(state); });
}

// ---------------------------------------------------------------- sessions

async function loadSessions() {
  try {
    const { sessions } = await api("/api/sessions");
    state.sessions = sessions;
    showSessions();
  } catch (error) {
    toast(String(error.message), "error");
  }
}

function showSessions() {
  const query = $("#sessions-search").value.trim().toLowerCase();
  const filter = $("#sessions-filter").value;
  const shown = state.sessions.filter((session) => matches(session, query, filter));
  renderSessions($("#sessions-body"), shown, { open: openSession, exportAs, remove: removeSession });
  $("#sessions-empty").hidden = state.sessions.length > 0;
  $("#sessions-none").hidden = !(state.sessions.length > 0 && shown.length === 0);
}

// Open = show the stored session with its configuration and attach to it: a live one
// streams on, a stored one continues with the next message.
async function openSession(session) {
  try {
    const record = await api(`/api/sessions/${encodeURIComponent(session.id)}`);
    if (record.session?.config) config.apply(rememberedRequest(session.id, record.session.config));
    state.applyConfig = false;
    connections.switchTo(state.sessionId, session.id);
    connectSession(session.id);
    if (record.session?.config) state.runSettings.set(panelSettings(config));
    showView("lab");
  } catch (error) {
    toast(String(error.message), "error");
  }
}

function exportAs(session, format) {
  download(`/api/sessions/${encodeURIComponent(session.id)}/export?format=${format}`, `agent-lab-${session.id}.${format}`)
    .catch((error) => toast(String(error.message), "error"));
}

async function removeSession(session) {
  if (!window.confirm(`Delete session “${session.title}”? This cannot be undone.`)) return;
  try {
    await api(`/api/sessions/${encodeURIComponent(session.id)}`, { method: "DELETE" });
    if (session.id === state.sessionId) newSession();
    toast("Session deleted");
  } catch (error) {
    toast(String(error.message), "error");
  }
  loadSessions();
}

// ---------------------------------------------------------------- compare

boot();
