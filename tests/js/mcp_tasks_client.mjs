// Drives toolrun's MCP tasks with the official MCP TypeScript SDK client (1.x, protocol 2025-11-25): its
// experimental task API (client.experimental.tasks: callToolStream, getTask, getTaskResult, listTasks,
// cancelTask), which checks every answer against the SDK's schemas.
//
// stdin: {"url", "slow": {"name", "arguments"}, "calls": [{"name", "arguments"}]}
// stdout: {"protocolVersion", "capabilities", "tools", "streams": [[messages]], "listed", "cancelled",
//          "afterCancel", "resultOfCancelled"}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

const client = new Client({ name: "toolrun-tests", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(input.url)));
const tools = (await client.listTools()).tools;
const tasks = client.experimental.tasks;
const plain = (m) => (m.type === "error" ? { type: "error", error: String(m.error?.message ?? m.error) } : m);

const streams = [];
for (const call of input.calls) {
  const messages = [];
  for await (const message of tasks.callToolStream({ name: call.name, arguments: call.arguments })) {
    messages.push(plain(message));
  }
  streams.push(messages);
}

// A slow one: started, listed, cancelled, then its result asked for.
let slowId = null;
const slow = tasks.callToolStream({ name: input.slow.name, arguments: input.slow.arguments });
const first = await slow.next();
slowId = first.value?.task?.taskId ?? null;
const listed = (await tasks.listTasks()).tasks.map((t) => [t.taskId, t.status]);
let cancelled = null;
try {
  cancelled = await tasks.cancelTask(slowId);
} catch (error) {
  cancelled = { error: String(error?.message ?? error) };
}
let afterCancel = null;
try {
  afterCancel = await tasks.cancelTask(slowId);
} catch (error) {
  afterCancel = { error: String(error?.message ?? error) };
}
let resultOfCancelled = null;
try {
  resultOfCancelled = await tasks.getTaskResult(slowId);
} catch (error) {
  resultOfCancelled = { error: String(error?.message ?? error) };
}
const rest = [];
for await (const message of slow) rest.push(plain(message));
let unknown = null;
try {
  unknown = await tasks.getTask("task_" + "0".repeat(32));
} catch (error) {
  unknown = { error: String(error?.message ?? error), code: error?.code };
}

process.stdout.write(JSON.stringify({
  protocolVersion: client.transport?.protocolVersion ?? null,
  capabilities: client.getServerCapabilities(),
  tools: tools.map((t) => [t.name, t.execution ?? null]),
  streams,
  slowId,
  listed,
  cancelled,
  afterCancel,
  resultOfCancelled,
  rest,
  unknown,
}));
await client.close();
