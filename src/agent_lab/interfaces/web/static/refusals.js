// What the page says when the server refused a message or will not run one: the error
// under its field or under the composer (which gets the message back), never only in
// a passing toast; queued messages dropped by something else.

import { $, toast } from "./dom.js";
import { fieldInput, showFieldError } from "./feedback.js";

const DROP_REASONS = {
  session_ended: "the session ended before their turn",
  close: "the session was ended in another tab or window",
  drop_queued: "they were dropped in another tab or window",
};

export class Refusals {
  constructor({ state, queued, conversation, setPhase }) {
    Object.assign(this, { state, queued, conversation, setPhase });
  }

  // The server closed the socket on a message over its frame limit: say so, keep the
  // typed message, and let the next Send open a fresh connection.
  tooLarge() {
    this.state.socket = null;
    const text = "The request is too large for the server: shorten the system prompts or pre-messages";
    if (!showFieldError("message", text)) toast(text, "error");
    restoreComposer(this.state.lastSent);
    this.setPhase("rejected");
  }

  error(frame) {
    const { state, queued } = this;
    const starting = state.phase === "connecting" || state.phase === "pending" || state.phase === "restarting";
    state.restartNote = null;
    if (frame.field === "session") {
      restoreComposer(state.lastSent);
      toast(frame.message, "error");
      return;
    }
    if (frame.field === "queue" || frame.field === "rate") {
      restoreComposer(state.phase === "running" ? queued.refusedLast() : state.lastSent);
      showFieldError("message", `Not sent: ${frame.message}`);
      if (state.phase === "connecting") this.setPhase("rejected");
      return;
    }
    // A session its runtime could not open (another runtime drives it…) ends no turn:
    // said under the composer, which gets the message back.
    const underField = fieldInput(frame.field) && !(frame.failure_reason && !frame.field);
    const shown = underField ? showFieldError(frame.field, frame.message)
      : (starting || frame.failure_reason) && showFieldError("message", `Not sent: ${frame.message}`);
    if (!shown) toast(frame.message, "error");
    if (starting) restoreComposer(state.lastSent);
    if (state.phase === "connecting") this.setPhase("rejected");
  }

  // Queued messages the server will not run: gone from the queue; unless this page
  // asked for it, said in the conversation, and the text goes back into the composer.
  dropped(frame) {
    const mine = this.queued.take(frame.contents);
    if (frame.requested || !frame.reason) {
      if (frame.count) toast(`Dropped ${frame.count} queued message${frame.count === 1 ? "" : "s"}`);
      return;
    }
    this.notRun(mine, DROP_REASONS[frame.reason] || "they were dropped");
  }

  notRun(texts, why) {
    if (!texts.length) return;
    const what = texts.length === 1 ? "A queued message will not run" : `${texts.length} queued messages will not run`;
    this.conversation.notice(`${what}: ${why}. The text is back in the composer.`);
    restoreComposer(texts.join("\n"));
  }
}

export function restoreComposer(text) {
  const input = $("#composer-input");
  if (text && !input.value.trim()) input.value = text;
}
