// A chat round's stats chips: visible TTFT, elapsed, the round's chat call's tokens and
// cost. Once the call has ended they are its turn record's figures, live and reopened
// alike: "not reported" when the provider sent no usage (never 0), the cost as
// `format_usd()` writes it.

import { h, ms, num } from "./dom.js";
import { usd } from "./figures.js";

export function roundStats(record, round) {
  const usage = chatCall(record, round.round_index)?.usage || {};
  return {
    round_index: round.round_index, ttft_ms: round.visible_ttft_ms, elapsed_ms: round.elapsed_ms,
    prompt_tokens: usage.prompt_tokens ?? 0, completion_tokens: usage.completion_tokens ?? 0,
    total_tokens: usage.total_tokens ?? 0, cached_tokens: usage.cached_tokens ?? 0,
    had_event: (round.event_ids || []).length > 0,
  };
}

// The chat call of round `index` in a turn record, once it has ended.
export function chatCall(record, index) {
  const round = (record?.rounds || []).find((entry) => entry.round_index === index);
  const call = (record?.model_calls || []).find((entry) => entry.metric_key === round?.model_call);
  return call && call.status !== "running" ? call : null;
}

// `call`: the round's chat call in the turn record (null until it has ended).
export function statsChips(stats, call) {
  const chip = (label, value, title, figure) => h("span", { class: "chip", title, dataset: figure ? { figure } : null }, h("b", {}, label), " ", value);
  const usage = call ? call.usage : stats;
  const tokens = usage
    ? [chip("chat tokens", num(usage.total_tokens), `the round's chat call: prompt ${num(usage.prompt_tokens)} · completion ${num(usage.completion_tokens)} (argument calls count in the turn's total)`, "chat-tokens"),
      chip("cached", num(usage.cached_tokens), "cached prompt tokens", "cached")]
    : [chip("chat tokens", "not reported", "the provider sent no usage for the round's chat call", "chat-tokens")];
  return h("div", { class: "stats" },
    chip("round", String(stats.round_index ?? "?"), "chat round"),
    chip("TTFT", ms(stats.ttft_ms), "visible time to first token"),
    chip("elapsed", ms(stats.elapsed_ms), "round wall time"),
    ...tokens,
    call ? chip("cost", usd(call.cost?.amount_usd), costTitle(call), "cost") : null,
    stats.had_event ? h("span", { class: "chip chip-event", title: "this round ran tools" }, "tools") : null);
}

const UNKNOWN_COST = { no_usage_reported: "the provider reported no usage", unpriced_model: "the model has no price", no_model: "no model named" };

function costTitle(call) {
  const reason = call.cost?.unknown_reason;
  return reason ? `unknown: ${UNKNOWN_COST[reason] || reason}` : "the round's chat call, US dollars from the lab's price table";
}
