// The configuration panel: builds DebugRunRequest dicts and the connection override.
// The API key lives only in its password field; it is never written to storage.

import { $, h } from "./dom.js";

const ROLES = ["system", "user", "assistant"];

export class ConfigPanel {
  constructor(root) {
    this.root = root;
    this.defaults = null;
    this.tools = [];
  }

  setTools(tools) {
    this.tools = tools;
    const list = $("#tool-list", this.root);
    list.replaceChildren(...tools.map((tool) => toolCheckbox(tool)));
  }

  applyDefaults(request) {
    this.defaults = request;
    this.apply(request);
  }

  // The server's defaults, endpoint and key included (blank: the server's own); returns
  // whether an endpoint or key typed in the panel was cleared.
  reset() {
    if (this.defaults) this.apply(this.defaults);
    const typed = this.typedConnection();
    this.setConnection(null);
    return Boolean(typed);
  }

  apply(config) {
    if (!config) return;
    const chat = config.chat_agent || {};
    const events = config.event_agent || {};
    const mode = config.tool_invocation_mode || "dual_agent";
    for (const radio of this.root.querySelectorAll("input[name=mode]")) radio.checked = radio.value === mode;
    setValue("#chat-model", chat.model ?? "");
    setValue("#chat-temperature", chat.temperature ?? 0.7);
    setValue("#event-model", events.model ?? "");
    setValue("#event-temperature", events.temperature ?? 0);
    setValue("#max-event-loops", events.max_event_loops ?? 3);
    setValue("#max-parallel-events", events.max_parallel_events ?? 8);
    setValue("#system-prompts", (config.system_prompts || []).join("\n---\n"));
    setValue("#pre-messages", formatPreMessages(config.pre_messages || []));
    const enabled = new Set(events.enabled_tools || []);
    for (const box of this.root.querySelectorAll("#tool-list input")) box.checked = enabled.has(box.value);
    this.base = { chat, events };
  }

  mode() {
    return this.root.querySelector("input[name=mode]:checked")?.value || "dual_agent";
  }

  request(userMessage = "") {
    const base = this.base || { chat: {}, events: {} };
    const eventModel = $("#event-model").value.trim();
    return {
      user_message: userMessage,
      system_prompts: splitPrompts($("#system-prompts").value),
      pre_messages: parsePreMessages($("#pre-messages").value),
      chat_agent: {
        ...base.chat,
        model: $("#chat-model").value.trim() || base.chat.model || "default",
        temperature: numberField("#chat-temperature", 0.7),
      },
      event_agent: {
        ...base.events,
        model: eventModel || null,
        temperature: numberField("#event-temperature", 0),
        enabled_tools: [...this.root.querySelectorAll("#tool-list input:checked")].map((box) => box.value),
        max_event_loops: numberField("#max-event-loops", 3),
        max_parallel_events: numberField("#max-parallel-events", 8),
      },
      tool_invocation_mode: this.mode(),
    };
  }

  // The endpoint and key fields as typed (null when both are blank); kept in memory only.
  typedConnection() {
    const fields = { baseUrl: $("#base-url").value, apiKey: $("#api-key").value };
    return fields.baseUrl.trim() || fields.apiKey.trim() ? fields : null;
  }

  setConnection(fields) {
    $("#base-url").value = fields?.baseUrl || "";
    $("#api-key").value = fields?.apiKey || "";
  }

  connection() {
    const baseUrl = $("#base-url").value.trim();
    const apiKey = $("#api-key").value.trim();
    if (!baseUrl && !apiKey) return null;
    return { base_url: baseUrl || null, api_key: apiKey || null };
  }
}

function toolCheckbox(tool) {
  return h("label", { class: "tool", title: tool.description },
    h("input", { type: "checkbox", value: tool.name, checked: tool.enabled_by_default }),
    h("span", { class: "tool-name" }, tool.name),
    h("span", { class: `badge policy-${tool.result_policy}` }, tool.result_policy.replace("_", " ")));
}

function setValue(selector, value) {
  $(selector).value = value;
}

// A number field as typed (blank: `fallback`), never bent into range: the server says
// under the field what is wrong with 0, 2.5 or 99 (`null` when it is not a number).
function numberField(selector, fallback) {
  const input = $(selector);
  if (input.validity?.badInput) return null;
  const text = input.value.trim();
  if (!text) return fallback;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

export function splitPrompts(text) {
  return text.split(/^\s*---\s*$/m).map((part) => part.trim()).filter(Boolean);
}

export function parsePreMessages(text) {
  const messages = [];
  for (const line of text.split("\n")) {
    const match = line.match(/^\s*(system|user|assistant)\s*:\s?(.*)$/i);
    if (match) messages.push({ role: match[1].toLowerCase(), content: match[2] });
    else if (messages.length && line.trim()) messages[messages.length - 1].content += `\n${line}`;
  }
  return messages.filter((message) => ROLES.includes(message.role) && message.content.trim());
}

function formatPreMessages(messages) {
  return messages.map((message) => `${message.role}: ${message.content}`).join("\n");
}
