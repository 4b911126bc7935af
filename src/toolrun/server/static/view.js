// DOM building with textContent: tool results and task fields never become markup; an answer's Markdown
// becomes markup only through markdown.js (sanitised by DOMPurify).
import { renderMarkdown } from "./markdown.js";

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

/**
 * An answer: its text rendered as Markdown. `append(piece)` adds streamed text (rendered at most every
 * 50 ms), `set(text)` replaces it; `text()` is the raw text so far.
 */
/** Say on a message why it waits (it is sent again by itself); `null` clears it. */
export function markWaiting(item, words) {
  item.querySelector(".note.waiting-note")?.remove();
  if (words) item.append(el("p", { class: "note waiting-note", role: "status", text: words }));
}

export function assistantBubble(initial = "") {
  const body = el("div", { class: "body markdown" });
  const item = el("li", { class: "msg assistant" }, el("span", { class: "who", text: "Assistant" }), body);
  let text = initial;
  let timer = null;
  const render = () => {
    timer = null;
    renderMarkdown(body, text);
  };
  if (text) render();
  return {
    item,
    body,
    append(piece) {
      text += piece;
      if (timer === null) timer = setTimeout(render, 50);
    },
    set(value) {
      text = value;
      render();
    },
    flush() {
      if (timer !== null) {
        clearTimeout(timer);
        render();
      }
    },
    text: () => text,
  };
}

/** Mark an answer that a lost connection or a server restart cut short. */
export function markInterrupted(item, words) {
  item.classList.add("interrupted");
  item.dataset.interrupted = "true";
  if (!item.querySelector(".note")) item.append(el("p", { class: "note", role: "status", text: words }));
}

/** Mark an answer the person stopped: what it had said until then stays. */
export function markStopped(item) {
  item.classList.add("stopped");
  item.dataset.stopped = "true";
  if (!item.querySelector(".note")) item.append(el("p", { class: "note", role: "status", text: "Stopped: you stopped this answer here." }));
}

// -- tool cards --------------------------------------------------------------------------------------------

const STATUS_WORDS = {
  running: "running…",
  ok: "done",
  error: "failed",
  confirmation_required: "waiting for your decision",
  denied: "declined: it did not run",
  stopped: "stopped",
  started: "started in the background",
  rule: "done · allowed by your standing rule",
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
  let line = argsLine(args);
  const card = el(
    "li",
    { class: "card tool", "data-call-id": callId, "data-tool": tool },
    el("div", { class: "card-head" }, el("span", { class: "tool-name", text: tool }), status, duration),
    line,
    body,
  );
  return {
    card,
    /** Show the arguments the call ran with (a person's edit replaces the model's). */
    setArguments(values) {
      const fresh = argsLine(values);
      if (line && fresh) line.replaceWith(fresh);
      else if (fresh) card.querySelector(".card-head").after(fresh);
      else line?.remove();
      line = fresh;
      card.dataset.edited = "true";
    },
    /** Say on the card how the call was allowed (a standing rule) or what became of it. */
    note(key) {
      status.dataset.status = key === "rule" ? "ok" : key;
      status.textContent = STATUS_WORDS[key] || key;
      card.dataset.note = key;
    },
    progress({ progress, total, message }) {
      const share = typeof total === "number" && total > 0 ? ` ${Math.round((100 * progress) / total)}%` : "";
      status.textContent = `${STATUS_WORDS.running}${share}${message ? ` ${message}` : ""}`;
    },
    finish({ status: state, result: value, error, duration_ms }) {
      const denied = error && error.code === "CONFIRMATION_DENIED";
      const stopped = error && error.code === "STOPPED";
      const background = state === "ok" && value && typeof value === "object" && typeof value.job_id === "string";
      const key = denied ? "denied" : stopped ? "stopped" : background ? "started" : state;
      status.dataset.status = key;
      status.textContent = STATUS_WORDS[key] || state;
      if (state === "confirmation_required") {
        card.dataset.waited = "true";
        return;
      }
      card.dataset.finished = "true";
      const raw = el("pre", { class: "result", text: error ? `${error.code}: ${error.message}` : pretty(value) });
      if (denied) {
        // Spoken to the person (the model got its own words): they said no, so nothing happened.
        body.replaceChildren(el("p", { class: "result-declined", text: "You declined this action, so it did not run. Nothing was changed." }));
      } else if (stopped) {
        body.replaceChildren(el("p", { class: "result-declined", text: "You stopped the assistant while this was running: it was cancelled and may or may not have taken effect." }));
      } else if (background) {
        body.replaceChildren(el("p", { class: "result-declined", text: "It runs in the background: its card below says where it stands." }));
      } else if (error) {
        const words = `${error.message}${error.recover_action ? `\n${error.recover_action}` : ""}`;
        body.replaceChildren(el("p", { class: "result-label", text: "Error" }), el("p", { class: "result-error", text: words }));
      } else {
        body.replaceChildren(el("p", { class: "result-label", text: "Result" }), resultView(value));
      }
      body.append(el("details", { class: "raw" }, el("summary", { text: "Raw JSON" }), raw));
      if (typeof duration_ms === "number" && !background) duration.textContent = `${duration_ms.toFixed(1)} ms`;
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

let formCount = 0;

/** The JSON Schema type of a property (the first that is not null), its enum, and whether it is a list. */
function kind(prop) {
  if (!prop || typeof prop !== "object") return { type: "json" };
  const options = prop.anyOf || prop.oneOf;
  if (Array.isArray(options)) {
    const real = options.filter((o) => o && o.type !== "null");
    if (real.length === 1) return { ...kind(real[0]), nullable: true, description: prop.description, title: prop.title };
    return { type: "json" };
  }
  let type = prop.type;
  if (Array.isArray(type)) type = type.find((t) => t !== "null");
  if (Array.isArray(prop.enum)) return { type: "enum", options: prop.enum };
  if (type === "array" && prop.items && ["string", "integer", "number"].includes(prop.items.type)) return { type: "list", item: prop.items.type };
  if (["string", "integer", "number", "boolean"].includes(type)) return { type, format: prop.format };
  return { type: "json" };
}

/**
 * A form for a tool's arguments, generated from its JSON Schema: a field per parameter (text, number,
 * a choice, a yes/no box, a comma-separated list; JSON only for nested objects). `read()` gives the values
 * as the schema wants them, or throws an Error naming the field.
 */
export function argumentForm(schema, values) {
  const id = `args-${++formCount}`;
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const names = [...new Set([...Object.keys(props), ...Object.keys(values || {})])];
  const form = el("fieldset", { class: "edit-form" }, el("legend", { text: "Change what it will do" }));
  const readers = [];
  for (const name of names) {
    const info = kind(props[name]);
    const value = values ? values[name] : undefined;
    const fieldId = `${id}-${name}`;
    const label = el("label", { htmlFor: fieldId, text: props[name]?.title || name.replaceAll("_", " ") });
    let input;
    if (info.type === "boolean") {
      input = el("input", { type: "checkbox", id: fieldId, checked: value === true });
    } else if (info.type === "enum") {
      input = el("select", { id: fieldId });
      if (!required.has(name)) input.append(el("option", { value: "", text: "—" }));
      for (const option of info.options) input.append(el("option", { value: JSON.stringify(option), text: String(option), selected: option === value }));
    } else if (info.type === "integer" || info.type === "number") {
      input = el("input", { type: "number", id: fieldId, step: info.type === "integer" ? "1" : "any", value: value ?? "" });
    } else if (info.type === "list") {
      input = el("input", { type: "text", id: fieldId, value: Array.isArray(value) ? value.join(", ") : "" });
    } else if (info.type === "string") {
      const long = typeof value === "string" && (value.length > 60 || value.includes("\n"));
      input = el(long ? "textarea" : "input", { id: fieldId, rows: long ? 3 : undefined, type: long ? undefined : "text", value: value ?? "" });
    } else {
      input = el("textarea", { id: fieldId, rows: 3, class: "json", value: value === undefined ? "" : JSON.stringify(value, null, 2) });
    }
    const hint = props[name]?.description ? el("span", { class: "field-hint", text: props[name].description }) : null;
    form.append(el("div", { class: `field field-${info.type}` }, label, input, hint));
    readers.push(() => {
      const raw = input.type === "checkbox" ? input.checked : input.value;
      if (info.type === "boolean") return raw;
      if (typeof raw === "string" && raw.trim() === "") {
        if (required.has(name)) throw new Error(`${name} is required.`);
        return info.nullable ? null : undefined;
      }
      if (info.type === "enum") return JSON.parse(raw);
      if (info.type === "integer" || info.type === "number") {
        const number = Number(raw);
        if (!Number.isFinite(number) || (info.type === "integer" && !Number.isInteger(number))) throw new Error(`${name} must be ${info.type === "integer" ? "a whole number" : "a number"}.`);
        return number;
      }
      if (info.type === "list") {
        const items = raw.split(",").map((p) => p.trim()).filter(Boolean);
        return info.item === "string" ? items : items.map(Number);
      }
      if (info.type === "string") return raw;
      try {
        return JSON.parse(raw);
      } catch {
        throw new Error(`${name} is not valid JSON.`);
      }
    });
  }
  return {
    form,
    read() {
      const out = {};
      names.forEach((name, i) => {
        const value = readers[i]();
        if (value !== undefined) out[name] = value;
      });
      return out;
    },
  };
}

function argumentList(values) {
  const list = el("dl", { class: "arguments" });
  const entries = values && typeof values === "object" ? Object.entries(values) : [["arguments", values]];
  for (const [name, value] of entries) {
    list.append(el("dt", { text: name }), el("dd", {}, typeof value === "string" ? value : el("pre", { text: pretty(value) })));
  }
  return list;
}

/**
 * The action a person is asked to approve: the tool's preview (from the server's records) first, every
 * argument in full beside it; Approve (optionally with edited arguments — a form made from the tool's
 * schema, previewed again first — and "always allow" for 30 days), or Deny with an optional reason the
 * assistant is told. `decide(approve, settle, extra)` sends the decision; `previewEdit(arguments)` asks
 * what an edit would do; `schema` is the tool's input schema (null: a JSON box instead of fields).
 */
export function confirmationCard(pending, decide, previewEdit, schema = null) {
  let args = argumentList(pending.arguments);
  const shown = pending.preview || pending.summary;
  const preview = el("p", { class: "preview", text: shown });
  const details = el("details", { class: "call" }, el("summary", { text: "The call as the assistant made it" }), el("p", { class: "summary", text: pending.summary }));
  const approve = el("button", { type: "button", class: "approve", text: "Approve" });
  const deny = el("button", { type: "button", class: "deny", text: "Deny" });
  const edit = el("button", { type: "button", class: "edit", text: "Edit…" });
  const always = el("input", { type: "checkbox", class: "always" });
  const alwaysLabel = el("label", { class: "always-label" }, always, document.createTextNode(` Always allow ${pending.tool} for me (30 days)`));
  const reason = el("input", { type: "text", class: "reason", placeholder: "Reason, if you deny (optional)", maxLength: 2000, "aria-label": "Reason for denying" });
  const editor = argumentForm(schema, pending.arguments && typeof pending.arguments === "object" ? pending.arguments : {});
  editor.form.hidden = true;
  const check = el("button", { type: "button", class: "check-edit", text: "Preview the change", hidden: true });
  const edited = el("p", { class: "edited", role: "status" });
  const outcome = el("p", { class: "outcome", role: "status" });
  const expires = pending.expires_at ? `Expires ${new Date(pending.expires_at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}` : null;
  let editedArguments = null;
  let dirty = false;
  const card = el(
    "li",
    { class: "card confirm", "data-confirmation-id": pending.confirmation_id, tabindex: "-1" },
    el("h3", { text: `Confirm: ${pending.tool}` }),
    preview,
    args,
    details,
    editor.form,
    check,
    edited,
    alwaysLabel,
    reason,
    el("div", { class: "actions" }, approve, deny, edit),
    expires ? el("p", { class: "expires", text: expires }) : null,
    outcome,
  );
  const controls = () => [approve, deny, edit, check, always, reason, ...editor.form.querySelectorAll("input, select, textarea")];
  const settle = (words) => {
    for (const control of controls()) control.disabled = true;
    outcome.textContent = words;
    card.dataset.decided = "true";
  };
  edit.addEventListener("click", () => {
    editor.form.hidden = false;
    check.hidden = false;
    editor.form.querySelector("input, select, textarea")?.focus();
  });
  check.addEventListener("click", async () => {
    let parsed;
    try {
      parsed = editor.read();
    } catch (error) {
      edited.textContent = error.message;
      return;
    }
    try {
      const seen = await previewEdit(parsed);
      editedArguments = seen.arguments;
      dirty = false;
      preview.textContent = seen.preview;
      const fresh = argumentList(seen.arguments); // the card shows what will run
      args.replaceWith(fresh);
      args = fresh;
      card.dataset.edited = "true";
      edited.textContent = seen.changes.length ? `Changed: ${seen.changes.join("; ")}` : "No change.";
      approve.textContent = "Approve the change";
    } catch (error) {
      editedArguments = null;
      edited.textContent = String(error.message || error);
    }
  });
  editor.form.addEventListener("input", () => {
    dirty = true; // an edit must be previewed again before it can be approved
    editedArguments = null;
    approve.textContent = "Approve";
    preview.textContent = shown;
  });
  approve.addEventListener("click", () => {
    if (dirty && editedArguments === null) {
      edited.textContent = "Preview the change first, then approve it.";
      return;
    }
    settle(editedArguments ? "Approved with your change." : "Approved.");
    decide(true, settle, { arguments: editedArguments, always: always.checked });
  });
  deny.addEventListener("click", () => {
    settle("Denied: it will not run.");
    decide(false, settle, { reason: reason.value.trim() || null });
  });
  return { card, approve, settle, edited: () => editedArguments };
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

/**
 * A conversation in the list: its title opens it; Rename edits the title in place (Enter saves, Escape
 * cancels); Delete asks once more in the row. `actions`: `open()`, `rename(title)`, `remove()` (promises).
 */
export function conversationRow(conversation, current, actions) {
  const open = el(
    "button",
    { type: "button", class: "conversation-title", "data-id": conversation.id, "aria-current": current ? "true" : "false" },
    el("span", { class: "title-text", text: conversation.title }),
    conversation.awaiting_confirmation ? el("span", { class: "waiting", text: "waiting for your decision" }) : null,
  );
  const rename = el("button", { type: "button", class: "quiet icon rename", text: "✎", title: "Rename", "aria-label": `Rename “${conversation.title}”` });
  const remove = el("button", { type: "button", class: "quiet icon delete", text: "✕", title: "Delete", "aria-label": `Delete “${conversation.title}”` });
  const tools = el("span", { class: "row-actions" }, rename, remove);
  const row = el("li", { class: "conversation", "data-id": conversation.id }, open, tools);
  const restore = () => row.replaceChildren(open, tools);
  open.addEventListener("click", () => actions.open());
  rename.addEventListener("click", () => {
    const field = el("input", { type: "text", class: "rename-field", value: conversation.title, maxLength: 120, "aria-label": "New title" });
    const note = el("span", { class: "row-note", role: "status" });
    const save = async () => {
      const title = field.value.trim();
      if (!title || title === conversation.title) return restore();
      field.disabled = true;
      try {
        await actions.rename(title);
      } catch (error) {
        field.disabled = false;
        note.textContent = `Not renamed: ${error.message}`;
      }
    };
    field.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        save();
      } else if (event.key === "Escape") {
        restore();
        rename.focus();
      }
    });
    field.addEventListener("blur", () => {
      if (!field.disabled) save();
    });
    row.replaceChildren(field, note);
    field.focus();
    field.select();
  });
  remove.addEventListener("click", () => {
    const yes = el("button", { type: "button", class: "quiet danger confirm-delete", text: "Delete" });
    const no = el("button", { type: "button", class: "quiet", text: "Cancel" });
    const note = el("span", { class: "row-note", role: "status", text: "Delete this conversation?" });
    yes.addEventListener("click", async () => {
      yes.disabled = no.disabled = true;
      try {
        await actions.remove();
      } catch (error) {
        yes.disabled = no.disabled = false;
        note.textContent = `Not deleted: ${error.message}`;
      }
    });
    no.addEventListener("click", () => {
      restore();
      remove.focus();
    });
    row.replaceChildren(note, el("span", { class: "row-actions shown" }, yes, no));
    no.focus();
  });
  return row;
}

/** A standing approval in the side panel, with Revoke. `revoke()` asks the server. */
export function ruleItem(rule, revoke) {
  const until = rule.expires_at ? `until ${new Date(rule.expires_at).toLocaleDateString(undefined, { dateStyle: "medium" })}` : "";
  const scope = rule.arguments ? ` when ${Object.entries(rule.arguments).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")}` : "";
  const button = el("button", { type: "button", class: "quiet revoke", text: "Revoke", "aria-label": `Revoke the rule for ${rule.tool}` });
  const item = el(
    "li",
    { class: "rule", "data-rule-id": rule.id, "data-expired": rule.expired ? "true" : "false" },
    el("span", { class: "rule-text" }, el("code", { text: rule.tool }), ` ${rule.decision === "deny" ? "always refused" : "runs without asking"}${scope}`, el("span", { class: "muted", text: ` ${rule.expired ? "(expired)" : until}` })),
    button,
  );
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await revoke();
    } catch (error) {
      button.disabled = false;
      item.append(el("span", { class: "row-note", role: "status", text: `Not revoked: ${error.message}` }));
    }
  });
  return item;
}
