// The endpoint and API key typed for each session of this page, in memory only (never
// in storage): opening another session shows the ones typed for it (blank: the
// server's own), and those typed for the session left come back when it is reopened.

import { $, shortId } from "./dom.js";

const DRAFT = ""; // typed before any session was started

export class SessionConnections {
  constructor(config) {
    this.config = config;
    this.typed = new Map();
  }

  // What is typed now belongs to `sessionId` (the page leaves it for a new session,
  // whose fields start as they are).
  keep(sessionId) {
    const typed = this.config.typedConnection();
    if (typed) this.typed.set(sessionId ?? DRAFT, typed);
    else this.typed.delete(sessionId ?? DRAFT);
    note("");
  }

  // A new session: the fields as they are, or those typed before any session was opened.
  startNew() {
    const draft = this.typed.get(DRAFT);
    this.typed.delete(DRAFT);
    if (draft && !this.config.typedConnection()) this.config.setConnection(draft);
  }

  // The page leaves session `from` for the stored session `to`.
  switchTo(from, to) {
    if (from === to) return;
    const left = this.config.typedConnection();
    this.keep(from);
    const next = this.typed.get(to) || null;
    this.config.setConnection(next);
    if (next) note("Endpoint and API key as you typed them for this session.");
    else if (left) note(`The endpoint and API key you typed stay with ${from ? `session ${shortId(from)}` : "a new session"} (they come back with it); this session uses the server's own unless you enter others.`);
  }

  reset(cleared) {
    note(cleared ? "Reset cleared the endpoint and API key: the next turn uses the server's own unless you enter others." : "");
  }
}

function note(text) {
  const el = $("#connection-note");
  el.textContent = text;
  el.hidden = !text;
}
