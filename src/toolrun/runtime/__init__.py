"""Running tool calls: `ToolExecutor`, its stages, events, audit, and process isolation.

```python
executor = ToolExecutor(registry)
result = await executor.execute(ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'), ctx)
results = await executor.execute_many(calls, ctx, max_concurrency=8)   # in call order
results = await executor.chain([{"id": "a", "tool": "search", "arguments": {"q": "x"}},
                                {"id": "b", "tool": "get", "arguments": {"id": "$a.items.0.id"}}], ctx)
```

**Never raises.** Every failure is a `ToolResult` with an `ErrorCode`. The one exception is the
caller's own cancellation: if the task awaiting `execute` is cancelled, `CancelledError` propagates (as
asyncio requires) after the call is recorded as `cancelled`; a tool's own `CancelledError`, timeout or
crash is a result. A tool that does not stop within `cancel_grace` seconds after its time box cancelled
it is closed (`TIMEOUT` with `details["abandoned"]`); see docs/executor.md, "Timeouts and cancellation".

**Stages** are middleware objects, `async __call__(invocation, call_next) -> ToolResult`, optionally with
`applies_to(tool) -> bool`; each tool's chain is built once per registry version from the stages that
apply to it (see `Middleware`). Order: lookup, access, validation (always, in the executor), your
middleware, `ConfirmationStage`, `RateLimitStage`, `CacheStage`, then the `RunStage` (deadline, budget,
session snapshot, handler with timeout and retries, result conversion).

**Confirmations.** A call of a tool that `requires_confirmation` is stored as a `PendingConfirmation`
(id, user — `NO_USER` without one —, tool, keyed hash of the canonical JSON of the *validated* arguments,
the agent run it came from, the call, created and expiry times, a summary showing every argument value for
the user's UI, and the full validated arguments) and answered with `status="confirmation_required"`.
`approve(id, ctx)` consumes it atomically (single use, only by its user and in its run, not after expiry)
and runs the stored call through the stages after confirmation, returning its result under the original
call id; `deny(id, ctx, reason)` consumes it and returns `CONFIRMATION_DENIED`; both live in
`executor.confirmations` (`_confirm`), with the reading and withdrawal of a held record that other doors
use. Unknown, used, someone else's or another run's → `CONFIRMATION_NOT_FOUND`
(`reason="unknown_or_used"`), expired → `CONFIRMATION_EXPIRED` (`"expired"`), a mismatch →
`CONFIRMATION_DENIED`; so is a call without a user id under `require_user_for_confirmation=True`. Store
errors fail closed. The decision grammar, previews and standing rules live in `toolrun.approvals`.

**Observation** costs nothing when nobody listens (no subscriber, the `toolrun.audit` logger not enabled
for INFO, no audit sink, no OpenTelemetry SDK provider). Events, audit records and spans never carry
argument values, results or messages; logged exceptions keep their type and stack, not their message.
"""

from toolrun.runtime._audit import AuditRecord, AuditSink, InMemoryAuditSink
from toolrun.runtime._audit_file import JSONLinesAuditSink
from toolrun.runtime._events import (
    ConfirmationRequested,
    ConfirmationResolved,
    ToolEvent,
    ToolFinished,
    ToolRetrying,
    ToolStarted,
)
from toolrun.runtime._executor import ToolExecutor
from toolrun.runtime._process import ProcessIsolation
from toolrun.store import Artifact as Artifact  # not public (toolrun.store's); server/ imports it here

__all__ = [
    "AuditRecord",
    "AuditSink",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "InMemoryAuditSink",
    "JSONLinesAuditSink",
    "ProcessIsolation",
    "ToolEvent",
    "ToolExecutor",
    "ToolFinished",
    "ToolRetrying",
    "ToolStarted",
]
