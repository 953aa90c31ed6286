// The HTTP side: the API key (kept in this tab's sessionStorage, sent only as an Authorization
// header, never in a URL) and JSON calls with Cage's error body turned into a readable message.

const KEY = "cage.key";

export function getKey() {
  return sessionStorage.getItem(KEY);
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function describe(status, body) {
  if (body && typeof body === "object") {
    if (typeof body.detail === "string") return body.detail;
    if (body.error && typeof body.error === "object" && body.error.message) return body.error.message;
    if (body.error_id) return `server error (error_id ${body.error_id} in the server log)`;
  }
  return `HTTP ${status}`;
}

/** `method path` with the key; the parsed JSON body, or null for 204. */
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (response.status === 204) return null;
  let parsed = null;
  try { parsed = await response.json(); } catch { parsed = null; }
  if (!response.ok) throw new ApiError(response.status, describe(response.status, parsed));
  return parsed;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body ?? {});
export const del = (path) => call("DELETE", path);

/** A single-use websocket ticket for the key (the websocket cannot carry a header). */
export async function wsTicket() {
  return (await post("/v1/sessions/ws-ticket")).ticket;
}

/** Whether the key is an admin's: the admin API answers it (a user key gets 403). */
export async function isAdmin() {
  try {
    await get("/v1/admin/audit?limit=1");
    return true;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 403 || err.status === 404)) return false;
    throw err;
  }
}

/** POST `body` to an SSE route and call `onEvent(name, data)` per event until the stream ends
 * (fetch, not EventSource: EventSource cannot send the key's header). */
export async function postStream(path, body, onEvent) {
  const response = await fetch(path, {
    method: "POST",
    headers: { Authorization: `Bearer ${getKey()}`, "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  if (!response.ok) {
    let parsed = null;
    try { parsed = await response.json(); } catch { parsed = null; }
    throw new ApiError(response.status, describe(response.status, parsed));
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (!data.length) continue; // a keep-alive comment
      let parsed = data.join("\n");
      try { parsed = JSON.parse(parsed); } catch { /* plain text */ }
      onEvent(name, parsed);
    }
  }
}
