// The tool modes a session's turns ran in. A session's `mode` is its first request's;
// `modes` (from the server) lists the modes its turns actually ran in, in turn order, so
// a session continued in the other mode reads `mixed (dual_agent → chat_agent_tools)`.

import { h } from "./dom.js";

export function modesOf(session) {
  const modes = session?.modes;
  if (Array.isArray(modes) && modes.length) return modes;
  return session?.mode ? [session.mode] : [];
}

export function isMixed(session) {
  return new Set(modesOf(session)).size > 1;
}

export function modeLabel(session) {
  const modes = modesOf(session);
  if (isMixed(session)) return `mixed (${modes.join(" → ")})`;
  return modes[0] || "?";
}

// Whether the sessions filter `mode` (a mode, or `mixed`) finds this session.
export function ranIn(session, mode) {
  if (mode === "mixed") return isMixed(session);
  return modesOf(session).includes(mode);
}

export function modeBadge(session) {
  const mixed = isMixed(session);
  const modes = modesOf(session);
  const title = mixed ? "its turns ran in more than one tool mode, in this order" : "tool mode of its turns";
  return h("span", { class: `badge mode-${mixed ? "mixed" : modes[0] || "unknown"}`, title, dataset: { modes: modes.join(" ") } }, modeLabel(session));
}
