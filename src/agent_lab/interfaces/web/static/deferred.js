// Request audits of a stored session come without the conversation they sent (the
// server marks them `deferred`), so reopening a long session downloads a trail that
// grows linearly. The detail pane fetches the one turn's audits in full when the
// user opens a bar of it, and shows the request exactly as it was sent.

import { api } from "./api.js";

let cached = { key: null, audits: null };

export function isDeferred(value) {
  return Boolean(value && typeof value === "object" && value.deferred && value.offset);
}

export async function fullAudit(sessionId, audit) {
  const key = `${sessionId}:${audit.turn_index}`;
  if (cached.key !== key || !cached.audits.some((entry) => entry.offset === audit.offset)) {
    const query = `turn_index=${encodeURIComponent(audit.turn_index ?? 0)}`;
    const { audit: audits } = await api(`/api/sessions/${encodeURIComponent(sessionId)}/audit?${query}`);
    cached = { key, audits };
  }
  const found = cached.audits.find((entry) => entry.offset === audit.offset);
  if (!found) throw new Error("the audit record is no longer stored");
  return found;
}
