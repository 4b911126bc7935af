"""LangChain tools in and out of toolrun (extra `langchain`).

```python
from toolrun.integrations.langchain import from_langchain, to_langchain, tool_message

lc_tools = to_langchain(registry, executor=executor, context=ToolContext(user_id="u1"))
msg = await lc_tools[0].ainvoke({"type": "tool_call", "id": "c1", "name": "add", "args": {"a": 1}})
msg.status            # "error": toolrun validated the call (INVALID_ARGUMENTS), nothing raised

tool = from_langchain(some_langchain_tool, timeout=5.0)   # a toolrun Tool, run by toolrun's executor
```

`to_langchain` gives each toolrun tool a LangChain `StructuredTool` whose JSON-Schema `args_schema` is only
shown to the model: LangChain does not validate a dict schema, toolrun's executor does (validation, access,
confirmations, rate limits, timeouts, audit). A failure comes back as a `ToolMessage` with
`status="error"` and toolrun's rendered error, never as an exception that ends the run. A call that needs
a person's approval comes back as an error message naming its confirmation id (approve it with
`executor.approve`); in LangGraph use `toolrun.integrations.langgraph.ToolrunNode`, which pauses the graph
with `interrupt()` instead.

Run inside a LangGraph graph (e.g. by `langgraph.prebuilt.ToolNode`), a tool's progress reports (and an
async generator tool's partial results) are written to the graph's custom stream, throttled, as
`{"type": "tool_progress", "tool_call_id", "name", "progress", "total", "message"}` (see
`toolrun.integrations.langgraph`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel

from toolrun._sync import run_sync
from toolrun.registry import ToolRegistry, ToolSet
from toolrun.results import ToolError, ToolResult
from toolrun.runtime import ToolExecutor
from toolrun.tools import Tool, ToolCall, ToolContext
from toolrun.tools._context import ProgressThrottle

__all__ = [
    "ContextSource",
    "from_langchain",
    "progress_to_stream",
    "stream_writer",
    "to_langchain",
    "tool_message",
]

ContextSource = ToolContext[Any] | Callable[[RunnableConfig], ToolContext[Any]] | None
"""A fixed `ToolContext`, a function of the LangChain `RunnableConfig` returning one, or None (the
`user_id` of `config["configurable"]`, if any)."""

_CALL_ID = "__toolrun_call_id"


def tool_message(result: ToolResult) -> ToolMessage:
    """The `ToolMessage` for a toolrun result: toolrun's rendering as content (standard content blocks for
    a result with images or files), `status="error"` unless
    the call ended `ok`; `artifact` holds `{"status", "code", "confirmation_id"}` for routing (never the
    value)."""
    error = result.error
    return ToolMessage(
        content=_content_blocks(result) if result.content and result.status == "ok" else result.render(),
        tool_call_id=result.call_id,
        name=result.tool_name or None,
        status="success" if result.status == "ok" else "error",
        artifact={
            "status": result.status,
            "code": error.code if error is not None else None,
            "confirmation_id": result.confirmation_id,
        },
    )


def _content_blocks(result: ToolResult) -> list[Any]:
    """A result with content as LangChain's standard content blocks (text, image, audio, file; by base64
    or URL); resource links as text."""
    from langchain_core.messages import content as blocks

    from toolrun.content import Audio, File, Image, Text, describe
    from toolrun.formats._content import parts

    out: list[Any] = []
    for item in parts(result):
        if isinstance(item, Text):
            out.append(blocks.create_text_block(item.text))
        elif isinstance(item, Image | Audio | File):
            make = {
                Image: blocks.create_image_block,
                Audio: blocks.create_audio_block,
                File: blocks.create_file_block,
            }[type(item)]
            where = {"url": item.url} if item.data is None else {"base64": item.base64()}
            extra = {"filename": item.name} if isinstance(item, File) else {}
            out.append(make(mime_type=item.media_type, **where, **extra))
        else:
            out.append(blocks.create_text_block(describe(item)))
    return out


def context_from_config(source: ContextSource, config: RunnableConfig | None) -> ToolContext[Any]:
    """Resolve a `ContextSource` against a LangChain/LangGraph config."""
    if isinstance(source, ToolContext):
        return source
    if source is not None:
        return source(config or {})
    configurable = (config or {}).get("configurable") or {}
    user = configurable.get("user_id")
    return ToolContext(user_id=str(user) if user is not None else None)


def stream_writer() -> Callable[[Any], None] | None:
    """LangGraph's writer of the custom stream (`stream_mode="custom"`) when this runs inside a graph's
    node or tool; None elsewhere (or without LangGraph installed)."""
    try:
        from langgraph.config import get_stream_writer
    except ImportError:
        return None
    try:
        return get_stream_writer()
    except (RuntimeError, KeyError):  # not inside a graph run
        return None


def progress_to_stream(
    writer: Callable[[Any], None], call: ToolCall, ctx: ToolContext[Any], interval: float
) -> ProgressThrottle:
    """A throttled progress reporter for one call that writes `{"type": "tool_progress", ...}` chunks
    with `writer` (and passes each report on to `ctx.progress`, if set). An async generator tool's partial
    result adds `"partial"`: its value as JSON data. Close it when the call ends."""
    outer = ctx.progress

    async def report(progress: float, total: float | None, message: str | None, value: Any = None) -> None:
        chunk = {
            "type": "tool_progress",
            "tool_call_id": call.id,
            "name": call.name,
            "progress": progress,
            "total": total,
            "message": message,
        }
        if value is not None:
            chunk["partial"] = value
        writer(chunk)
        if outer is not None:  # a reporter of the application's own listens too
            await outer(progress, total, message)

    async def report_partial(progress: float, message: str | None, value: Any) -> None:
        await report(progress, None, message, value)

    return ProgressThrottle(report, interval=interval, partial=report_partial)


class _ExecutorTool(StructuredTool):
    """A `StructuredTool` that hands its coroutine the LangChain tool-call id (for toolrun's call id)."""

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any], tool_call_id: str | None) -> Any:
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        return args, {**kwargs, _CALL_ID: tool_call_id}


def to_langchain(
    tools: ToolSet | Iterable[Tool],
    *,
    executor: ToolExecutor | None = None,
    context: ContextSource = None,
    progress_interval: float = 0.1,
) -> list[StructuredTool]:
    """LangChain `StructuredTool`s whose calls run through toolrun's executor.

    Args:
        tools: A `ToolRegistry` (or a view of one) or tools.
        executor: The executor to run calls with (default: a new one over `tools`). Tools it cannot find
            come back as `NOT_FOUND` errors, so pass the executor whose registry holds them.
        context: Who is calling: a `ToolContext`, a function of the `RunnableConfig`, or None for
            `config["configurable"]["user_id"]`.
        progress_interval: Least seconds between two progress chunks of one call on a LangGraph graph's
            custom stream.
    """
    if isinstance(tools, ToolSet):
        toolset: ToolSet = tools
        listed = toolset.tools()
    else:
        listed = list(tools)
        toolset = ToolRegistry(listed)
    runner = executor if executor is not None else ToolExecutor(toolset)
    return [_wrap(t, runner, context, progress_interval) for t in listed]


def _wrap(tool: Tool, executor: ToolExecutor, context: ContextSource, interval: float) -> StructuredTool:
    name = tool.name

    async def run(config: RunnableConfig, **arguments: Any) -> str:
        call_id = arguments.pop(_CALL_ID, None)
        call = (
            ToolCall(name=name, arguments=arguments)
            if call_id is None
            else ToolCall(id=call_id, name=name, arguments=arguments)
        )
        ctx = context_from_config(context, config)
        writer = stream_writer()
        if writer is None:
            result = await executor.execute(call, ctx)
        else:
            throttle = progress_to_stream(writer, call, ctx, interval)
            try:
                result = await executor.execute(call, ctx.evolve(progress=throttle))
            finally:
                await throttle.aclose()  # its last report, then nothing more once the call ended
        if result.status == "confirmation_required":
            raise ToolException(f"{result.render()} (confirmation id {result.confirmation_id})")
        if result.status != "ok":
            raise ToolException(result.render())  # LangChain turns it into a status="error" ToolMessage
        return result.render()

    def run_blocking(config: RunnableConfig, **arguments: Any) -> str:
        return str(run_sync(run(config, **arguments)))

    return _ExecutorTool(
        name=name,
        description=tool.description,
        args_schema=tool.parameters,
        coroutine=run,
        func=run_blocking,
        handle_tool_error=True,
        handle_validation_error=True,
        metadata={"toolrun": True, "destructive": tool.options.destructive},
    )


def _parameters_of(lc_tool: BaseTool) -> dict[str, Any]:
    schema = lc_tool.tool_call_schema
    if isinstance(schema, dict):
        out = dict(schema)
    elif isinstance(schema, type) and issubclass(schema, BaseModel):
        out = schema.model_json_schema()
    else:
        out = {"type": "object", "properties": dict(lc_tool.args)}
    out.pop("title", None)
    out.pop("description", None)
    out.setdefault("type", "object")
    return out


def _is_async(lc_tool: BaseTool) -> bool:
    if isinstance(lc_tool, StructuredTool):
        return lc_tool.coroutine is not None
    return type(lc_tool)._arun is not BaseTool._arun


def from_langchain(lc_tool: BaseTool, **options: Any) -> Tool:
    """A toolrun `Tool` from a LangChain tool, for toolrun's executor, agent, server or MCP.

    The parameters schema comes from the tool's `args_schema` (what the model sees), and toolrun validates
    calls against it before LangChain does. An async tool (a `coroutine`, or an `_arun` of its own) runs in
    the event loop; a sync one in toolrun's worker threads; both under toolrun's timeouts and gates.
    A `ToolException` the tool raises becomes a `ToolError` (code `TOOL_ERROR`) whose message the model
    reads, as LangChain intends it; any other exception is an `EXECUTION_FAILED` with an error id.

    Args:
        lc_tool: Any LangChain `BaseTool` (`@tool` functions, `StructuredTool`, subclasses).
        **options: toolrun tool options (`destructive`, `timeout`, `rate_limit`, `read_only`, ...).
    """
    name = lc_tool.name
    parameters = _parameters_of(lc_tool)

    def failed(exc: ToolException) -> ToolError:
        return ToolError("TOOL_ERROR", str(exc) or f"The tool {name!r} failed.")

    handler: Callable[..., Any]
    if _is_async(lc_tool):

        async def run_async(**arguments: Any) -> Any:
            try:
                return await lc_tool.ainvoke(arguments)
            except ToolException as exc:
                raise failed(exc) from None

        handler = run_async
    else:

        def run(**arguments: Any) -> Any:
            try:
                return lc_tool.invoke(arguments)
            except ToolException as exc:
                raise failed(exc) from None

        handler = run
    return Tool.from_schema(name, lc_tool.description or name, parameters, handler, **options)
