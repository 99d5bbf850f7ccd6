// REST calls with the optional bearer token (kept in sessionStorage, read from the
// URL fragment `#token=…` or asked for once, in one dialog, when the server answers
// 401 — concurrent requests share that one question).

import { h } from "./dom.js";

const TOKEN_KEY = "agentlab.token";

export class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

export function captureTokenFromFragment() {
  const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (!match) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

let asking = null;
let declined = false;

// Ask for the token once: every caller waiting meanwhile gets the same answer, and
// after a refusal nobody asks again until the user opens the dialog themselves.
export function askToken({ retry = false } = {}) {
  if (declined && !retry) return Promise.resolve(false);
  if (!asking) {
    asking = tokenDialog(retry || Boolean(token())).then((given) => {
      asking = null;
      declined = !given;
      return given;
    });
  }
  return asking;
}

function tokenDialog(wrong) {
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-wrong").hidden = !wrong;
  input.value = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      const value = input.value.trim();
      input.value = "";
      if (dialog.returnValue !== "ok" || !value) return resolve(false);
      sessionStorage.setItem(TOKEN_KEY, value);
      resolve(true);
    }, { once: true });
  });
}

export async function api(path, options = {}) {
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const headers = { ...(options.headers || {}) };
    const current = token();
    if (current) headers.Authorization = `Bearer ${current}`;
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401 && attempt < 2 && await askToken()) continue;
    if (!response.ok) throw new ApiError(response.status, await detailOf(response));
    if (options.raw) return response;
    return response.status === 204 ? null : response.json();
  }
  throw new ApiError(401, "missing or wrong token");
}

async function detailOf(response) {
  try {
    const body = await response.json();
    return typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch {
    return response.statusText;
  }
}

export function socketUrl(sessionId) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}/ws/sessions/${encodeURIComponent(sessionId)}`;
}

// The token rides in the Sec-WebSocket-Protocol header (never in the URL, so never in
// access logs): "agent-lab" plus "agent-lab.token.<base64url of the token>".
export function socketProtocols() {
  const current = token();
  if (!current) return ["agent-lab"];
  const bytes = new TextEncoder().encode(current);
  const encoded = btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  return ["agent-lab", `agent-lab.token.${encoded}`];
}

export async function download(path, filename) {
  const response = await api(path, { raw: true });
  const url = URL.createObjectURL(await response.blob());
  const link = h("a", { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 2000);
}
