// The page: sign in, the App's face (title, intro, starters, panel), conversations (open, rename, delete),
// chat with streamed Markdown answers, a visible working state with Stop, tool, confirmation and job
// cards, standing approvals. No framework, no build step.
import { ApiError, StreamCut, clearToken, del, getBlob, getJSON, getToken, patchJSON, postJSON, serverIsUp, setToken, stream, streamGet } from "./api.js";
import {
  assistantBubble,
  confirmationCard,
  contentList,
  conversationRow,
  el,
  jobCard,
  markFailed,
  markInterrupted,
  markStopped,
  markWaiting,
  resultView,
  ruleItem,
  taskItem,
  toolCard,
  userBubble,
} from "./view.js";

const CONVERSATION_KEY = "toolrun.conversation";
const $ = (id) => document.getElementById(id);
const MAX_MESSAGE = Number(document.body.dataset.maxMessage) || 32000;

const state = {
  conversationId: localStorage.getItem(CONVERSATION_KEY),
  busy: false,
  run: null, // the turn in flight: {conversationId, stopping}
  face: null, // GET /api/v1/app
  schemas: null, // tool name → input schema (the approval edit form)
  rules: [], // standing approvals (GET /api/v1/approval-rules)
  cards: new Map(), // call id → tool card
  confirmations: new Map(), // confirmation id → confirmation card
  jobs: new Map(), // job id → job card
  watching: false, // the jobs stream is being read
};

// -- errors in plain words ---------------------------------------------------------------------------

function showError(error) {
  const box = $("error");
  const words = error instanceof Error ? error.message : String(error);
  box.textContent = words;
  box.hidden = false;
  if (error instanceof ApiError && error.status === 401) signOut(false);
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

// -- the App's face --------------------------------------------------------------------------------------

const DEFAULT_FACE = { title: "Assistant", intro: "", starters: [], panel: null, demo: false };

async function loadFace() {
  try {
    state.face = { ...DEFAULT_FACE, ...(await getJSON("/api/v1/app")) };
  } catch {
    state.face = DEFAULT_FACE;
  }
  const face = state.face;
  $("app-title").textContent = face.title;
  document.title = `${face.title} · toolrun`;
  $("empty-title").textContent = face.title;
  $("empty-intro").textContent = face.intro || "";
  $("empty-demo").hidden = !face.demo;
  $("starters").replaceChildren(
    ...face.starters.map((text) => {
      const button = el("button", { type: "button", class: "example", text });
      button.addEventListener("click", () => {
        $("message").value = text;
        checkLength();
        $("message").focus();
      });
      return el("li", {}, button);
    }),
  );
  const panel = face.panel;
  $("app").dataset.panel = panel ? "true" : "false";
  if (panel) {
    $("tasks-title").textContent = panel.title;
    document.querySelector(".views [data-show='tasks'] .panel-name").textContent = panel.title.replace(/^Your /i, "").replace(/^./, (c) => c.toUpperCase());
  }
}

// -- sign in -------------------------------------------------------------------------------------------

function tokenFromLink() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    setToken(token);
    history.replaceState(null, "", location.pathname + location.search); // keep it out of history
  }
}

function signedIn(yes) {
  $("app").dataset.signedIn = yes ? "true" : "false";
  $("sign-out").hidden = !yes;
  $("sign-in").hidden = yes;
}

function signOut(forget = true) {
  if (forget) {
    clearToken();
    localStorage.removeItem(CONVERSATION_KEY);
  }
  signedIn(false);
  $("token").focus();
}

async function start() {
  clearError();
  await loadFace();
  if (!getToken()) {
    signOut(false);
    return;
  }
  try {
    await refreshConversations();
  } catch (error) {
    showError(error);
    if (!(error instanceof ApiError && error.status === 401)) signedIn(false);
    return;
  }
  signedIn(true);
  await Promise.all([refreshPanel(), refreshRules()]);
  if (state.conversationId) await openConversation(state.conversationId);
  updateEmpty();
  $("message").focus();
}

// -- which panel a phone shows (a desktop shows all three) --------------------------------------------------

function show(view) {
  $("app").dataset.view = view;
  for (const button of document.querySelectorAll(".views button")) {
    button.setAttribute("aria-pressed", button.dataset.show === view ? "true" : "false");
  }
}

function updateEmpty() {
  $("empty").hidden = $("messages").childElementCount > 0;
}

function scrollToEnd() {
  const scroller = $("scroller");
  scroller.scrollTop = scroller.scrollHeight;
}

// -- the working state and Stop ----------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("composer").dataset.busy = busy ? "true" : "false";
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  $("stop").disabled = false;
  $("working").textContent = busy ? "The assistant is working…" : "";
  checkLength();
}

async function stopRun() {
  const run = state.run;
  if (!run || run.stopping) return;
  run.stopping = true;
  $("stop").disabled = true;
  $("working").textContent = "Stopping…";
  if (!run.conversationId) return; // sent when the run says which conversation it works on
  await sendStop(run);
}

async function sendStop(run) {
  try {
    await postJSON(`/api/v1/conversations/${encodeURIComponent(run.conversationId)}/stop`);
  } catch (error) {
    // 409: it had already finished; the stream says how it ended.
    if (!(error instanceof ApiError && error.status === 409)) showError(error);
  }
}

// -- the message limit -----------------------------------------------------------------------------------

function checkLength() {
  const length = $("message").value.length;
  const over = length > MAX_MESSAGE;
  $("message-limit").textContent = over
    ? `This message is ${length.toLocaleString()} characters long; the limit is ${MAX_MESSAGE.toLocaleString()}. Shorten it to send it.`
    : "";
  $("message").setAttribute("aria-invalid", over ? "true" : "false");
  $("send").disabled = over || state.busy;
  return !over;
}

// -- conversations ---------------------------------------------------------------------------------------

function setConversation(id) {
  state.conversationId = id;
  if (id) localStorage.setItem(CONVERSATION_KEY, id);
  else localStorage.removeItem(CONVERSATION_KEY);
  for (const button of document.querySelectorAll("#conversation-list .conversation-title")) {
    button.setAttribute("aria-current", button.dataset.id === id ? "true" : "false");
  }
}

async function refreshConversations() {
  const { conversations } = await getJSON("/api/v1/conversations");
  const list = $("conversation-list");
  list.replaceChildren(
    ...conversations.map((c) =>
      conversationRow(c, c.id === state.conversationId, {
        open: () => {
          show("chat");
          openConversation(c.id);
        },
        rename: async (title) => {
          await patchJSON(`/api/v1/conversations/${encodeURIComponent(c.id)}`, { title });
          await refreshConversations();
          document.querySelector(`#conversation-list .conversation[data-id="${CSS.escape(c.id)}"] .rename`)?.focus();
        },
        remove: async () => {
          await del(`/api/v1/conversations/${encodeURIComponent(c.id)}`);
          if (state.conversationId === c.id) newConversation(false);
          await refreshConversations();
          $("new-conversation").focus();
        },
      }),
    ),
  );
  if (!conversations.length) list.append(el("li", { class: "muted", text: "No conversations yet." }));
}

function resetChat() {
  $("messages").replaceChildren();
  state.cards.clear();
  state.confirmations.clear();
  state.jobs.clear();
  updateEmpty();
}

function newConversation(focus = true) {
  setConversation(null);
  resetChat();
  show("chat");
  if (focus) $("message").focus();
}

function parseError(content) {
  const found = /^Error ([A-Z_]+): ([^\n]*)/.exec(content);
  return { code: found ? found[1] : "ERROR", message: found ? found[2] : content };
}

async function openConversation(id) {
  clearError();
  let detail;
  try {
    detail = await getJSON(`/api/v1/conversations/${encodeURIComponent(id)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      setConversation(null);
      resetChat();
      return;
    }
    showError(error);
    return;
  }
  resetChat();
  setConversation(detail.id);
  const messages = $("messages");
  for (const m of detail.messages) {
    if (m.role === "user") messages.append(userBubble(m.content));
    else if (m.role === "assistant") {
      if (m.content || m.interrupted || m.stopped) {
        const bubble = assistantBubble(m.content || "");
        messages.append(bubble.item);
        if (m.interrupted) markInterrupted(bubble.item, "Interrupted: the server stopped before this answer was finished.");
        if (m.stopped) markStopped(bubble.item);
      }
      for (const call of m.tool_calls || []) addToolCard(call.id, call.name, call.arguments);
    } else if (m.role === "tool") {
      const card = state.cards.get(m.call_id);
      if (card) {
        let value = m.content;
        try {
          value = JSON.parse(m.content);
        } catch {
          // plain text result
        }
        if (m.is_error) {
          card.finish({ status: "error", error: parseError(m.content) });
        } else {
          card.finish({ status: "ok", result: value });
          if (m.content_items && m.content_items.length) card.card.append(contentList(m.content_items, getBlob));
          // a background job's start, as the model was told it: its card, loaded from the API
          const started = typeof value === "string" ? /^Started background job (job_\w+) /.exec(value) : null;
          addJobCard(started ? { job_id: started[1] } : value, card.card.dataset.tool, true);
        }
      }
    }
  }
  for (const pending of detail.pending || []) addConfirmation(pending);
  updateEmpty();
  scrollToEnd();
}

// -- background jobs -------------------------------------------------------------------------------------

/** A job card after the call that started the job (its value is `{job_id, status}`), kept up to date. */
function addJobCard(value, tool, load) {
  if (!value || typeof value !== "object" || typeof value.job_id !== "string" || state.jobs.has(value.job_id)) return;
  const card = jobCard(value.job_id, tool, (id) => del(`/api/v1/jobs/${encodeURIComponent(id)}`));
  state.jobs.set(value.job_id, card);
  $("messages").append(card.card);
  if (load) {
    getJSON(`/api/v1/jobs/${encodeURIComponent(value.job_id)}`)
      .then((job) => card.update(job))
      .catch(() => {});
  }
  watchJobs();
}

/** Read the jobs stream while a card shows a running job; reconnect after a cut. */
async function watchJobs() {
  if (state.watching) return;
  state.watching = true;
  try {
    for (let wait = 500; [...state.jobs.values()].some((c) => c.card.dataset.status === "running"); wait = Math.min(wait * 2, 10000)) {
      try {
        await streamGet("/api/v1/jobs/events?until_idle=true", (name, job) => {
          if (name === "job_progress" || name === "job_finished") state.jobs.get(job.id)?.update(job);
        });
        wait = 500;
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) return;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  } finally {
    state.watching = false;
  }
}

// -- a run's events --------------------------------------------------------------------------------------

function addToolCard(callId, tool, args) {
  const card = toolCard(callId, tool, args);
  state.cards.set(callId, card);
  $("messages").append(card.card);
  return card;
}

async function toolSchemas() {
  if (state.schemas === null) {
    try {
      const { tools } = await getJSON("/api/v1/tools?format=mcp");
      state.schemas = new Map(tools.map((t) => [t.name, t.inputSchema]));
    } catch {
      return new Map(); // the form falls back to a field per argument given
    }
  }
  return state.schemas;
}

async function addConfirmation(pending) {
  if (state.confirmations.has(pending.confirmation_id)) return;
  state.confirmations.set(pending.confirmation_id, null); // reserved while the schema loads
  for (const card of state.cards.values()) {
    if (card.card.dataset.tool === pending.tool && !card.card.dataset.finished) card.finish({ status: "confirmation_required" });
  }
  const schema = (await toolSchemas()).get(pending.tool) || null;
  const confirmation = confirmationCard(
    pending,
    (approve, settle, extra) => decide(pending, approve, settle, extra),
    (args) => postJSON(`/api/v1/confirmations/${encodeURIComponent(pending.confirmation_id)}/preview`, { arguments: args }),
    schema,
  );
  state.confirmations.set(pending.confirmation_id, confirmation);
  $("messages").append(confirmation.card);
  updateEmpty();
  scrollToEnd();
  confirmation.approve.focus();
}

function sameArguments(rule, args) {
  if (!rule.arguments) return true;
  return Object.entries(rule.arguments).every(([k, v]) => args && JSON.stringify(args[k]) === JSON.stringify(v));
}

function allowedByRule(tool, args) {
  return state.rules.some((r) => r.tool === tool && r.decision === "allow" && !r.expired && sameArguments(r, args));
}

function handlers(progress) {
  let bubble = null;
  let bubbleFor = null;
  const started = new Map(); // call id → arguments as the model sent them
  return (name, data) => {
    if (name === "run_started") {
      if (!state.conversationId || state.conversationId !== data.conversation_id) {
        setConversation(data.conversation_id);
        refreshConversations().catch(() => {}); // a new conversation is listed while it works
      }
      if (state.run) {
        state.run.conversationId = data.conversation_id;
        if (state.run.stopping) sendStop(state.run);
      }
    } else if (name === "text_delta") {
      if (!bubble || bubbleFor !== data.message_id) {
        bubble?.flush();
        bubble = assistantBubble();
        $("messages").append(bubble.item);
        bubbleFor = data.message_id;
        progress.bubble = bubble;
      }
      bubble.append(data.text);
    } else if (name === "tool_call_started") {
      bubble?.flush();
      bubble = null;
      started.set(data.call_id, data.arguments);
      addToolCard(data.call_id, data.tool, data.arguments);
    } else if (name === "tool_call_finished") {
      const card = state.cards.get(data.call_id) || addToolCard(data.call_id, data.tool, null);
      const waited = card.card.dataset.waited === "true";
      card.finish(data);
      // A held call's result comes after the decision that let it run, not above it.
      if (waited) $("messages").append(card.card);
      if (progress.edited && waited && data.tool === progress.edited.tool) card.setArguments(progress.edited.arguments);
      if (data.status === "ok" && !waited && started.has(data.call_id) && allowedByRule(data.tool, started.get(data.call_id))) card.note("rule");
      if (data.content && data.content.length) card.card.append(contentList(data.content, getBlob));
      if (data.status === "ok") addJobCard(data.result, data.tool, false);
      refreshPanel();
    } else if (name === "tool_call_progress") {
      const card = state.cards.get(data.call_id);
      if (card) card.progress(data);
    } else if (name === "confirmation_required") {
      bubble?.flush();
      bubble = null;
      addConfirmation(data);
    } else if (name === "run_finished") {
      bubble?.flush();
      progress.finished = true;
      if (data.status === "stopped") {
        let item = progress.bubble?.item;
        if (!item) {
          item = assistantBubble().item;
          $("messages").append(item);
        }
        markStopped(item);
      } else if (!["completed", "awaiting_confirmation", "needs_user_input"].includes(data.status)) {
        showError(`The assistant stopped before answering (${data.status})${data.error ? `: ${data.error}` : "."}`);
      }
    } else if (name === "error") {
      progress.finished = true;
      showError(`Something went wrong on the server: ${data.message}`);
    }
    updateEmpty();
    scrollToEnd();
  };
}

/** Wait for the server to come back, then show the conversation as the server kept it. */
async function reconnect() {
  for (let wait = 1000; !(await serverIsUp()); wait = Math.min(wait * 2, 10000)) {
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  clearError();
  if (state.conversationId) await openConversation(state.conversationId);
  await Promise.all([refreshConversations().catch(() => {}), refreshPanel()]);
}

async function run(path, body, conversationId, extra = {}) {
  state.run = { conversationId, stopping: false };
  setBusy(true);
  const progress = { finished: false, bubble: null, ...extra };
  try {
    await stream(path, body, handlers(progress));
    if (!progress.finished) throw new StreamCut("The answer stopped before it was finished.");
  } catch (error) {
    if (!(error instanceof StreamCut)) throw error;
    let item = progress.bubble?.item;
    if (!item) {
      item = assistantBubble().item;
      $("messages").append(item);
    }
    markInterrupted(item, "Interrupted: the connection to the server was lost before the answer was finished.");
    scrollToEnd();
    showError("The server went away while it was answering. Reconnecting when it is back…");
    reconnect();
    return;
  } finally {
    state.run = null;
    setBusy(false);
  }
  await Promise.all([refreshConversations().catch(() => {}), refreshPanel()]);
}

const BUSY_RETRIES = 40; // × 1.5 s: longer than a lease (TOOLRUN_LEASE_SECONDS, 15 s by default)

async function send(text, item = null, attempt = 0) {
  clearError();
  const bubble = item || userBubble(text);
  if (!item) $("messages").append(bubble);
  updateEmpty();
  scrollToEnd();
  const body = { message: text };
  if (state.conversationId) body.conversation_id = state.conversationId;
  try {
    await run("/api/v1/chat/stream", body, state.conversationId);
    markWaiting(bubble, null);
  } catch (error) {
    if (error instanceof ApiError && error.code === "conversation_busy" && attempt < BUSY_RETRIES) {
      // Held by an answer still running elsewhere, or by a server that died while answering (its lease
      // runs out within seconds): the message waits, and goes as soon as the conversation is free.
      markWaiting(bubble, "Waiting for the previous answer to finish or be released; this message goes as soon as it is…");
      setBusy(true);
      $("stop").hidden = true;
      $("working").textContent = "Waiting to send…";
      await new Promise((resolve) => setTimeout(resolve, 1500));
      setBusy(false);
      return send(text, bubble, attempt + 1);
    }
    markWaiting(bubble, null);
    // Refused or never arrived: the message stays on the page, marked, with a way to send it again.
    markFailed(bubble, `Not sent: ${error.message}`, () => send(text, bubble));
    if (error instanceof ApiError && error.status === 401) showError(error);
  }
}

async function decide(pending, approve, settle, extra = {}) {
  clearError();
  $("message").focus(); // the person goes on from the composer
  const body = { approve };
  if (approve && extra.arguments) body.arguments = extra.arguments;
  if (!approve && extra.reason) body.reason = extra.reason;
  try {
    if (approve && extra.always) {
      const expires = new Date(Date.now() + 30 * 86400 * 1000).toISOString();
      await postJSON("/api/v1/approval-rules", { tool: pending.tool, expires_at: expires });
      refreshRules();
    }
    const edited = approve && extra.arguments ? { tool: pending.tool, arguments: extra.arguments } : null;
    await run(`/api/v1/confirmations/${encodeURIComponent(pending.confirmation_id)}/stream`, body, pending.conversation_id, { edited });
  } catch (error) {
    settle(error instanceof ApiError && error.status === 404 ? "Already decided or expired: nothing ran." : "Not sent.");
    showError(error);
  }
}

// -- the side panel (the App's read-only tool) and standing approvals ---------------------------------------

function showTasks(tasks, total) {
  $("task-list").replaceChildren(...tasks.map(taskItem));
  const shown = tasks.length;
  $("task-count").textContent =
    total === 0 ? "No tasks yet." : shown < total ? `Showing ${shown} of ${total} tasks` : total === 1 ? "1 task" : `${total} tasks`;
  $("task-badge").textContent = total ? String(total) : "";
}

async function refreshPanel() {
  if (!state.face?.panel) return;
  try {
    const result = await getJSON("/api/v1/app/panel");
    const value = result.value;
    if (result.status !== "ok") {
      $("task-list").replaceChildren(el("li", {}, el("p", { text: result.error?.message || "The panel could not be shown." })));
      $("task-count").textContent = "";
    } else if (value && Array.isArray(value.tasks)) {
      showTasks(value.tasks, typeof value.total === "number" ? value.total : value.tasks.length);
    } else {
      $("task-list").replaceChildren(el("li", {}, resultView(value)));
      $("task-count").textContent = "";
    }
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 0)) showError(error);
  }
}

async function refreshRules() {
  try {
    const { rules } = await getJSON("/api/v1/approval-rules");
    state.rules = rules;
    $("rule-list").replaceChildren(
      ...rules.map((rule) =>
        ruleItem(rule, async () => {
          await del(`/api/v1/approval-rules/${encodeURIComponent(rule.id)}`);
          await refreshRules();
          $("refresh-tasks").focus();
        }),
      ),
    );
    $("rules-empty").hidden = rules.length > 0;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 0)) showError(error);
  }
}

// -- wiring ------------------------------------------------------------------------------------------------

$("sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  setToken(token);
  $("token").value = "";
  start();
});
$("sign-out").addEventListener("click", () => signOut(true));
$("new-conversation").addEventListener("click", () => newConversation());
$("refresh-tasks").addEventListener("click", () => Promise.all([refreshPanel(), refreshRules()]));
$("stop").addEventListener("click", stopRun);
for (const button of document.querySelectorAll(".views button")) {
  button.addEventListener("click", () => show(button.dataset.show));
}
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("message").value.trim();
  if (!text || state.busy || !checkLength()) return;
  $("message").value = "";
  checkLength();
  send(text);
});
$("message").addEventListener("input", checkLength);
$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  } else if (event.key === "Escape" && state.busy) {
    stopRun();
  }
});

tokenFromLink();
start();
