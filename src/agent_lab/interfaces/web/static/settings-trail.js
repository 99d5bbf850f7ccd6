// Where a stored session's settings changed between turns, read from its stored trail,
// never from this page's memory: a runtime takes its settings when it starts
// (`session_started`), and what its turns' requests were sent with is compared with
// the turns of the runtimes before it. Only what the trail holds is seen: the mode,
// the tools and the event budget offered, the chat agent's and the event agent's model
// parameters; not the parallelism, prompts, pre-messages, endpoint or key.

import { settingNames } from "./settings-state.js";

// Turn index → names of the settings changed from that turn on (the first turn of a
// runtime whose requests show settings other than the turns before it).
export function settingsChanges(audits) {
  const starts = [];
  const seen = new Map();  // turn index → {path: value}, the first of each in the turn
  for (const audit of audits || []) {
    if (audit.event === "session_started") starts.push(audit.details?.first_turn_index ?? audit.turn_index ?? 0);
    else if (typeof audit.turn_index === "number") observe(seen, audit);
  }
  const runtimes = new Map();  // first turn of a runtime → its turns' settings
  for (const turn of [...seen.keys()].sort((a, b) => a - b)) {
    const start = Math.max(-1, ...starts.filter((first) => first <= turn));
    if (!runtimes.has(start)) runtimes.set(start, { turn, settings: {} });
    const runtime = runtimes.get(start);
    for (const [path, value] of Object.entries(seen.get(turn))) if (!(path in runtime.settings)) runtime.settings[path] = value;
  }
  const changes = new Map();
  const known = {};
  for (const { turn, settings } of runtimes.values()) {
    const changed = Object.keys(settings).filter((path) => path in known && known[path] !== settings[path]);
    if (changed.length) changes.set(turn, settingNames(changed));
    Object.assign(known, settings);
  }
  return changes;
}

function observe(seen, audit) {
  const details = audit.details || {};
  const found = {};
  if (audit.event === "chat_round_started" && details.round_index === 1) {
    found["request.tool_invocation_mode"] = details.tool_invocation_mode;
    found["request.event_agent.enabled_tools"] = details.configured_events;
    found["request.event_agent.max_event_loops"] = details.event_budget_remaining;
  } else if (audit.event === "chat_agent_request") {
    for (const [key, value] of Object.entries(details.params || {})) found[`request.chat_agent.${key}`] = value;
  } else if (audit.event === "event_agent_request") {
    const { model, ...params } = details.params || {};
    // the model it was sent is the chat agent's when none of its own is set
    const chatModel = (seen.get(audit.turn_index) || {})["request.chat_agent.model"];
    found["request.event_agent.model"] = chatModel === JSON.stringify(model) ? null : model;
    for (const [key, value] of Object.entries(params)) found[`request.event_agent.${key}`] = value;
    found["request.event_agent.system_prompt"] = details.system_prompt;
  }
  const turn = seen.get(audit.turn_index) || {};
  for (const [path, value] of Object.entries(found)) {
    if (value !== undefined && !(path in turn)) turn[path] = JSON.stringify(value);
  }
  seen.set(audit.turn_index, turn);
}
