// Drives a toolrun MCP server with the official MCP TypeScript SDK client (@modelcontextprotocol/sdk's
// Client, which checks every response against the protocol's schemas and a tool's structuredContent
// against the outputSchema listTools gave).
//
// stdin: {"transport": "stdio", "command", "args", "env"} or {"transport": "http", "url"},
//        plus "calls": [{"name", "arguments", "progress": true|false}]
//        ("progress": pass onprogress, so the client sends a progressToken and collects the notifications)
// stdout: {"server", "protocolVersion", "tools", "results": [{"result", "progress", "error"}]}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

const transport =
  input.transport === "stdio"
    ? new StdioClientTransport({ command: input.command, args: input.args, env: input.env, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(input.url));

const client = new Client({ name: "toolrun-tests", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools;

const results = [];
for (const call of input.calls) {
  const progress = [];
  const options = call.progress ? { onprogress: (p) => progress.push(p), timeout: 30000 } : { timeout: 30000 };
  try {
    const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, options);
    results.push({ result, progress, error: null });
  } catch (error) {
    results.push({ result: null, progress, error: String(error?.message ?? error) });
  }
}
const report = {
  server: client.getServerVersion(),
  protocolVersion: transport.protocolVersion ?? null,
  tools,
  results,
};
await client.close();
process.stdout.write(JSON.stringify(report));
