// REST calls with the optional bearer token (kept in sessionStorage, read from the
// URL fragment `#token=…` or asked for once when the server answers 401).

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

export function askToken() {
  const value = window.prompt("This lab needs its access token:");
  if (!value || !value.trim()) return false;
  sessionStorage.setItem(TOKEN_KEY, value.trim());
  return true;
}

export async function api(path, options = {}) {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const headers = { ...(options.headers || {}) };
    const current = token();
    if (current) headers.Authorization = `Bearer ${current}`;
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401 && attempt === 0 && askToken()) continue;
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
  const current = token();
  const query = current ? `?token=${encodeURIComponent(current)}` : "";
  return `${scheme}://${location.host}/ws/sessions/${encodeURIComponent(sessionId)}${query}`;
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
