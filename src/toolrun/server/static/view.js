// DOM building with textContent only: model output, tool results and task fields never become markup.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-") || ["type", "role", "id", "title", "tabindex"].includes(key))
      node.setAttribute(key, value === true ? "" : String(value));
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** JSON for a person: pretty-printed, in full (never truncated), as text. */
export function pretty(value) {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export function userBubble(text) {
  return el("li", { class: "msg user" }, el("span", { class: "who", text: "You" }), el("p", { class: "body", text }));
}

export function assistantBubble() {
  const body = el("p", { class: "body" });
  const item = el("li", { class: "msg assistant" }, el("span", { class: "who", text: "Assistant" }), body);
  return { item, body };
}

const STATUS_WORDS = {
  running: "running…",
  ok: "done",
  error: "failed",
  confirmation_required: "waiting for your decision",
  denied: "declined: it did not run",
};

/** A card for one tool call: tool, arguments, status, result, duration. */
export function toolCard(callId, tool, args) {
  const status = el("span", { class: "status", "data-status": "running", text: STATUS_WORDS.running });
  const result = el("pre", { class: "result", hidden: true });
  const duration = el("span", { class: "duration" });
  const card = el(
    "li",
    { class: "card tool", "data-call-id": callId, "data-tool": tool },
    el("div", { class: "card-head" }, el("span", { class: "tool-name", text: tool }), status, duration),
    el("p", { class: "args-label", text: "Arguments" }),
    el("pre", { class: "args", text: pretty(args) }),
    result,
  );
  return {
    card,
    finish({ status: state, result: value, error, duration_ms }) {
      const denied = error && error.code === "CONFIRMATION_DENIED";
      const key = denied ? "denied" : state;
      status.dataset.status = key;
      status.textContent = STATUS_WORDS[key] || state;
      if (state === "confirmation_required") return;
      result.hidden = false;
      result.textContent = error ? `${error.code}: ${error.message}${error.recover_action ? `\n${error.recover_action}` : ""}` : pretty(value);
      if (typeof duration_ms === "number") duration.textContent = `${duration_ms.toFixed(1)} ms`;
    },
  };
}

/** The whole action a person is asked to approve: every argument in full, Approve and Deny. */
export function confirmationCard(pending, decide) {
  const args = el("dl", { class: "arguments" });
  const entries = pending.arguments && typeof pending.arguments === "object" ? Object.entries(pending.arguments) : [["arguments", pending.arguments]];
  for (const [name, value] of entries) {
    args.append(el("dt", { text: name }), el("dd", {}, el("pre", { text: pretty(value) })));
  }
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny" });
  const outcome = el("p", { class: "outcome", role: "status" });
  const card = el(
    "li",
    { class: "card confirm", "data-confirmation-id": pending.confirmation_id, tabindex: "-1" },
    el("h3", { text: `Confirm: ${pending.tool}` }),
    el("p", { class: "summary", text: pending.summary }),
    args,
    el("p", { class: "muted", text: `Expires ${new Date(pending.expires_at).toLocaleString()}` }),
    el("div", { class: "actions" }, approve, deny),
    outcome,
  );
  const settle = (words) => {
    approve.disabled = true;
    deny.disabled = true;
    outcome.textContent = words;
    card.dataset.decided = "true";
  };
  approve.addEventListener("click", () => {
    settle("Approved.");
    decide(true, settle);
  });
  deny.addEventListener("click", () => {
    settle("Denied.");
    decide(false, settle);
  });
  return { card, approve, settle };
}

export function taskItem(task) {
  const meta = [task.status, task.priority, task.eta ? `due ${task.eta}` : null, ...(task.tags || []).map((t) => `#${t}`)]
    .filter(Boolean)
    .join(" · ");
  return el(
    "li",
    { class: "task", "data-task-id": task.id, "data-status": task.status },
    el("span", { class: "task-title", text: task.title || "(untitled)" }),
    el("span", { class: "task-meta", text: meta }),
    el("code", { class: "task-id", text: task.id }),
  );
}
