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

// -- dates in the reader's locale and time zone --------------------------------------------------------------

const DATE_ONLY = /T00:00(:00(\.0+)?)?(Z|[+-]00:?00)$/;

/**
 * A due date as a person reads it. A date typed without a time is stored as midnight UTC: it is shown as
 * that calendar day (in any time zone), not as the evening before; anything else in local time.
 */
export function formatDate(iso) {
  if (typeof iso !== "string" || !iso) return "";
  const when = new Date(iso);
  if (Number.isNaN(when.getTime())) return iso;
  if (DATE_ONLY.test(iso)) return when.toLocaleDateString(undefined, { dateStyle: "medium", timeZone: "UTC" });
  return when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// -- messages ----------------------------------------------------------------------------------------------

export function userBubble(text) {
  return el("li", { class: "msg user" }, el("span", { class: "who", text: "You" }), el("p", { class: "body", text }));
}

/** Mark a message that never reached the server: it stays, with the reason and a Retry button. */
export function markFailed(item, words, retry) {
  item.classList.add("failed");
  item.querySelector(".note")?.remove();
  item.querySelector(".retry")?.remove();
  const button = el("button", { type: "button", class: "retry quiet", text: "Retry" });
  button.addEventListener("click", () => {
    item.classList.remove("failed");
    note.remove();
    button.remove();
    retry();
  });
  const note = el("p", { class: "note", role: "status", text: words });
  item.append(note, button);
}

export function assistantBubble() {
  const body = el("p", { class: "body" });
  const item = el("li", { class: "msg assistant" }, el("span", { class: "who", text: "Assistant" }), body);
  return { item, body };
}

/** Mark an answer that a lost connection or a server restart cut short. */
export function markInterrupted(item, words) {
  item.classList.add("interrupted");
  item.dataset.interrupted = "true";
  if (!item.querySelector(".note")) item.append(el("p", { class: "note", role: "status", text: words }));
}

// -- tool cards --------------------------------------------------------------------------------------------

const STATUS_WORDS = {
  running: "running…",
  ok: "done",
  error: "failed",
  confirmation_required: "waiting for your decision",
  denied: "declined: it did not run",
};

function scalar(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string" && /^\d{4}-\d{2}-\d{2}T/.test(value)) return formatDate(value);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** `title="Buy milk", due="2026-12-01"`: arguments on one line, for the card's head. */
function argsLine(args) {
  if (args === null || args === undefined) return null;
  if (typeof args !== "object" || Array.isArray(args)) return el("p", { class: "args-line" }, el("code", { text: pretty(args) }));
  const entries = Object.entries(args);
  if (!entries.length) return null;
  const line = el("p", { class: "args-line" });
  entries.forEach(([name, value], i) => {
    if (i) line.append(", ");
    line.append(`${name} `, el("code", { text: typeof value === "string" ? value : JSON.stringify(value) }));
  });
  return line;
}

const isTask = (v) => v && typeof v === "object" && !Array.isArray(v) && typeof v.id === "string" && v.id.startsWith("task_") && "title" in v;

/** A result as a person reads it: tasks as task rows, objects as key/value, lists as lists, text as text. */
export function resultView(value) {
  if (isTask(value)) return el("ul", { class: "result-view task-rows" }, taskItem(value));
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const lists = Object.entries(value).filter(([, v]) => Array.isArray(v) && v.length && v.every(isTask));
    if (lists.length === 1) {
      const [key, tasks] = lists[0];
      const rest = Object.fromEntries(Object.entries(value).filter(([k]) => k !== key));
      const view = el("div", { class: "result-view" }, el("ul", { class: "task-rows" }, ...tasks.map(taskItem)));
      if (Object.keys(rest).length) view.append(keyValues(rest));
      return view;
    }
    return el("div", { class: "result-view" }, keyValues(value));
  }
  if (Array.isArray(value)) {
    if (value.length && value.every(isTask)) return el("ul", { class: "result-view task-rows" }, ...value.map(taskItem));
    return el("ul", { class: "result-view" }, ...value.map((v) => el("li", { text: scalar(v) })));
  }
  return el("div", { class: "result-view" }, el("p", { class: "text", text: scalar(value) }));
}

function keyValues(object) {
  const list = el("dl");
  for (const [key, value] of Object.entries(object)) list.append(el("dt", { text: key.replaceAll("_", " ") }), el("dd", { text: scalar(value) }));
  return list;
}

/** A card for one tool call: tool, arguments, status, then its result (for people; raw JSON one click away). */
export function toolCard(callId, tool, args) {
  const status = el("span", { class: "status", "data-status": "running", text: STATUS_WORDS.running });
  const duration = el("span", { class: "duration" });
  const body = el("div", { class: "card-body" });
  const card = el(
    "li",
    { class: "card tool", "data-call-id": callId, "data-tool": tool },
    el("div", { class: "card-head" }, el("span", { class: "tool-name", text: tool }), status, duration),
    argsLine(args),
    body,
  );
  return {
    card,
    progress({ progress, total, message }) {
      const share = typeof total === "number" && total > 0 ? ` ${Math.round((100 * progress) / total)}%` : "";
      status.textContent = `${STATUS_WORDS.running}${share}${message ? ` ${message}` : ""}`;
    },
    finish({ status: state, result: value, error, duration_ms }) {
      const denied = error && error.code === "CONFIRMATION_DENIED";
      const key = denied ? "denied" : state;
      status.dataset.status = key;
      status.textContent = STATUS_WORDS[key] || state;
      if (state === "confirmation_required") {
        card.dataset.waited = "true";
        return;
      }
      card.dataset.finished = "true";
      const raw = el("pre", { class: "result", text: error ? `${error.code}: ${error.message}` : pretty(value) });
      if (error) {
        const words = `${error.message}${error.recover_action ? `\n${error.recover_action}` : ""}`;
        body.replaceChildren(el("p", { class: "result-label", text: denied ? "Declined" : "Error" }), el("p", { class: "result-error", text: words }));
      } else {
        body.replaceChildren(el("p", { class: "result-label", text: "Result" }), resultView(value));
      }
      body.append(el("details", { class: "raw" }, el("summary", { text: "Raw JSON" }), raw));
      if (typeof duration_ms === "number") duration.textContent = `${duration_ms.toFixed(1)} ms`;
    },
  };
}

// -- background jobs ---------------------------------------------------------------------------------------

const JOB_WORDS = {
  running: "running…",
  cancelling: "cancelling…",
  completed: "done",
  failed: "failed",
  cancelled: "cancelled",
};

/**
 * A card for a background job (a long tool that goes on after the answer): its tool, where it stands
 * (a progress bar and the tool's own words), a Cancel button while it runs, then its result.
 * `update(job)` takes the job as the API shows it; `cancel(id)` asks the server to stop it.
 */
export function jobCard(jobId, tool, cancel) {
  const status = el("span", { class: "status", "data-status": "running", text: JOB_WORDS.running });
  const bar = el("progress", { class: "job-progress", "aria-label": `Progress of ${tool}` });
  const words = el("p", { class: "job-words", role: "status" });
  const body = el("div", { class: "card-body" });
  const stop = el("button", { type: "button", class: "quiet cancel-job", text: "Cancel" });
  const card = el(
    "li",
    { class: "card job", "data-job-id": jobId, "data-status": "running" },
    el("div", { class: "card-head" }, el("span", { class: "job-label", text: "Background job" }), el("span", { class: "tool-name", text: tool }), status),
    bar,
    words,
    el("div", { class: "actions" }, stop),
    body,
  );
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    status.dataset.status = "running";
    status.textContent = JOB_WORDS.cancelling;
    try {
      await cancel(jobId);
    } catch (error) {
      stop.disabled = false;
      status.textContent = JOB_WORDS.running;
      words.textContent = `Could not cancel: ${error.message}`;
    }
  });
  return {
    card,
    update(job) {
      if (card.dataset.status !== "running") return; // an end is final
      const progress = job.progress;
      if (progress && typeof progress.progress === "number") {
        if (typeof progress.total === "number" && progress.total > 0) {
          bar.max = progress.total;
          bar.value = Math.min(progress.progress, progress.total);
        }
        const share = typeof progress.total === "number" && progress.total > 0 ? `${progress.progress} of ${progress.total}` : `${progress.progress}`;
        words.textContent = progress.message ? `${progress.message} (${share})` : share;
      }
      if (job.status === "running") return;
      if (job.status === "cancelling") {
        // asked to stop; still running until its tool's code has stopped (a blocking tool: its thread)
        stop.disabled = true;
        status.textContent = JOB_WORDS.cancelling;
        return;
      }
      card.dataset.status = job.status;
      status.dataset.status = job.status === "completed" ? "ok" : "error";
      status.textContent = JOB_WORDS[job.status] || job.status;
      bar.remove();
      stop.parentElement.remove();
      const result = job.result || {};
      const error = result.error;
      if (job.status === "cancelled") {
        words.textContent = "Cancelled: it stopped before it finished (it may have done part of its work).";
      } else if (error) {
        words.textContent = "";
        body.replaceChildren(el("p", { class: "result-label", text: "Error" }), el("p", { class: "result-error", text: error.message || error.code }));
      } else {
        words.textContent = "";
        body.replaceChildren(el("p", { class: "result-label", text: "Result" }), resultView(result.value));
      }
      body.append(el("details", { class: "raw" }, el("summary", { text: "Raw JSON" }), el("pre", { class: "result", text: pretty(job) })));
    },
  };
}

/** What a tool returned beside JSON: text as text, images shown, files and links as links. Bytes are
 * fetched with the user's token (`loadBlob(url)`) and shown through blob: URLs. */
export function contentList(items, loadBlob) {
  const list = el("ul", { class: "content" });
  for (const item of items || []) {
    if (item.type === "text") {
      list.append(el("li", {}, el("p", { text: item.text })));
    } else if (item.type === "image") {
      const img = el("img", { alt: `Image from the tool (${item.media_type || "image"})`, class: "result-image" });
      list.append(el("li", {}, img));
      if (item.url && item.url.startsWith("/api/")) {
        loadBlob(item.url).then((blob) => { img.src = URL.createObjectURL(blob); }, () => { img.alt = "The image could not be loaded."; });
      }
    } else {
      const name = item.name || item.uri || item.url || item.type;
      const link = el("a", { text: `${name}${item.size ? ` (${item.size.toLocaleString()} bytes)` : ""}` });
      const target = item.uri || item.url;
      if (item.url && item.url.startsWith("/api/")) {
        link.href = "#";
        link.addEventListener("click", async (event) => {
          event.preventDefault();
          const blob = await loadBlob(item.url);
          const a = el("a", { href: URL.createObjectURL(blob) });
          a.download = item.name || "download";
          a.click();
        });
      } else if (target && /^https?:/.test(target)) {
        link.href = target;
        link.rel = "noopener noreferrer";
      }
      list.append(el("li", {}, link));
    }
  }
  return list;
}

/**
 * The action a person is asked to approve: the tool's preview (from the server's records) first, every
 * argument in full beside it; Approve (optionally with edited arguments, previewed again first, and
 * "always allow" for 30 days), or Deny with an optional reason the assistant is told.
 * `decide(approve, settle, extra)` sends the decision; `previewEdit(arguments)` asks what an edit would do.
 */
export function confirmationCard(pending, decide, previewEdit) {
  const args = el("dl", { class: "arguments" });
  const entries = pending.arguments && typeof pending.arguments === "object" ? Object.entries(pending.arguments) : [["arguments", pending.arguments]];
  for (const [name, value] of entries) {
    args.append(el("dt", { text: name }), el("dd", {}, typeof value === "string" ? value : el("pre", { text: pretty(value) })));
  }
  const shown = pending.preview || pending.summary;
  const preview = el("p", { class: "preview", text: shown });
  const details = el("details", { class: "call" }, el("summary", { text: "The call as the assistant made it" }), el("p", { class: "summary", text: pending.summary }));
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny" });
  const edit = el("button", { type: "button", class: "edit", text: "Edit…" });
  const always = el("input", { type: "checkbox", class: "always" });
  const alwaysLabel = el("label", { class: "always-label" }, always, document.createTextNode(` Always allow ${pending.tool} for me (30 days)`));
  const reason = el("input", { type: "text", class: "reason", placeholder: "Reason, if you deny (optional)", maxLength: 2000, "aria-label": "Reason for denying" });
  const editor = el("textarea", { class: "edit-arguments", rows: 4, hidden: true, "aria-label": "Edited arguments (JSON)" });
  editor.value = JSON.stringify(pending.arguments ?? {}, null, 2);
  const check = el("button", { type: "button", class: "check-edit", text: "Preview the edit", hidden: true });
  const edited = el("p", { class: "edited", role: "status" });
  const outcome = el("p", { class: "outcome", role: "status" });
  const expires = pending.expires_at ? `Expires ${new Date(pending.expires_at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}` : null;
  let editedArguments = null;
  const card = el(
    "li",
    { class: "card confirm", "data-confirmation-id": pending.confirmation_id, tabindex: "-1" },
    el("h3", { text: `Confirm: ${pending.tool}` }),
    preview,
    args,
    details,
    editor,
    check,
    edited,
    alwaysLabel,
    reason,
    el("div", { class: "actions" }, approve, deny, edit),
    expires ? el("p", { class: "expires", text: expires }) : null,
    outcome,
  );
  const settle = (words) => {
    for (const control of [approve, deny, edit, check, always, reason, editor]) control.disabled = true;
    outcome.textContent = words;
    card.dataset.decided = "true";
  };
  edit.addEventListener("click", () => {
    editor.hidden = false;
    check.hidden = false;
    editor.focus();
  });
  check.addEventListener("click", async () => {
    let parsed;
    try {
      parsed = JSON.parse(editor.value);
    } catch {
      edited.textContent = "That is not valid JSON.";
      return;
    }
    try {
      const seen = await previewEdit(parsed);
      editedArguments = seen.arguments;
      preview.textContent = seen.preview;
      edited.textContent = seen.changes.length ? `Changed: ${seen.changes.join("; ")}` : "No change.";
      approve.textContent = "Approve the edit";
    } catch (error) {
      editedArguments = null;
      edited.textContent = String(error.message || error);
    }
  });
  editor.addEventListener("input", () => {
    editedArguments = null; // an edit must be previewed again before it can be approved
    approve.textContent = "Approve";
    preview.textContent = shown;
  });
  approve.addEventListener("click", () => {
    if (!editor.hidden && editedArguments === null && editor.value !== JSON.stringify(pending.arguments ?? {}, null, 2)) {
      edited.textContent = "Preview the edit first, then approve it.";
      return;
    }
    settle("Approved.");
    decide(true, settle, { arguments: editedArguments, always: always.checked });
  });
  deny.addEventListener("click", () => {
    settle("Denied.");
    decide(false, settle, { reason: reason.value.trim() || null });
  });
  return { card, approve, settle };
}

const STATUS_LABEL = { pending: "to do", in_progress: "in progress", done: "done" };

export function taskItem(task) {
  const meta = el("span", { class: "task-meta" });
  const parts = [STATUS_LABEL[task.status] || task.status];
  if (task.priority && task.priority !== "medium") parts.push(el("span", { class: task.priority, text: task.priority }));
  if (task.eta) parts.push(`due ${formatDate(task.eta)}`);
  for (const tag of task.tags || []) parts.push(`#${tag}`);
  parts.filter(Boolean).forEach((part, i) => {
    if (i) meta.append(" · ");
    meta.append(part);
  });
  return el(
    "li",
    { class: "task", "data-task-id": task.id, "data-status": task.status },
    el("span", { class: "task-mark", "aria-hidden": "true" }),
    el("span", { class: "task-title", text: task.title || "(untitled)" }),
    meta,
    el("code", { class: "task-id", text: task.id }),
  );
}
