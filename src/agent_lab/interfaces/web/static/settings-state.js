// The settings a session's runtime runs with, against what the configuration panel says
// now. A runtime takes its settings when it starts, so a change made while the session
// is idle makes the page restart the runtime with it for the next turn; the panel says
// which settings the next turn uses. The API key is kept here only as a hash.

import { $ } from "./dom.js";
import { modeLabel, modesOf } from "./modes.js";

const LABELS = [
  ["tool_invocation_mode", "mode"],
  ["chat_agent.model", "chat model"],
  ["chat_agent.temperature", "chat temperature"],
  ["chat_agent.", "chat agent"],
  ["event_agent.model", "event model"],
  ["event_agent.temperature", "event temperature"],
  ["event_agent.enabled_tools", "tools"],
  ["event_agent.max_event_loops", "event budget"],
  ["event_agent.max_parallel_events", "parallelism"],
  ["event_agent.", "event agent"],
  ["system_prompts", "system prompts"],
  ["pre_messages", "pre-messages"],
  ["connection.base_url", "endpoint"],
  ["connection.api_key", "API key"],
];

export class RunSettings {
  constructor() { this.applied = null; }

  // The runtime now runs with `settings` ({request, connection}).
  set(settings) { this.applied = flatten(settings); }

  clear() { this.applied = null; }

  known() { return this.applied !== null; }

  // Names of the settings that differ from the runtime's (none when it is not known).
  changed(settings) {
    if (!this.applied) return [];
    const now = flatten(settings);
    const paths = new Set([...Object.keys(now), ...Object.keys(this.applied)]);
    return settingNames([...paths].filter((path) => now[path] !== this.applied[path]));
  }
}

// The names the page gives settings (`request.chat_agent.temperature`: "chat
// temperature"), each once, in the panel's order.
export function settingNames(paths) {
  const order = (name) => LABELS.findIndex(([, shown]) => shown === name) >>> 0; // unknown last
  return [...new Set(paths.map(label))].sort((a, b) => order(a) - order(b));
}

// {request, connection} of the panel, comparable: the request without its message, the
// key as a hash.
export function panelSettings(config) {
  const { user_message: _, ...request } = config.request("");
  const connection = config.connection() || {};
  return { request, connection: { base_url: connection.base_url || null, api_key: keyHash(connection.api_key) } };
}

// What the hints under the mode and at the foot of the panel say.
export function showSettingsHints({ phase, record, changed }) {
  const modeHint = $("#mode-hint");
  const turns = record?.usage?.turn_count || 0;
  modeHint.hidden = !turns || !modesOf(record.session).length;
  modeHint.textContent = modeHint.hidden ? "" : `This session's turns so far ran in ${modeLabel(record.session)}. A change applies from the next turn; earlier turns keep their mode.`;
  const hint = $("#settings-hint");
  hint.dataset.state = changed.length ? "changed" : "same";
  const what = changed.join(", ");
  if (phase === "running" && changed.length) {
    hint.textContent = `Changed: ${what}. They apply to the next message sent after the running turn; messages queued now run with the current settings.`;
  } else if (phase === "live" && changed.length) {
    hint.textContent = `Changed: ${what}. They apply from the next turn: Send restarts the session's runtime with them.`;
  } else if (phase === "live" || phase === "running") {
    hint.textContent = "The live session runs with these settings; a change applies from the next turn.";
  } else {
    hint.textContent = "Settings apply from the next turn you send.";
  }
}

function label(fullPath) {
  const path = fullPath.replace(/^request\./, "");
  return LABELS.find(([prefix]) => path === prefix || (prefix.endsWith(".") && path.startsWith(prefix)))?.[1]
    || path.split(".")[0].replaceAll("_", " ");
}

function flatten(value, prefix = "", out = {}) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, item] of Object.entries(value)) flatten(item, prefix ? `${prefix}.${key}` : key, out);
  } else {
    out[prefix] = JSON.stringify(value ?? null);
  }
  return out;
}

// FNV-1a: enough to tell a changed key, without keeping the key itself.
function keyHash(key) {
  if (!key) return null;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i += 1) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return hash.toString(16);
}

// The request (never the connection) a runtime of the session last started with in this
// tab, so a reload shows the settings the session runs with, not only its first ones.
const REMEMBERED = "agentlab.settings.";

export function rememberRequest(sessionId, request) {
  if (!sessionId) return;
  const { user_message: _, ...settings } = request;
  try {
    sessionStorage.setItem(REMEMBERED + sessionId, JSON.stringify(settings));
  } catch {
    // storage full or off: the stored configuration is shown instead
  }
}

export function rememberedRequest(sessionId, stored) {
  const text = sessionId ? sessionStorage.getItem(REMEMBERED + sessionId) : null;
  if (!text) return stored;
  try {
    return JSON.parse(text);
  } catch {
    return stored;
  }
}
