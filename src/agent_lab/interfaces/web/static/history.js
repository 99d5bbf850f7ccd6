// Turns a stored session record (transcript + audit trail) into turn descriptors the
// conversation view renders the same way as a live stream.

export function groupAudits(audits) {
  const byTurn = new Map();
  for (const audit of audits) {
    const turn = audit.turn_index ?? 0;
    if (!byTurn.has(turn)) byTurn.set(turn, []);
    byTurn.get(turn).push(audit);
  }
  return byTurn;
}

export function historyTurns(record) {
  const audits = groupAudits(record.audit || []);
  const messages = groupBy(record.messages || [], (message) => message.turn_index ?? 0);
  const statuses = new Map((record.turns || []).map((turn) => [turn.turn_index, turn]));
  const indexes = [...new Set([...messages.keys(), ...turnsStarted(audits)])].sort((a, b) => a - b);
  return indexes.map((index) =>
    describeTurn(index, audits.get(index) || [], messages.get(index) || [], statuses.get(index)));
}

function turnsStarted(audits) {
  return [...audits.entries()]
    .filter(([, list]) => list.some((audit) => audit.event === "turn_started"))
    .map(([turn]) => turn);
}

function describeTurn(index, audits, messages, stored) {
  const status = stored?.status;
  const user = messages.find((message) => message.role === "user" && message.name !== "event_agent");
  const rounds = roundsOf(audits, messages);
  const extra = attachSpoken(rounds, messages);
  return {
    index, user: user ? user.content : "", rounds, extra, status,
    failure_reason: stored?.failure_reason ?? null, failure_message: stored?.failure_message ?? null,
  };
}

// The runtime's own sentences (template confirmations, the farewell) are stored as
// separate assistant messages; live, they were streamed into the round they followed.
// Put each back into that round, so a reopened turn has the same rounds and texts.
function attachSpoken(rounds, messages) {
  const extra = [];
  let position = -1;
  for (const message of messages) {
    if (message.role !== "assistant" || !message.content.trim()) continue;
    let match = -1;
    for (let at = position + 1; at < rounds.length; at += 1) {
      if (rounds[at].text.trim() === message.content.trim()) { match = at; break; }
    }
    if (match >= 0) position = match;
    else if (rounds.length) rounds[Math.max(position, 0)].text += message.content;
    else extra.push(message.content);
  }
  return extra;
}

function roundsOf(audits, messages) {
  const rounds = new Map();
  const round = (index) => {
    if (!rounds.has(index)) rounds.set(index, { index, text: "", events: [], results: new Map(), stats: null, started: null });
    return rounds.get(index);
  };
  const scopes = new Map();
  for (const audit of audits) foldAudit(audit, round, scopes);
  const toolMessages = messages.filter((message) => message.role === "tool");
  for (const entry of rounds.values()) {
    for (const event of entry.events) {
      const reply = toolMessages.find((message) => message.tool_call_id === event.id);
      if (reply && !entry.results.has(event.id)) entry.results.set(event.id, reply);
    }
  }
  return [...rounds.values()].sort((a, b) => a.index - b.index);
}

function foldAudit(audit, round, scopes) {
  const details = audit.details || {};
  const r = details.round_index;
  switch (audit.event) {
    case "chat_round_started":
      round(r).started = details.turn_elapsed_ms;
      break;
    case "chat_event_detected":
      round(r).events.push(details.event);
      break;
    case "chat_agent_response":
      Object.assign(round(r), responseFields(details));
      break;
    case "chat_round_finished":
      finishRound(round(r), details);
      break;
    case "event_batch_started":
      scopes.set(details.scope, r);
      break;
    case "event_agent_response":
      for (const reply of details.replies || []) {
        round(scopes.get(details.scope) ?? r).results.set(reply.tool_call_id, reply);
      }
      break;
    default:
      break;
  }
}

function responseFields(details) {
  const usage = details.usage || {};
  return {
    text: details.content || "",
    response: {
      ttft_ms: details.visible_ttft_ms,
      prompt_tokens: usage.prompt_tokens ?? 0,
      completion_tokens: usage.completion_tokens ?? 0,
      total_tokens: usage.total_tokens ?? 0,
      cached_tokens: usage.cached_tokens ?? 0,
      had_event: (details.event_ids || []).length > 0,
    },
  };
}

function finishRound(entry, details) {
  const elapsed = entry.started === null ? null : details.turn_elapsed_ms - entry.started;
  entry.stats = { round_index: entry.index, elapsed_ms: elapsed, ...(entry.response || {}) };
}

function groupBy(items, key) {
  const groups = new Map();
  for (const item of items) {
    const k = key(item);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(item);
  }
  return groups;
}
