// What the page tells the user about its own state: errors next to the field they are
// about, the messages waiting behind a running turn, and the running turn's figures.

import { $, h, ms, num } from "./dom.js";
import { notReported } from "./figures.js";

// Error frames name the field (`request.chat_agent.temperature`); this is the input.
const FIELD_INPUTS = [
  [/^request\.chat_agent\.temperature/, "#chat-temperature"],
  [/^request\.chat_agent\.model/, "#chat-model"],
  [/^request\.chat_agent/, "#chat-model"],
  [/^request\.event_agent\.temperature/, "#event-temperature"],
  [/^request\.event_agent\.model/, "#event-model"],
  [/^request\.event_agent\.max_event_loops/, "#max-event-loops"],
  [/^request\.event_agent\.max_parallel_events/, "#max-parallel-events"],
  [/^request\.event_agent\.enabled_tools/, "#tool-list"],
  [/^request\.system_prompts/, "#system-prompts"],
  [/^request\.pre_messages/, "#pre-messages"],
  [/^connection\.base_url/, "#base-url"],
  [/^connection\.api_key/, "#api-key"],
  [/^(request\.user_message|content|message)$/, "#composer-input"],
];

export function fieldInput(field) {
  if (!field) return null;
  const match = FIELD_INPUTS.find(([pattern]) => pattern.test(field));
  return match ? $(match[1]) : null;
}

// Show `message` under the input of `field`; returns false when no input matches.
export function showFieldError(field, message) {
  const input = fieldInput(field);
  if (!input) return false;
  clearFieldError(input);
  input.setAttribute("aria-invalid", "true");
  const id = `${input.id}-error`;
  input.setAttribute("aria-describedby", id);
  input.after(h("div", { class: "field-error", id, role: "alert", title: message }, fieldMessage(field, message)));
  if (input.id !== "tool-list") input.addEventListener("input", () => clearFieldError(input), { once: true });
  revealField(input);
  return true;
}

// "invalid request — request.chat_agent.temperature: Input should be …" reads, next to
// its field, "temperature: Input should be …" (the full text stays in the title).
export function fieldMessage(field, message) {
  const at = message.indexOf(`${field}: `);
  if (at < 0) return message;
  const parts = field.split(".");
  const last = parts[parts.length - 1];
  const name = /^\d+$/.test(last) && parts.length > 1 ? `${parts[parts.length - 2]} #${Number(last) + 1}` : last;
  return `${name}: ${message.slice(at + field.length + 2)}`;
}

// Bring the field with the error into view (on a phone the configuration sits below the
// conversation) and focus it, as a form does with its first invalid field.
function revealField(input) {
  const box = input.getBoundingClientRect();
  if (box.top < 0 || box.bottom > window.innerHeight) input.scrollIntoView({ block: "center" });
  if (input.id !== "composer-input" && typeof input.focus === "function") input.focus({ preventScroll: true });
}

export function clearFieldError(input) {
  input.removeAttribute("aria-invalid");
  input.removeAttribute("aria-describedby");
  document.getElementById(`${input.id}-error`)?.remove();
}

export function clearFieldErrors() {
  for (const input of document.querySelectorAll("[aria-invalid=true]")) clearFieldError(input);
}

// Messages sent while a turn runs wait in the server's queue: show them until they start.
export class QueuedMessages {
  constructor(root, dropButton) {
    this.root = root;
    this.dropButton = dropButton;
    this.items = [];
  }

  add(text) {
    const el = h("div", { class: "msg user queued", title: "waiting for the running turn" },
      h("div", { class: "msg-meta" }, "You · queued"),
      h("div", { class: "msg-text", dir: "auto" }, text));
    this.items.push({ text, el });
    this.root.append(el);
    this.update();
  }

  // A turn started with `text`: the oldest matching queued bubble goes away.
  started(text) {
    const index = this.items.findIndex((item) => item.text === text);
    if (index >= 0) this.items.splice(index, 1)[0].el.remove();
    this.update();
  }

  refusedLast() {
    const last = this.items.pop();
    last?.el.remove();
    this.update();
    return last?.text ?? null;
  }

  // Dropped on the server: the bubbles of `contents` (all of them when it is not
  // given) go away; returns the texts this page had queued among them.
  take(contents) {
    const taken = [];
    for (const text of contents ?? this.items.map((item) => item.text)) {
      const index = this.items.findIndex((item) => item.text === text);
      if (index < 0) continue;
      taken.push(text);
      this.items.splice(index, 1)[0].el.remove();
    }
    this.update();
    return taken;
  }

  clear() {
    for (const item of this.items) item.el.remove();
    this.items = [];
    this.update();
  }

  update() {
    this.dropButton.hidden = this.items.length === 0;
    this.dropButton.textContent = `Drop queued (${this.items.length})`;
    for (const item of this.items) this.root.append(item.el); // keep them last
  }
}

// Figures of the turn in progress: tokens from its usage outputs (every model call, the
// chat rounds' and the event agent's argument calls', as the stored turn counts them),
// TTFT from its round_stats, and its tool results. The turn's record so far says which
// of its ended calls reported no usage: the tokens then say so, as `sessions show` does.
export class LiveFigures {
  constructor() { this.reset(null); }

  reset(turn) {
    this.turn = turn;
    this.tokens = 0;
    this.usageSeen = false;
    this.unreported = 0;
    this.tools = 0;
    this.ttft = null;
  }

  usage(counts) {
    this.usageSeen = true;
    this.tokens += counts?.total_tokens || 0;
  }

  record(record) {
    if (record.turn_index !== this.turn) return;
    const ended = (record.model_calls || []).filter((call) => call.status !== "running");
    this.unreported = ended.filter((call) => !call.usage).length;
  }

  round(stats) {
    if (this.ttft === null && typeof stats.ttft_ms === "number") this.ttft = stats.ttft_ms;
  }

  tool() { this.tools += 1; }

  chips() {
    const parts = [h("span", { class: "live-turn" }, `turn ${this.turn ?? "?"} running…`)];
    if (this.ttft !== null) parts.push(h("span", {}, `TTFT ${ms(this.ttft)}`));
    const unreported = this.unreported ? ` · ${notReported(this.unreported)}` : "";
    if (this.usageSeen) parts.push(h("span", {}, `${num(this.tokens)} tokens so far${unreported}`));
    else if (this.unreported) parts.push(h("span", {}, "tokens not reported"));
    if (this.tools) parts.push(h("span", {}, `${num(this.tools)} tool${this.tools === 1 ? "" : "s"} so far`));
    return parts;
  }
}

// A round that may not offer tools any more because the turn's event budget is spent.
export function budgetSpent(details) {
  const configured = details.configured_events || [];
  return configured.length > 0 && details.event_budget_remaining === 0 && (details.events_enabled || []).length === 0;
}

export function budgetNotice(details) {
  return `Event budget used up: round ${details.round_index} runs without tools (max_event_loops reached).`;
}
