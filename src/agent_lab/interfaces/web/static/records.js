// Turn records (TurnRecord v1, folded on the server from the audits: the same fold
// live and reopened) and the audit trail grouped by turn. The page renders turns from
// the records only; it folds nothing itself.

export function groupAudits(audits) {
  const byTurn = new Map();
  for (const audit of audits) {
    const turn = audit.turn_index ?? 0;
    if (!byTurn.has(turn)) byTurn.set(turn, []);
    byTurn.get(turn).push(audit);
  }
  return byTurn;
}

// Where the session's runtime ended, from its stored `session_finished` audits: the
// turns each end followed (a page that watched was told by a `detached` frame there),
// and whether the session is still ended (no runtime started since).
export function sessionEnds(audits) {
  const after = new Set();
  let ended = false;
  for (const audit of audits || []) {
    if (audit.event === "session_finished") {
      after.add(audit.turn_index ?? 0);
      ended = true;
    } else if (audit.event === "session_started") {
      ended = false;
    }
  }
  return { after, ended };
}

export function recordsByTurn(records) {
  return new Map((records || []).map((record) => [record.turn_index, record]));
}

// Calls of interrupted batches whose effect the ledger could not confirm: dispatched
// without an outcome (`unknown`) or never dispatched (`not_executed`).
export const UNCERTAIN = {
  unknown: "outcome unknown — check before repeating",
  not_executed: "not executed",
};

export function isUncertain(call) {
  return Object.hasOwn(UNCERTAIN, call.status);
}

// Every tool call of a turn, in the order of its rounds: the event, the execution of
// that event (status, result, arguments) and the round it belongs to.
export function callsOf(record) {
  const tools = new Map((record.tool_executions || []).map((tool) => [`${tool.round_index}:${tool.event_id}`, tool]));
  return (record.events || []).map((event) => ({
    event, tool: tools.get(`${event.round_index}:${event.event_id}`) || null,
  }));
}

// What the page shows of a call's state, from its execution in the record.
export function shownStatus(tool) {
  if (!tool) return "running";
  if (tool.status === "succeeded") return "done";
  if (tool.status === "failed") return "error";
  return tool.status;
}

export function failureText(record) {
  const failure = record.failure;
  const head = `turn ${record.status}`;
  if (!failure) return head;
  const reason = failure.reason === record.status ? head : `${head}: ${failure.reason}`;
  return failure.message && failure.message !== head ? `${reason} — ${failure.message}` : reason;
}

// Event names the chat agent wrote in a round that were not among the events on offer
// (dual_agent): they never ran, and the visible text drops them, so the round says so.
export function ignoredEvents(round) {
  return (round.ignored_event_names || []).map((name) => `ignored event: ${name} (not an available tool)`);
}
