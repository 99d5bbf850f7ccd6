// How the page writes costs and token counts, the way the CLI does: dollars as
// `format_usd()` writes them (three significant digits and at least cents, `unknown`
// when the cost is not known — never `$0` for lack of a price or of usage), and tokens
// that say "not reported" where the provider sent no usage, never a measured-looking 0.

import { num } from "./dom.js";

const DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;

// US dollars, as `agent_lab.application.pricing.format_usd` writes them: the value's
// shortest decimal form (a JSON number) or a decimal string (the exports' form),
// quantized to max(2, 2 - adjusted exponent) places, rounding half to even.
export function usd(value) {
  if (value === null || value === undefined) return "unknown";
  if (typeof value === "number" && !Number.isFinite(value)) return "unknown";
  const match = DECIMAL.exec(String(value).trim());
  if (!match || !(match[2] || match[3])) return "unknown";
  const fraction = match[3] || "";
  const digits = `${match[2] || ""}${fraction}`.replace(/^0+/, "");
  if (!digits) return "$0";
  const exponent = Number(match[4] || 0) - fraction.length; // value = ±digits × 10^exponent
  const places = Math.max(2, 2 - (exponent + digits.length - 1));
  const units = roundHalfEven(digits, exponent + places); // value × 10^places, rounded
  const text = units.toString().padStart(places + 1, "0");
  return `$${match[1] === "-" ? "-" : ""}${text.slice(0, -places)}.${text.slice(-places)}`;
}

// digits × 10^shift rounded to an integer, half to even (a BigInt).
function roundHalfEven(digits, shift) {
  if (shift >= 0) return BigInt(digits + "0".repeat(shift));
  const cut = -shift;
  const padded = digits.padStart(cut + 1, "0");
  const kept = BigInt(padded.slice(0, padded.length - cut));
  const rest = padded.slice(padded.length - cut);
  const half = `5${"0".repeat(cut - 1)}`;
  if (rest > half || (rest === half && kept % 2n === 1n)) return kept + 1n;
  return kept;
}

// The model calls of a usage row (a session's or a turn's totals) whose provider sent
// no usage: their tokens are zeros, not counts.
export function unreportedCalls(row) {
  return Number(row?.unreported_usage_calls) || 0;
}

function noneReported(row) {
  const unreported = unreportedCalls(row);
  return unreported > 0 && unreported >= (Number(row?.model_calls) || 0);
}

// A usage row's tokens, as `sessions show` gives them: "not reported" when no call
// reported usage, "1,012 · 1 call not reported" when some did not.
export function tokensText(row, noun = "") {
  if (noneReported(row)) return noun ? `${noun} not reported` : "not reported";
  const unreported = unreportedCalls(row);
  const count = noun ? `${num(row?.total_tokens ?? 0)} ${noun}` : num(row?.total_tokens);
  return unreported ? `${count} · ${notReported(unreported)}` : count;
}

// Cached tokens: "not reported" when no call reported usage (a partial count is
// marked on the tokens).
export function cachedText(row) {
  return noneReported(row) ? "not reported" : num(row?.cached_tokens);
}

export function notReported(calls) {
  return `${num(calls)} call${calls === 1 ? "" : "s"} not reported`;
}

// Whether every model call of the row reported usage (its token count is a count).
export function fullyReported(row) {
  return unreportedCalls(row) === 0;
}
