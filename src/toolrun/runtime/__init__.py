"""Running tool calls: `ToolExecutor`, its stages, events, audit, and process isolation.

```python
executor = ToolExecutor(registry)
result = await executor.execute(ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'), ctx)
results = await executor.execute_many(calls, ctx, max_concurrency=8)   # in call order
results = await executor.chain([{"id": "a", "tool": "search", "arguments": {"q": "x"}},
                                {"id": "b", "tool": "get", "arguments": {"id": "$a.items.0.id"}}], ctx)
```

**Never raises.** Every failure is a `ToolResult` with an `ErrorCode`; only the caller's own cancellation
propagates (after the call is recorded as `cancelled`). **Stages** are middleware objects (`async
__call__(invocation, call_next)`, optionally `applies_to(tool)`), chained once per tool: lookup, access,
validation, your middleware, confirmation, rate limit, cache, then the run stage. **Confirmations** bind a
pending call to its user, tool, argument hash and run, single use and expiring (`approve`, `deny`, held by
`executor.confirmations`); the decision grammar, previews and rules live in `toolrun.approvals`.
**Observation** costs nothing when nobody listens, and events, audit records and spans never carry
argument values, results or messages. The whole contract: docs/executor.md.
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
