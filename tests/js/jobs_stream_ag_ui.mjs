// Reads toolrun's jobs stream (GET /api/v1/jobs/events?format=ag-ui) with the real AG-UI client 1.0: its
// HTTP reader and SSE parser (runHttpRequest, transformHttpEventStream: schema enforcement) and its event
// verification (verifyEvents: a run's order rules).
//
// stdin: {"url", "token"}; stdout: {"error", "events"}.
import { runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

const events = [];
const error = await new Promise((resolve) => {
  transformHttpEventStream(runHttpRequest(() => fetch(input.url, { headers: { Authorization: `Bearer ${input.token}` } })))
    .pipe(verifyEvents(false))
    .subscribe({
      next: (event) => events.push(event),
      error: (e) => resolve(String(e?.message ?? e)),
      complete: () => resolve(null),
    });
});
process.stdout.write(JSON.stringify({ error, events }));
