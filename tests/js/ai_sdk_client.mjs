// Drives a toolrun server with the real Vercel AI SDK 6 chat client: AbstractChat (what useChat wraps)
// over DefaultChatTransport, which parses the UI message stream with the SDK's own chunk schema, and
// sends approvals back automatically (lastAssistantMessageIsCompleteWithApprovalResponses).
//
// stdin: {"url", "token", "chatId", "steps": [...]}; stdout: {"steps": [...results]}.
// Steps:
//   {"op": "say", "text"}                       sendMessage and wait for the answer
//   {"op": "approve"} / {"op": "deny"}          addToolApprovalResponse for the open approval request,
//                                               wait for the automatic follow-up request to finish
//   {"op": "forge", "approvalId", "approved"}   send the current messages with the last tool part turned
//                                               into an approval-responded one carrying this id/value
//                                               ("@last": the id that part already carries)
//                                               (bypassing the chat), read the reply with readUIMessageStream
// Each result: {"status", "error", "bodies", "messages", "headers", "data", "preliminary"} ("data": the data
// parts the chat's onData callback received, transient ones included; "preliminary": each tool part the
// chat's state held with a preliminary output, as the chat held it).
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
} from "ai";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

let bodies = [];
let headers = [];
let data = [];
let preliminary = [];
const pending = new Set();
const recordingFetch = async (url, init) => {
  const response = await fetch(url, init);
  headers.push(Object.fromEntries(response.headers.entries()));
  const copy = response.clone();
  const read = copy.text().then((text) => bodies.push(text));
  pending.add(read);
  read.finally(() => pending.delete(read));
  return response;
};

class State {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
    for (const part of message.parts) {
      if (part.type?.startsWith("tool-") && part.preliminary === true) preliminary.push(structuredClone(part));
    }
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

let settle = null;
class Chat extends AbstractChat {
  constructor() {
    super({
      id: input.chatId,
      state: new State(),
      transport: new DefaultChatTransport({
        api: input.url,
        headers: { Authorization: `Bearer ${input.token}` },
        fetch: recordingFetch,
      }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onData: (part) => data.push(part),
      onFinish: () => settle?.(),
      onError: () => settle?.(),
    });
  }
}
const chat = new Chat();

function nextSettle() {
  return new Promise((resolve) => {
    settle = () => {
      settle = null;
      resolve();
    };
  });
}

function lastApprovalRequest() {
  for (const message of [...chat.messages].reverse()) {
    for (const part of message.parts) {
      if (part.type?.startsWith("tool-") && part.state === "approval-requested") return part;
    }
  }
  return null;
}

async function finished() {
  while (pending.size) await Promise.all([...pending]);
  const result = {
    status: chat.status,
    error: chat.error ? String(chat.error.message ?? chat.error) : null,
    bodies,
    headers,
    messages: structuredClone(chat.messages),
    data,
    preliminary,
  };
  bodies = [];
  headers = [];
  data = [];
  preliminary = [];
  return result;
}

const results = [];
for (const step of input.steps) {
  if (step.op === "say") {
    await chat.sendMessage({ text: step.text });
    results.push(await finished());
  } else if (step.op === "approve" || step.op === "deny") {
    const part = lastApprovalRequest();
    if (!part) {
      results.push({ status: chat.status, error: "no approval request to answer", bodies: [], headers: [], messages: [] });
      continue;
    }
    const done = nextSettle();
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: step.op === "approve" });
    const timedOut = await Promise.race([
      done.then(() => false),
      new Promise((resolve) => setTimeout(() => resolve(true), 10000).unref()),
    ]);
    if (timedOut) {
      results.push({ status: chat.status, error: "no follow-up request finished within 10 s", bodies, headers, messages: [] });
      continue;
    }
    results.push(await finished());
  } else if (step.op === "forge") {
    const messages = structuredClone(chat.messages);
    const last = messages[messages.length - 1];
    const part = [...last.parts].reverse().find((p) => p.type?.startsWith("tool-"));
    const id = step.approvalId === "@last" ? part.approval?.id : step.approvalId;
    part.state = "approval-responded";
    part.approval = { id, approved: step.approved };
    delete part.output;
    const transport = new DefaultChatTransport({
      api: input.url,
      headers: { Authorization: `Bearer ${input.token}` },
      fetch: recordingFetch,
    });
    let error = null;
    let message = null;
    try {
      const stream = await transport.sendMessages({
        chatId: input.chatId,
        messages,
        trigger: "submit-message",
        messageId: last.id,
        abortSignal: undefined,
      });
      for await (const m of readUIMessageStream({ message: last, stream, onError: (e) => (error = String(e)) })) {
        message = m;
      }
    } catch (e) {
      error = String(e?.message ?? e);
    }
    const result = await finished();
    results.push({ ...result, status: "forged", error, messages: message ? [message] : [] });
  } else {
    throw new Error(`unknown step ${step.op}`);
  }
}
process.stdout.write(JSON.stringify({ steps: results }));
