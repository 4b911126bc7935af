"""A model and a tool for the page's own browser tests (`_live_server.py ... page`).

`markdown` answers with Markdown of every kind the page renders (a heading, a list, a GFM table, code
blocks) and with what it must not render (raw HTML, a `javascript:` link). `slow ...` streams a first part
and then keeps thinking until the page's Stop closes its stream. `report ...` calls `slow_report`, a tool
that works until it is cancelled. Anything else goes to the demo model (tasks, confirmations).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from toolrun import tool
from toolrun.apps.tasks import create_demo_model
from toolrun.models import FunctionModel, Message, ToolCallDelta, ToolResultMessage, UserMessage

MARKDOWN = """## Your week

Here is **what matters**, with `inline code`:

- Renew the passport
- Call the plumber

| Task | Due |
| --- | --- |
| Passport | Friday |
| Plumber | Monday |

```python
def greet(name: str) -> str:
    return f"Hello {name}"
```

Raw HTML stays text: <img src=x onerror="alert(1)"> and <b>not bold</b>.
A [bad link](javascript:alert(1)) and a [good one](https://example.com/docs).
"""

SLOW_FIRST_PART = "Let me think this through. The first part of the answer is"

_demo = create_demo_model().function


@tool
async def slow_report(topic: str) -> str:
    """Write a long report (it takes a while).

    Args:
        topic: What the report is about.
    """
    await asyncio.Event().wait()  # until cancelled
    return "never"


async def _answer(messages: list[Message], tools: list[Any]) -> AsyncIterator[str | ToolCallDelta]:
    last = messages[-1]
    if isinstance(last, ToolResultMessage) and last.tool_name == "slow_report":
        yield "The report is ready."
        return
    text = last.content if isinstance(last, UserMessage) else ""
    if text == "markdown":
        for start in range(0, len(MARKDOWN), 40):
            yield MARKDOWN[start : start + 40]
        return
    if text.startswith("slow"):
        for word in SLOW_FIRST_PART.split(" "):
            yield word + " "
        await asyncio.Event().wait()  # keeps thinking until the stream is closed
    if text.startswith("report"):
        yield "Writing the report now."
        yield ToolCallDelta(
            index=0, id="call_report", name="slow_report", arguments_delta='{"topic": "sales"}'
        )
        return
    response = _demo(messages, tools)
    if response.text:
        yield response.text
    for i, call in enumerate(response.tool_calls):
        args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments or {})
        yield ToolCallDelta(index=i, id=call.id, name=call.name, arguments_delta=args)


def page_model() -> FunctionModel:
    return FunctionModel(stream_function=_answer, name="demo-page")


PAGE_TOOLS = [slow_report]
