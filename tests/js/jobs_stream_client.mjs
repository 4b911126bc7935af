// Reads toolrun's jobs stream (GET /api/v1/jobs/events?format=ai-sdk) with the real Vercel AI SDK 6: the
// transport's own stream parser (the SDK's chunk schema) and readUIMessageStream, which keeps one part per
// data part id (a newer `data-job` replaces the older one).
//
// stdin: {"url", "token"}; stdout: {"status", "error", "message"} (the last message state read).
import { DefaultChatTransport, readUIMessageStream } from "ai";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

const response = await fetch(input.url, { headers: { Authorization: `Bearer ${input.token}` } });
let error = null;
let message = null;
try {
  const transport = new DefaultChatTransport({ api: input.url });
  const chunks = transport.processResponseStream(response.body);
  for await (const m of readUIMessageStream({ stream: chunks, onError: (e) => (error = String(e)), terminateOnError: true })) {
    message = m;
  }
} catch (e) {
  error = String(e?.message ?? e);
}
process.stdout.write(JSON.stringify({ status: response.status, error, message }));
