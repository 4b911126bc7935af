"""Wire formats for chat front-ends, each one small adapter over the service's event stream.

- `ag_ui`: AG-UI 1.0 (CopilotKit and other AG-UI clients), with the `ag-ui-protocol` package's types.
- `ai_sdk`: the Vercel AI SDK UI message stream v1 (`useChat` with `DefaultChatTransport`).

An adapter turns the events of one run (`toolrun.server.events`: run started, text deltas, tool calls
started and finished, confirmations required, the run's end or a service error) into its protocol's
frames, and reads its protocol's request body into plain values (the new user text, approval decisions).
None of them knows the executor or the store: the routes check every decision against the server's own
pending record before anything runs.
"""
