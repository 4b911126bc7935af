// The service's HTTP API (docs/service.md), with the token from sign-in. No framework, no build step.

const TOKEN_KEY = "toolrun.token";

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  localStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  localStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An error with words a person can act on. `status` 0: the server was not reached (nothing was sent). */
export class ApiError extends Error {
  constructor(message, status, code = null) {
    super(message);
    this.status = status;
    this.code = code; // the problem's `code` (e.g. "conversation_busy"), when the server said
  }
}

/** The stream of an answer broke off: the server went away (or restarted) while it was answering. */
export class StreamCut extends Error {}

const PLAIN = {
  401: "Your token was not accepted. Sign in again with a valid token.",
  403: "You are not allowed to do that.",
  404: "That no longer exists (it may have been deleted or already decided).",
  409: "The assistant is still working on this conversation, or waits for your decision on an action.",
  413: "That message is too long.",
  422: "The server could not read that request.",
  429: "Too many requests. Wait a moment and try again.",
};

async function problem(response) {
  let detail = "";
  let code = null;
  try {
    const body = await response.json();
    code = typeof body.code === "string" ? body.code : null;
    detail = body.detail || body.title || "";
    if (Array.isArray(detail)) detail = detail.map((d) => d.msg || String(d)).join("; ");
  } catch {
    // not JSON: keep the plain words below
  }
  const plain =
    PLAIN[response.status] ||
    (response.status === 503
      ? "The server is busy or restarting. Try again in a moment."
      : `The server answered with an error (${response.status}).`);
  return new ApiError(detail && response.status !== 401 ? `${plain} ${detail}` : plain, response.status, code);
}

/** Where the service is mounted: "" at the site's root, or a host app's prefix such as "/assistant". */
function url(path) {
  return path.startsWith("/") ? (document.body.dataset.root || "") + path : path;
}

async function request(method, path, body) {
  const headers = { Authorization: `Bearer ${getToken()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url(path), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError("Cannot reach the server. Check that it is running, then try again.", 0);
  }
  if (!response.ok) throw await problem(response);
  return response;
}

/** A stored result's bytes (an image, a file) as a Blob; the route answers its owner only. */
export async function getBlob(path) {
  return (await request("GET", path)).blob();
}

export async function getJSON(path) {
  return (await request("GET", path)).json();
}

export async function del(path) {
  await request("DELETE", path);
}

export async function postJSON(path, body) {
  return (await request("POST", path, body)).json();
}

export async function patchJSON(path, body) {
  return (await request("PATCH", path, body)).json();
}

/**
 * POST a body and read the response as server-sent events, calling onEvent(name, data) for each one.
 * (EventSource cannot POST or send a token, so the stream is read from fetch.) Throws ApiError when the
 * request is refused or never arrives, StreamCut when the answer breaks off midway.
 */
export async function stream(path, body, onEvent) {
  await readEvents(await request("POST", path, body), onEvent);
}

/** GET a stream of server-sent events (the jobs stream); as `stream`. */
export async function streamGet(path, onEvent) {
  await readEvents(await request("GET", path), onEvent);
}

async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch {
      throw new StreamCut("The connection to the server was lost before the answer was finished.");
    }
    const { value, done } = chunk;
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue; // a comment or a ping
      let parsed;
      try {
        parsed = JSON.parse(data.join("\n"));
      } catch {
        continue;
      }
      onEvent(name, parsed);
    }
  }
}

/** Whether the server answers its health check (used to reconnect after a cut). */
export async function serverIsUp() {
  try {
    return (await fetch(url("/healthz"), { cache: "no-store" })).ok;
  } catch {
    return false;
  }
}
