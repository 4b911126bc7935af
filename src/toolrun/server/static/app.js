// The page: sign in, conversations, chat with streaming text, tool and confirmation cards, the task list.
import { ApiError, StreamCut, clearToken, del, getBlob, getJSON, getToken, postJSON, serverIsUp, setToken, stream, streamGet } from "./api.js";
import {
  assistantBubble,
  confirmationCard,
  contentList,
  el,
  jobCard,
  markFailed,
  markInterrupted,
  taskItem,
  toolCard,
  userBubble,
} from "./view.js";

const CONVERSATION_KEY = "toolrun.conversation";
const $ = (id) => document.getElementById(id);

const state = {
  conversationId: localStorage.getItem(CONVERSATION_KEY),
  busy: false,
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

// -- sign in -------------------------------------------------------------------------------------------

function tokenFromLink() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    setToken(token);
    history.replaceState(null, "", location.pathname + location.search); // keep it out of history
  }
}

function signOut(forget = true) {
  if (forget) {
    clearToken();
    localStorage.removeItem(CONVERSATION_KEY);
  }
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("token").focus();
}

async function start() {
  clearError();
  if (!getToken()) {
    signOut(false);
    return;
  }
  try {
    await refreshConversations();
  } catch (error) {
    showError(error);
    return;
  }
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  await refreshTasks();
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

// -- conversations ---------------------------------------------------------------------------------------

function setConversation(id) {
  state.conversationId = id;
  if (id) localStorage.setItem(CONVERSATION_KEY, id);
  else localStorage.removeItem(CONVERSATION_KEY);
  for (const button of document.querySelectorAll("#conversation-list button")) {
    button.setAttribute("aria-current", button.dataset.id === id ? "true" : "false");
  }
}

async function refreshConversations() {
  const { conversations } = await getJSON("/api/v1/conversations");
  const list = $("conversation-list");
  list.replaceChildren(
    ...conversations.map((c) => {
      const button = el(
        "button",
        { type: "button", "data-id": c.id, "aria-current": c.id === state.conversationId ? "true" : "false" },
        c.title,
        c.awaiting_confirmation ? el("span", { class: "waiting", text: "waiting for your decision" }) : null,
      );
      button.addEventListener("click", () => {
        show("chat");
        openConversation(c.id);
      });
      return el("li", {}, button);
    }),
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
      if (m.content || m.interrupted) {
        const { item, body } = assistantBubble();
        body.textContent = m.content || "";
        messages.append(item);
        if (m.interrupted) markInterrupted(item, "Interrupted: the server stopped before this answer was finished.");
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
          const found = /^Error ([A-Z_]+): ([^\n]*)/.exec(m.content);
          card.finish({ status: "error", error: { code: found ? found[1] : "ERROR", message: found ? found[2] : m.content } });
        } else {
          card.finish({ status: "ok", result: value });
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

function addConfirmation(pending) {
  if (state.confirmations.has(pending.confirmation_id)) return;
  for (const card of state.cards.values()) {
    if (card.card.dataset.tool === pending.tool && !card.card.dataset.finished) card.finish({ status: "confirmation_required" });
  }
  const confirmation = confirmationCard(
    pending,
    (approve, settle, extra) => decide(pending, approve, settle, extra),
    (args) => postJSON(`/api/v1/confirmations/${encodeURIComponent(pending.confirmation_id)}/preview`, { arguments: args }),
  );
  state.confirmations.set(pending.confirmation_id, confirmation);
  $("messages").append(confirmation.card);
  updateEmpty();
  scrollToEnd();
  confirmation.approve.focus();
}

function handlers(progress) {
  let bubble = null;
  let bubbleFor = null;
  return (name, data) => {
    if (name === "run_started") {
      if (!state.conversationId || state.conversationId !== data.conversation_id) setConversation(data.conversation_id);
    } else if (name === "text_delta") {
      if (!bubble || bubbleFor !== data.message_id) {
        const fresh = assistantBubble();
        $("messages").append(fresh.item);
        bubble = fresh;
        bubbleFor = data.message_id;
        progress.bubble = fresh.item;
      }
      bubble.body.textContent += data.text;
    } else if (name === "tool_call_started") {
      bubble = null;
      addToolCard(data.call_id, data.tool, data.arguments);
    } else if (name === "tool_call_finished") {
      const card = state.cards.get(data.call_id) || addToolCard(data.call_id, data.tool, null);
      const waited = card.card.dataset.waited === "true";
      card.finish(data);
      // A held call's result comes after the decision that let it run, not above it.
      if (waited) $("messages").append(card.card);
      if (data.content && data.content.length) card.card.append(contentList(data.content, getBlob));
      if (data.status === "ok") addJobCard(data.result, data.tool, false);
      refreshTasks();
    } else if (name === "tool_call_progress") {
      const card = state.cards.get(data.call_id);
      if (card) card.progress(data);
    } else if (name === "confirmation_required") {
      bubble = null;
      addConfirmation(data);
    } else if (name === "run_finished") {
      progress.finished = true;
      if (!["completed", "awaiting_confirmation", "needs_user_input"].includes(data.status)) {
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
  await Promise.all([refreshConversations().catch(() => {}), refreshTasks()]);
}

async function run(path, body) {
  state.busy = true;
  $("send").disabled = true;
  const progress = { finished: false, bubble: null };
  try {
    await stream(path, body, handlers(progress));
    if (!progress.finished) throw new StreamCut("The answer stopped before it was finished.");
  } catch (error) {
    if (!(error instanceof StreamCut)) throw error;
    let item = progress.bubble;
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
    state.busy = false;
    $("send").disabled = false;
  }
  await Promise.all([refreshConversations().catch(() => {}), refreshTasks()]);
}

async function send(text, item = null) {
  clearError();
  const bubble = item || userBubble(text);
  if (!item) $("messages").append(bubble);
  updateEmpty();
  scrollToEnd();
  const body = { message: text };
  if (state.conversationId) body.conversation_id = state.conversationId;
  try {
    await run("/api/v1/chat/stream", body);
  } catch (error) {
    // Refused or never arrived: the message stays on the page, marked, with a way to send it again.
    markFailed(bubble, `Not sent: ${error.message}`, () => send(text, bubble));
    if (error instanceof ApiError && error.status === 401) showError(error);
  }
}

async function decide(pending, approve, settle, extra = {}) {
  clearError();
  const body = { approve };
  if (approve && extra.arguments) body.arguments = extra.arguments;
  if (!approve && extra.reason) body.reason = extra.reason;
  try {
    if (approve && extra.always) {
      const expires = new Date(Date.now() + 30 * 86400 * 1000).toISOString();
      await postJSON("/api/v1/approval-rules", { tool: pending.tool, expires_at: expires });
    }
    await run(`/api/v1/confirmations/${encodeURIComponent(pending.confirmation_id)}/stream`, body);
  } catch (error) {
    settle(error instanceof ApiError && error.status === 404 ? "Already decided or expired: nothing ran." : "Not sent.");
    showError(error);
  }
}

// -- tasks -------------------------------------------------------------------------------------------------

async function refreshTasks() {
  try {
    const { tasks, total } = await getJSON("/api/v1/tasks?limit=200&sort=created_desc");
    $("task-list").replaceChildren(...tasks.map(taskItem));
    $("task-count").textContent = total === 0 ? "No tasks yet." : total === 1 ? "1 task" : `${total} tasks`;
    $("task-badge").textContent = total ? String(total) : "";
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
$("new-conversation").addEventListener("click", () => {
  setConversation(null);
  resetChat();
  show("chat");
  $("message").focus();
});
$("refresh-tasks").addEventListener("click", refreshTasks);
for (const button of document.querySelectorAll(".views button")) {
  button.addEventListener("click", () => show(button.dataset.show));
}
for (const button of document.querySelectorAll(".example")) {
  button.addEventListener("click", () => {
    $("message").value = button.textContent;
    $("message").focus();
  });
}
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("message").value.trim();
  if (!text || state.busy) return;
  $("message").value = "";
  send(text);
});
$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

tokenFromLink();
start();
