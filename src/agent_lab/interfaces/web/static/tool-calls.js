// One tool call of the conversation: a collapsible block with its arguments (and how
// they were resolved), its result and status. Text only — never HTML.

import { h, num, parseJson, pretty } from "./dom.js";
import { shownStatus } from "./records.js";

export function toolCall(event) {
  const args = event.arguments && Object.keys(event.arguments).length ? event.arguments : null;
  const status = h("span", { class: "call-status" }, "running…");
  const result = h("pre", { class: "call-pre" }, "waiting for the result…");
  const el = h("details", { class: "call", dataset: { status: "running", id: event.id } },
    h("summary", {},
      h("span", { class: "call-icon", "aria-hidden": "true" }, "⚡"),
      h("span", { class: "call-name" }, event.name),
      h("span", { class: "call-args" }, args ? JSON.stringify(args) : ""),
      status),
    h("div", { class: "call-body" },
      h("div", { class: "call-label" }, "Arguments"),
      h("pre", { class: "call-pre" }, args ? pretty(args) : "resolved by the event agent"),
      h("div", { class: "call-label" }, "Result"),
      result,
      h("div", { class: "call-id" }, `id ${event.id}`)));
  return { el, status, result, argsLine: el.querySelector(".call-args"), argsPre: el.querySelector(".call-body .call-pre") };
}

const RESOLVED = {
  model: "written by the chat model", resolver: "the tool's argument resolver",
  argument_fallback: "an argument fallback call", argument_generation: "an argument generation call",
  empty: "no arguments needed", not_resolved: "not resolved",
};

export function setArguments(call, args, resolvedBy) {
  const how = resolvedBy ? ` (${RESOLVED[resolvedBy] || resolvedBy})` : "";
  if (args && Object.keys(args).length) {
    call.argsLine.textContent = JSON.stringify(args);
    call.argsPre.textContent = pretty(args) + how;
  } else if (resolvedBy) {
    call.argsPre.textContent = `resolved by the event agent${how}; arguments not recorded`;
  }
  call.el.dataset.resolvedBy = resolvedBy || "";
}

export function setExecution(call, tool) {
  const status = shownStatus(tool);
  if (status === "running" && call.el.dataset.result === "shown") return; // its result came first
  call.el.dataset.status = status;
  call.el.dataset.reason = tool.failure_reason || "";
  call.status.textContent = status === "running" ? "running…" : status;
  if (tool.result !== null && tool.result !== undefined) {
    call.result.textContent = pretty(tool.result);
    call.el.dataset.result = "shown";
  } else if (tool.result_capped) {
    call.result.textContent = `${tool.result_capped.head}… (${num(tool.result_capped.original_chars)} characters, capped)`;
    call.el.dataset.result = "shown";
  } else if (status !== "running") {
    call.result.textContent = `no result: ${tool.failure_reason || status}`;
  }
}

export function setResult(call, message) {
  const payload = parseJson(message.content);
  const failed = payload && typeof payload === "object" && !Array.isArray(payload) && "error" in payload;
  call.result.textContent = pretty(message.content);
  call.el.dataset.result = "shown";
  call.status.textContent = failed ? "error" : "done";
  call.el.dataset.status = failed ? "error" : "done";
}
