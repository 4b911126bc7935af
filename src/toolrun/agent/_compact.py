"""History compaction for tool results: what the model is *sent* of old tool results, by a policy the
application chooses. The run itself (`AgentRun.messages`, what is stored) always keeps every result whole.

```python
agent = Agent(model, registry, compact_history=CompactToolResults(keep_last=2, min_chars=500))
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolrun.models import Message, ToolResultMessage

__all__ = ["CompactToolResults", "HistoryPolicy"]

HistoryPolicy = Callable[[Sequence[Message]], list[Message]]
"""`(messages) -> messages to send`: must not change the messages it is given."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactToolResults:
    """Send the last `keep_last` tool results whole; older ones longer than `min_chars` (or carrying
    images and files) become a short note naming the tool and the size, so a long conversation does not
    resend megabytes of old results at every step."""

    keep_last: int = 2
    """How many of the most recent tool results are always sent whole."""
    min_chars: int = 500
    """Older results at most this long are sent whole too (a note would not save much)."""

    def __call__(self, messages: Sequence[Message]) -> list[Message]:
        results = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
        old = set(results[: max(len(results) - self.keep_last, 0)])
        out: list[Message] = []
        for index, message in enumerate(messages):
            if (
                index in old
                and isinstance(message, ToolResultMessage)
                and (len(message.content) > self.min_chars or message.parts)
            ):
                note = (
                    f"[An earlier result of {message.tool_name} ({len(message.content):,} characters"
                    f"{', with attachments' if message.parts else ''}) is kept but not repeated here; "
                    "call the tool again if you need it.]"
                )
                message = ToolResultMessage(
                    call_id=message.call_id,
                    tool_name=message.tool_name,
                    content=note,
                    is_error=message.is_error,
                )
            out.append(message)
        return out
