// Drives a toolrun server with the real AG-UI client (@ag-ui/client's HttpAgent, whose runAgent pipeline
// enforces the schema and verifies the event sequence of every run).
//
// stdin: {"url", "token", "threadId", "steps": [...]}; stdout: one JSON object {"steps": [...results]}.
// Steps:
//   {"op": "say", "text"}                        add a user message and run
//   {"op": "resume", "approved": true|false}     answer every open interrupt (buildResumeArray), run
//   {"op": "cancel"}                             answer every open interrupt with status "cancelled"
//   {"op": "resume_raw", "resume": [...]}        send these resume entries as they are (a forged/replayed one)
//   {"op": "forget_interrupts"}                  drop the client's own record of open interrupts, so the
//                                                next request reaches the server unchecked by the client
// Each result: {"types", "events", "interrupts", "runError", "clientError", "messages"}.
import { HttpAgent, buildResumeArray, EventType } from "@ag-ui/client";
import { randomUUID } from "node:crypto";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

const agent = new HttpAgent({
  url: input.url,
  headers: { Authorization: `Bearer ${input.token}` },
  threadId: input.threadId,
});

async function run(parameters) {
  const events = [];
  let interrupts = [];
  let runError = null;
  let clientError = null;
  try {
    await agent.runAgent(parameters, {
      onEvent: ({ event }) => {
        events.push(event);
      },
      onRunFinishedEvent: (params) => {
        if (params.outcome === "interrupt") interrupts = params.interrupts;
      },
      onRunErrorEvent: ({ event }) => {
        runError = { message: event.message, code: event.code ?? null };
      },
    });
  } catch (error) {
    clientError = String(error?.message ?? error);
  }
  return {
    types: events.map((e) => e.type),
    events,
    interrupts,
    runError,
    clientError,
    messages: agent.messages,
  };
}

const results = [];
for (const step of input.steps) {
  if (step.op === "say") {
    agent.addMessage({ id: randomUUID(), role: "user", content: step.text });
    results.push(await run({}));
  } else if (step.op === "resume" || step.op === "cancel") {
    const responses = {};
    for (const interrupt of agent.pendingInterrupts) {
      responses[interrupt.id] =
        step.op === "cancel" ? { status: "cancelled" } : { status: "resolved", payload: { approved: step.approved } };
    }
    let resume;
    try {
      resume = buildResumeArray(agent.pendingInterrupts, responses);
    } catch (error) {
      results.push({ types: [], events: [], interrupts: [], runError: null, clientError: String(error), messages: [] });
      continue;
    }
    results.push(await run({ resume }));
  } else if (step.op === "resume_raw") {
    results.push(await run({ resume: step.resume }));
  } else if (step.op === "forget_interrupts") {
    agent.pendingInterrupts = [];
    results.push({ types: [], events: [], interrupts: [], runError: null, clientError: null, messages: [] });
  } else {
    throw new Error(`unknown step ${step.op}`);
  }
}
void EventType;
process.stdout.write(JSON.stringify({ steps: results }));
