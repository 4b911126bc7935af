"""Running tool calls: `ToolExecutor` and its stages, events, audit, and process isolation.

```python
executor = ToolExecutor(registry)
result = await executor.execute(ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'), ToolContext())
```

See `toolrun.runtime._executor` for the pipeline, `Middleware` for writing a stage of your own,
`ConfirmationStage` for how approvals are bound, and `toolrun.runtime._run` for timeouts, retries and
cancellation.
"""

from toolrun.runtime._audit import AuditRecord, AuditSink, InMemoryAuditSink, canonical_json
from toolrun.runtime._chain import ChainStep
from toolrun.runtime._events import (
    ConfirmationRequested,
    ConfirmationResolved,
    EventBus,
    ToolEvent,
    ToolFinished,
    ToolRetrying,
    ToolStarted,
)
from toolrun.runtime._executor import ToolExecutor
from toolrun.runtime._invocation import CallNext, Invocation, Middleware
from toolrun.runtime._process import ProcessIsolation
from toolrun.runtime._run import RunStage
from toolrun.runtime._stages import CacheStage, ConfirmationStage, RateLimitStage, summarize_call

__all__ = [
    "AuditRecord",
    "AuditSink",
    "CacheStage",
    "CallNext",
    "ChainStep",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "ConfirmationStage",
    "EventBus",
    "InMemoryAuditSink",
    "Invocation",
    "Middleware",
    "ProcessIsolation",
    "RateLimitStage",
    "RunStage",
    "ToolEvent",
    "ToolExecutor",
    "ToolFinished",
    "ToolRetrying",
    "ToolStarted",
    "canonical_json",
    "summarize_call",
]
