"""A toolrun registry served over MCP, every `tools/call` through the `ToolExecutor`.

```python
server = create_server(registry, executor=executor, principal=ToolContext(user_id="me", roles=("admin",)))
await serve_stdio(server)                      # or: create_http_app(server, resolve_principal=...)
```

`tools/list`: the tools the principal may call (roles, allowlist), in registration order, with
`inputSchema`, `outputSchema` (when the tool declares one) and annotations from the tool's options.
`tools/call`: an unknown name is the protocol's error (`-32602`); everything else is a `CallToolResult`
built from the executor's `ToolResult` (`isError` with the error's text for failures — validation lists
every field problem, internal errors carry only an error id; `structuredContent` plus a text copy on
success). Destructive tools are confirmed with the person behind the client (see `_confirm`). A
`@tool(background=True)` tool called by a client that declares the MCP Tasks extension becomes a task
(see `_tasks`: `tasks/get`, `tasks/update`, `tasks/cancel`).
A long async tool reports progress with `await ctx.report_progress(done, total)`; a client that cancels
the request cancels the tool.
"""

from __future__ import annotations

import hmac
import json
import time
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.propagate import get_global_textmap
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, get_tracer_provider
from pydantic_core import to_jsonable_python

from toolrun.formats.mcp import MCPFormat
from toolrun.mcp import _confirm, _tasks, _tasks_legacy
from toolrun.mcp._tasks import MCPTaskStore, MemoryTaskStore
from toolrun.registry import ToolSet
from toolrun.results import ToolResult
from toolrun.runtime import ToolExecutor
from toolrun.tools import Tool, ToolCall, ToolContext
from toolrun.tools._context import ProgressThrottle

__all__ = ["PRINCIPAL_SCOPE_KEY", "ToolrunMCPServer", "create_server", "serve_stdio"]

PRINCIPAL_SCOPE_KEY = "toolrun.principal"
"""The ASGI scope key where the HTTP endpoint puts the `ToolContext` of the authenticated caller."""

REQUEST_PRINCIPAL: ContextVar[ToolContext[Any] | None] = ContextVar("toolrun_mcp_principal", default=None)
"""The authenticated caller of the HTTP request being served (set by the endpoint around the SDK's handling),
for the checks the SDK makes before a handler runs (`Mcp-Param-*` headers)."""

_FORMAT = MCPFormat()
_MAX_NAME_ECHO = 200
_FAST_PARAM_KEYS = frozenset({"name", "arguments", "_meta"})
_WIRE_PROBE: dict[str, Any] = {
    "content": [{"type": "text", "text": ""}],
    "isError": False,
    "structuredContent": {},
    "resultType": "complete",
}
_WIRE_KEYS: dict[str, frozenset[str]] = {}
_UNSEEN_PROVIDERS = (ProxyTracerProvider, NoOpTracerProvider)
_X_MCP_HEADER = '"x-mcp-header"'


class ToolrunMCPServer(Server[Any]):
    """The MCP SDK's low-level `Server`, answering `tools/list` and `tools/call` from a toolrun registry.

    Pass it to `mcp.Client(server)` for an in-memory connection, to `serve_stdio`, or to
    `create_http_app` / `mount_mcp` for Streamable HTTP.
    """

    registry: ToolSet
    """The tools served."""
    executor: ToolExecutor
    """The executor every call goes through."""
    principal: ToolContext[Any]
    """Who calls when the transport does not say (stdio, in-memory, HTTP without a resolver)."""
    tasks: MCPTaskStore | None
    """Where background tools called as MCP tasks run and are kept (None: tasks are off)."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        """The SDK's capabilities, with 2025-11-25's `tasks` on handshake versions when tasks are on."""
        capabilities = super().get_capabilities(*args, **kwargs)
        if (
            getattr(self, "tasks", None) is not None
            and kwargs.get("protocol_version") not in MODERN_PROTOCOL_VERSIONS
        ):
            capabilities.tasks = _tasks_legacy.capability()
        return capabilities

    async def run(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
        initialization_options: InitializationOptions,
        raise_exceptions: bool = False,
    ) -> None:
        """Serve one connection over a stream pair: the SDK's `Server.run`, without its relay task."""
        from toolrun.mcp._loop import serve_streams

        async with self.lifespan(self) as lifespan_state:
            await serve_streams(
                self,
                read_stream,
                write_stream,
                lifespan_state=lifespan_state,
                init_options=initialization_options,
                raise_exceptions=raise_exceptions,
            )


def create_server(
    registry: ToolSet,
    *,
    executor: ToolExecutor | None = None,
    principal: ToolContext[Any] | str | None = None,
    name: str = "toolrun",
    version: str | None = None,
    instructions: str | None = None,
    clock: Callable[[], float] = time.time,
    tasks: MCPTaskStore | bool = True,
) -> ToolrunMCPServer:
    """An MCP server for `registry` whose calls all run through `executor`'s gates.

    Args:
        registry: The tools to serve (a registry or a view of one: only these names are callable).
        executor: The executor (default: a new `ToolExecutor(registry)`). Its hash key seals confirmation
            state; processes serving one deployment over HTTP must share it (`hash_key=`) and its stores.
        principal: The caller on stdio and in-memory connections: a `ToolContext` (user id, roles) or a
            user id. Default: user `"local"` without roles. Over HTTP a principal resolver replaces it.
        name: The server name announced to clients.
        version: The server version announced (default: toolrun's).
        instructions: Instructions for the client's model, if any.
        clock: Wall-clock time for the expiry of confirmation state (tests).
        tasks: Where calls of `@tool(background=True)` tools run as MCP tasks (the Tasks extension,
            `io.modelcontextprotocol/tasks`) for clients that declare it: `True` (default) keeps them in
            this process (`MemoryTaskStore()`); a store such as `toolrun.integrations.dbos.DurableTasks`
            keeps them across restarts; `False` turns tasks off (background tools then run inline).
    """
    if executor is None:
        executor = ToolExecutor(registry)
    if principal is None:
        principal = ToolContext(user_id="local")
    elif isinstance(principal, str):
        principal = ToolContext(user_id=principal)
    if version is None:
        from toolrun import __version__

        version = __version__
    store: MCPTaskStore | None = MemoryTaskStore() if tasks is True else (None if tasks is False else tasks)
    handlers = _Handlers(registry, executor, principal, clock, store)
    server = ToolrunMCPServer(
        name, version=version, instructions=instructions, get_tool_input_schema=handlers.input_schema
    )
    server.add_request_handler("tools/list", types.PaginatedRequestParams, handlers.list_tools)
    server.add_request_handler("tools/call", types.CallToolRequestParams, handlers.call_tool)
    if store is not None:  # SEP-2663: the extension's three methods, advertised in capabilities.extensions
        server.extensions[_tasks.TASKS_EXTENSION] = {}
        server.add_request_handler("tasks/get", _tasks.TaskIdParams, handlers.get_task)
        server.add_request_handler("tasks/update", _tasks.TaskUpdateParams, handlers.update_task)
        server.add_request_handler("tasks/cancel", _tasks.TaskIdParams, handlers.cancel_task)
        server.add_request_handler("tasks/result", _tasks.TaskIdParams, handlers.task_result)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, handlers.list_tasks)
    server.middleware = [
        _QuietOpenTelemetry(m, server, handlers) if isinstance(m, OpenTelemetryMiddleware) else m
        for m in server.middleware
    ]
    server.registry = registry
    server.executor = executor
    server.principal = principal
    server.tasks = store
    return server


async def serve_stdio(server: Server[Any]) -> None:
    """Serve `server` on this process's stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _Handlers:
    def __init__(
        self,
        registry: ToolSet,
        executor: ToolExecutor,
        principal: ToolContext[Any],
        clock: Callable[[], float],
        tasks: MCPTaskStore | None = None,
    ) -> None:
        self.tasks = tasks
        self.registry = registry
        self.executor = executor
        self.principal = principal
        self.sealer = _confirm.Sealer(executor, clock)
        self._listings: dict[tuple[frozenset[str], frozenset[str] | None], types.ListToolsResult] = {}
        self._listed_version = -1
        self._header_schemas: dict[str, dict[str, Any]] = {}
        self._header_schemas_version = -1

    # ----------------------------------------------------------------------------------------------
    # Mcp-Param-* headers (2026-07-28 Streamable HTTP)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema to check a `tools/call`'s `Mcp-Param-*` headers against, None when none applies.

        Without this the SDK resolves the schema by running `tools/list` before every HTTP `tools/call`
        that has arguments. Only a schema that declares `x-mcp-header` has anything to check; others
        answer None (nothing to validate), the same outcome the listing walk reaches. As with the walk
        (which sees what this caller is listed), a tool the request's principal may not call answers None:
        its headers are not checked, and the call is refused by the executor as for any other caller.
        """
        registry = self.registry
        version = registry.version
        if version != self._header_schemas_version:
            self._header_schemas = {
                str(definition["name"]): definition["inputSchema"]
                for definition in registry.definitions("mcp")
                if _X_MCP_HEADER in json.dumps(definition.get("inputSchema"))
            }
            self._header_schemas_version = version
        schema = self._header_schemas.get(name)
        if schema is None:
            return None
        tool = registry.find(name)
        principal = REQUEST_PRINCIPAL.get() or self.principal
        return schema if tool is not None and _may_call(tool, principal) else None

    # ----------------------------------------------------------------------------------------------
    # tools/list

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> types.ListToolsResult:
        principal = self._principal_of(ctx)
        registry = self.registry
        version = registry.version
        if version != self._listed_version:
            self._listings = {}
            self._listed_version = version
        key = (frozenset(principal.roles), principal.allowed_tools)
        listing = self._listings.get(key)
        if listing is None:
            listing = types.ListToolsResult(
                tools=[
                    types.Tool.model_validate(self._with_execution(tool, definition), by_name=False)
                    for tool, definition in zip(registry.tools(), registry.definitions("mcp"), strict=True)
                    if _may_call(tool, principal)
                ]
            )
            self._listings[key] = listing
        return listing

    def _with_execution(self, tool: Tool, definition: dict[str, Any]) -> dict[str, Any]:
        """2025-11-25 task support on background tools (`execution.taskSupport`; later revisions' serializers
        leave the field out)."""
        if self.tasks is None or not tool.options.background:
            return definition
        return {**definition, "execution": {"taskSupport": "optional"}}

    # ----------------------------------------------------------------------------------------------
    # tools/call

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> dict[str, Any] | types.InputRequiredResult:
        name = params.name
        tool = self.registry.find(name)
        if tool is None:
            shown = name if len(name) <= _MAX_NAME_ECHO else name[:_MAX_NAME_ECHO] + "…"
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {shown}")
        if tool.options.background and self.tasks is not None and self._task_era(ctx):
            return await self._start_task(ctx, tool, params)
        context, call_id = self._call_context(ctx)
        if params.request_state is not None or params.input_responses:
            resumed = await self._resume(ctx, tool, params, context, call_id)
            if isinstance(resumed, types.InputRequiredResult):  # an edit to show before it runs
                return resumed
            return _render(resumed, tool, ctx.protocol_version)
        try:
            result = await self.executor.execute(
                ToolCall(id=call_id, name=name, arguments=params.arguments), context
            )
        finally:
            await _end_progress(context)
        if result.status == "confirmation_required" and result.confirmation_id is not None:
            return await self._confirm(ctx, tool, params, context, result)
        return _render(result, tool, ctx.protocol_version)

    async def fast_call(
        self, ctx: ServerRequestContext[Any, Any], server: Server[Any]
    ) -> dict[str, Any] | None:
        """A plain `tools/call` answered in its wire form, or None to leave the request to the SDK.

        The SDK's path validates the params twice (the version's request surface, then the handler's
        params model) and the result once more (the version's result surface). Here the params are checked
        once against the version's surface, exactly as the SDK does first; and the result of a finished
        call, which toolrun renders as text content, `isError` and `structuredContent` only, is put in the
        version's wire form directly (`_wire_result`, checked against the SDK's serializer by the tests).
        Anything else (not initialized yet, a cache hint for `tools/call`, extra params, an unknown tool,
        invalid params, a confirmation) goes the SDK's way.
        """
        params = ctx.params
        version = ctx.protocol_version
        if (
            not isinstance(params, dict)
            or not _FAST_PARAM_KEYS.issuperset(params)
            or (version not in MODERN_PROTOCOL_VERSIONS and ctx.session.client_params is None)
            or "tools/call" in server.cache_hints
        ):
            return None
        try:
            _methods.validate_client_request("tools/call", version, params)
        except Exception:  # the SDK's path answers with the right error
            return None
        name = params["name"]
        tool = self.registry.find(name)
        if tool is None or tool.options.background:  # a background tool may become a task: the SDK's way
            return None
        context, call_id = self._call_context(ctx)
        call = ToolCall(id=call_id, name=name, arguments=params.get("arguments"))
        try:
            result = await self.executor.execute(call, context)
        finally:
            await _end_progress(context)
        if result.status == "confirmation_required" and result.confirmation_id is not None:
            typed = types.CallToolRequestParams.model_validate(params, by_name=False)
            asked = await self._confirm(ctx, tool, typed, context, result)
            if not isinstance(asked, dict):
                asked = asked.model_dump(by_alias=True, mode="json", exclude_none=True)
            wire = _methods.serialize_server_result("tools/call", version, asked)
        elif result.content:  # images, files: the SDK's serializer writes every block kind
            wire = _methods.serialize_server_result("tools/call", version, _render(result, tool, version))
        else:
            wire = _wire_result(_render(result, tool, version), version)
        if version in MODERN_PROTOCOL_VERSIONS:
            wire["_meta"] = {SERVER_INFO_META_KEY: server.server_info_stamp}
        return wire

    def _call_context(self, ctx: ServerRequestContext[Any, Any]) -> tuple[ToolContext[Any], str]:
        """The caller's context for a `tools/call` (progress reported when the client can see it) and its
        call id."""
        principal = self._principal_of(ctx)
        if ctx.meta is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            context = principal  # no progress token: the SDK's report_progress would drop every report
        else:
            # throttled (a tool reporting 10,000 times a second does not flood the client), and closed
            # when the call ends (a tool still running after a timeout reports to nobody)
            context = principal.evolve(progress=ProgressThrottle(ctx.session.report_progress))
        call_id = f"mcp_{ctx.request_id}" if ctx.request_id is not None else f"mcp_{uuid.uuid4().hex}"
        return context, call_id

    def _principal_of(self, ctx: ServerRequestContext[Any, Any]) -> ToolContext[Any]:
        request = ctx.request
        if request is not None:
            principal = getattr(request, "scope", {}).get(PRINCIPAL_SCOPE_KEY)
            if isinstance(principal, ToolContext):
                return principal
        return self.principal

    # ----------------------------------------------------------------------------------------------
    # MCP Tasks (io.modelcontextprotocol/tasks, SEP-2663; see `_tasks`)

    @staticmethod
    def _task_era(ctx: ServerRequestContext[Any, Any]) -> bool:
        """A 2026-07-28 request that declares the extension in its own `_meta` (*Capability Negotiation*)."""
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and _tasks.wants_tasks(ctx.params)

    async def _start_task(
        self, ctx: ServerRequestContext[Any, Any], tool: Tool, params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        """A `CreateTaskResult` once the task is recorded (*Task Creation*), or the call's answer inline
        when it could not run anyway (not allowed, invalid arguments: the executor's error, at once)."""
        store = self.tasks
        principal = self._principal_of(ctx)
        call = ToolCall(id=f"mcp_task_{uuid.uuid4().hex}", name=tool.name, arguments=params.arguments)
        if store is None or not _may_call(tool, principal) or not _valid(tool, params.arguments):
            return _render(await self.executor.execute(call, principal), tool, ctx.protocol_version)
        record = await store.start(call, principal, self.executor)
        if record is None:
            return _render(_tasks.too_many_tasks(call, store), tool, ctx.protocol_version)
        return _tasks.create_task_result(record, store)

    async def _task(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> tuple[MCPTaskStore, str]:
        """The caller's task, after the checks every `tasks/*` request gets (*Error Handling*)."""
        store = self.tasks
        if store is None:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # the headers first, as the SDK's own checks
            _tasks.check_routing_header(getattr(ctx.request, "headers", None), task_id)
        if ctx.protocol_version != _tasks_legacy.LEGACY_VERSION and not self._task_era(ctx):
            raise _tasks.missing_capability()
        if not task_id or len(task_id) > _tasks.MAX_TASK_ID:
            raise _tasks.task_not_found()
        user = self._principal_of(ctx).user_id or ""
        return store, user

    async def get_task(
        self, ctx: ServerRequestContext[Any, Any], params: _tasks.TaskIdParams
    ) -> dict[str, Any]:
        """`tasks/get` (*Task Polling*)."""
        store, user = await self._task(ctx, params.task_id)
        record = await store.get(params.task_id, user)
        if record is None:
            raise _tasks.task_not_found()
        if ctx.protocol_version == _tasks_legacy.LEGACY_VERSION:
            return _tasks_legacy.legacy_task(record, store)
        tool = self.registry.find(str(record["tool"]))
        version = ctx.protocol_version

        def render(result: ToolResult) -> dict[str, Any]:
            return _methods.serialize_server_result("tools/call", version, _render(result, tool, version))

        return await _tasks.detailed_task(record, store, render)

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: _tasks.TaskUpdateParams
    ) -> dict[str, Any]:
        """`tasks/update` (*Task Update Requests*): acknowledged; no toolrun task has input outstanding, so
        every response is for a key that is not outstanding, and is ignored."""
        store, user = await self._task(ctx, params.task_id)
        if await store.get(params.task_id, user) is None:
            raise _tasks.task_not_found()
        return {"resultType": "complete"}

    async def cancel_task(
        self, ctx: ServerRequestContext[Any, Any], params: _tasks.TaskIdParams
    ) -> dict[str, Any]:
        """`tasks/cancel` (*Task Cancellation*): acknowledged; a running task is cancelled, a finished one
        stays as it finished."""
        store, user = await self._task(ctx, params.task_id)
        if ctx.protocol_version == _tasks_legacy.LEGACY_VERSION:  # 2025-11-25: the task, cancelled
            record = await store.get(params.task_id, user)
            if record is None:
                raise _tasks.task_not_found()
            if _tasks_legacy.status(record) != "working":
                raise MCPError(
                    code=types.INVALID_PARAMS, message="Cannot cancel a task in a terminal status."
                )
            record = await store.cancel(params.task_id, user)
            if record is None:
                raise _tasks.task_not_found()
            return _tasks_legacy.legacy_task(record, store)
        if await store.cancel(params.task_id, user) is None:
            raise _tasks.task_not_found()
        return {"resultType": "complete"}

    async def task_result(
        self, ctx: ServerRequestContext[Any, Any], params: _tasks.TaskIdParams
    ) -> dict[str, Any]:
        """2025-11-25 `tasks/result` (see `_tasks_legacy`); not a method of later revisions."""
        if ctx.protocol_version != _tasks_legacy.LEGACY_VERSION:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        store, user = await self._task(ctx, params.task_id)
        record = await store.get(params.task_id, user)
        tool = self.registry.find(str(record["tool"])) if record is not None else None
        version = ctx.protocol_version

        def render(result: ToolResult) -> dict[str, Any]:
            return _methods.serialize_server_result("tools/call", version, _render(result, tool, version))

        return await _tasks_legacy.legacy_result(store, params.task_id, user, render)

    async def list_tasks(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        """2025-11-25 `tasks/list`: the caller's own tasks, newest first, a page at a time (its cursor is
        checked: see `_tasks_legacy.list_page`)."""
        if ctx.protocol_version != _tasks_legacy.LEGACY_VERSION or self.tasks is None:
            raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found")
        store = self.tasks
        user = self._principal_of(ctx).user_id or ""
        records = await store.list_tasks(user)
        return _tasks_legacy.list_page(records, store, user, params.cursor, self.executor.hasher.digest)

    async def legacy_call(self, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any] | None:
        """A 2025-11-25 task-augmented `tools/call` of a background tool: its `CreateTaskResult` in wire
        form (the SDK would check it as a `CallToolResult`); None to leave the request to the SDK."""
        params, store = ctx.params, self.tasks
        if store is None or ctx.session.client_params is None or not isinstance(params, Mapping):
            return None
        try:
            _methods.validate_client_request("tools/call", ctx.protocol_version, params)
        except Exception:
            return None
        tool = self.registry.find(str(params["name"]))
        if tool is None or not tool.options.background:
            return None  # no task support: answered as a plain call (the task metadata is ignored)
        principal = self._principal_of(ctx)
        call = ToolCall(id=f"mcp_task_{uuid.uuid4().hex}", name=tool.name, arguments=params.get("arguments"))
        record = await store.start(call, principal, self.executor)
        if record is None:
            raise MCPError(code=types.INVALID_REQUEST, message="Too many tasks are running for this user.")
        return {"task": _tasks_legacy.legacy_task(record, store)}

    # ----------------------------------------------------------------------------------------------
    # Confirmation with the person behind the client

    async def _confirm(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        params: types.CallToolRequestParams,
        context: ToolContext[Any],
        pending: ToolResult,
    ) -> dict[str, Any] | types.InputRequiredResult:
        confirmation_id = pending.confirmation_id or ""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if not _can_elicit(ctx, modern):
            await self.executor.deny(confirmation_id, context)  # withdrawn: nothing may run it later
            return _render(_confirm.needs_confirmation(pending.call_id, tool.name), tool)
        try:  # what the person approves: the preview stored with the confirmation, else the summary
            record = await self.executor.confirmations.record(confirmation_id)
        except Exception:
            record = None
        shown = record.shown if record is not None else (pending.message or tool.name)
        held = record.metadata.get("arguments") if record is not None else None
        current = dict(held) if isinstance(held, Mapping) else None  # None: nothing is editable
        if modern:
            state = self.sealer.seal(
                confirmation_id=confirmation_id,
                principal=context.user_id or "",
                tool=tool.name,
                arguments_hash=self.sealer.arguments_hash(params.arguments),
                ttl=self.executor.confirmation.ttl,
            )
            fields = _confirm.editable_fields(tool, current) if current is not None else {}
            form = _confirm.confirmation_form(shown, fields)
            return types.InputRequiredResult(
                input_requests={_confirm.CONFIRM_KEY: types.ElicitRequest(params=form)},
                request_state=state,
            )

        async def ask(form: types.ElicitRequestFormParams) -> types.ElicitResult | None:
            return await ctx.session.elicit_form(
                form.message, form.requested_schema, related_request_id=ctx.request_id
            )

        settled = await _confirm.converse(
            self.executor,
            tool,
            confirmation_id,
            context,
            shown=shown,
            current=current,
            ask=ask,
            decide=self._decide,
        )
        return _render(settled, tool)

    async def _resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        params: types.CallToolRequestParams,
        context: ToolContext[Any],
        call_id: str,
    ) -> ToolResult | types.InputRequiredResult:
        sealer = self.sealer
        claims = sealer.open(params.request_state)
        if (
            claims is None
            or claims["p"] != (context.user_id or "")
            or claims["t"] != tool.name
            or not hmac.compare_digest(claims["a"], sealer.arguments_hash(params.arguments))
        ):
            # Not a state this server sealed for this user, tool and arguments: the request itself is
            # wrong (a protocol error, as for any invalid params), not a result of the tool.
            raise MCPError(code=types.INVALID_PARAMS, message=_confirm.INVALID_STATE)
        if sealer.expired(claims):
            return _confirm.expired_state(call_id, tool.name)
        raw = (params.input_responses or {}).get(_confirm.CONFIRM_KEY)
        answer = raw if isinstance(raw, types.ElicitResult) else None
        decision = _confirm.decision_of(answer)
        if decision == "approve":  # as held, or as edited (shown first: see `_confirm.settle_round`)
            return await _confirm.settle_round(self.executor, sealer, tool, context, claims, answer)
        return await self._decide(decision, claims["c"], context, tool.name, _confirm.reason_of(answer))

    async def _decide(
        self,
        decision: str,
        confirmation_id: str,
        context: ToolContext[Any],
        tool_name: str,
        reason: str | None = None,
    ) -> ToolResult:
        executor = self.executor
        if decision == "approve":
            return await executor.approve(confirmation_id, context)
        result = await executor.deny(confirmation_id, context, reason)
        if (
            decision in ("cancel", "invalid")
            and result.error is not None
            and result.error.details.get("reason") == "denied"
        ):
            if decision == "cancel":
                result.error.message = (
                    f"The user dismissed the confirmation for {tool_name!r}; it did not run."
                )
                result.error.details["reason"] = "cancelled"
            else:
                result.error.message = (
                    f"The answer to the confirmation for {tool_name!r} was not a yes or no "
                    "('approve' must be true or false); it did not run."
                )
                result.error.details["reason"] = "invalid_answer"
        return result


class _QuietOpenTelemetry:
    """The SDK's OpenTelemetry middleware, skipped when its span could not be seen by anyone.

    With no tracer provider configured (or the no-op one) and no trace context in the request's `_meta`
    (none of the global propagator's fields: `traceparent`, `tracestate`, `baggage` by default), the SDK's
    span is a non-recording copy of the current one: nothing records it and nothing downstream sees a
    different context. Then the request goes straight on; otherwise through the SDK's middleware.

    When it is the server's only middleware it also answers plain `tools/call` requests itself (see
    `_Handlers.fast_call`), which the SDK allows a middleware to do; anything else goes on to the SDK.
    """

    def __init__(self, inner: OpenTelemetryMiddleware, server: Server[Any], handlers: _Handlers) -> None:
        self.inner = inner
        self.server = server
        self.handlers = handlers

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and _tasks_legacy.wants_legacy_task(ctx.protocol_version, ctx.params):
            answered = await self.handlers.legacy_call(ctx)
            if answered is not None:
                return answered
        meta = ctx.meta
        if isinstance(get_tracer_provider(), _UNSEEN_PROVIDERS) and (
            meta is None or get_global_textmap().fields.isdisjoint(meta)
        ):
            server = self.server
            if ctx.method == "tools/call" and len(server.middleware) == 1 and self._serves_calls(server):
                answered = await self.handlers.fast_call(ctx, server)
                if answered is not None:
                    return answered
            return await call_next(ctx)
        return await self.inner(ctx, call_next)

    def _serves_calls(self, server: Server[Any]) -> bool:
        """Whether `tools/call` is still toolrun's handler (not replaced after `create_server`)."""
        entry = server.get_request_handler("tools/call")
        return entry is not None and entry.handler == self.handlers.call_tool


def _may_call(tool: Tool, principal: ToolContext[Any]) -> bool:
    roles = tool.options.roles
    if roles is not None and roles.isdisjoint(principal.roles):
        return False
    allowed = principal.allowed_tools
    return allowed is None or tool.name in allowed


def _valid(tool: Tool, arguments: Any) -> bool:
    try:
        tool.validate(arguments)
    except Exception:
        return False
    return True


async def _end_progress(context: ToolContext[Any]) -> None:
    """The call ended: its last report goes out (before the result), then nothing more."""
    if isinstance(context.progress, ProgressThrottle):
        await context.progress.aclose()


def _can_elicit(ctx: ServerRequestContext[Any, Any], modern: bool) -> bool:
    caps = ctx.session.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None:
        return False
    if elicitation.form is None and elicitation.url is not None:  # URL mode only: no form to answer
        return False
    return modern or ctx.session.can_send_request


def _wire_result(rendered: dict[str, Any], version: str) -> dict[str, Any]:
    """A rendered `CallToolResult` in `version`'s wire form: what the SDK's result serializer makes of it.

    `_render` gives text content, `isError`, `structuredContent` (any value) and `resultType`; the
    serializer keeps the keys the version defines (no `structuredContent` before 2025-06-18, no
    `resultType` before 2026-07-28) and dumps values in JSON mode (`to_jsonable_python`).
    """
    keys = _WIRE_KEYS.get(version)
    if keys is None:
        keys = _WIRE_KEYS[version] = frozenset(
            _methods.serialize_server_result("tools/call", version, dict(_WIRE_PROBE))
        )
    wire = {"content": [{"text": block["text"], "type": "text"} for block in rendered["content"]]}
    for key in ("isError", "resultType"):
        if key in keys:
            wire[key] = rendered[key]
    if "structuredContent" in rendered and "structuredContent" in keys:
        wire["structuredContent"] = to_jsonable_python(rendered["structuredContent"])
    return wire


def _render(result: ToolResult, tool: Tool | None, version: str | None = None) -> dict[str, Any]:
    out = _FORMAT.tool_result_message(result, tool=tool)
    out["resultType"] = "complete"  # required from 2026-07-28; earlier versions' schemas drop it
    if result.content and version is not None:
        out["content"] = [_block_for(block, version) for block in out["content"]]
    return out


def _block_for(block: dict[str, Any], version: str) -> dict[str, Any]:
    """A content block an older client can read: `audio` came in 2025-03-26 and `resource_link` in
    2025-06-18; before those, the block is a text note (versions are dates: text order is time order)."""
    kind = block["type"]
    if kind == "audio" and version < "2025-03-26":
        return {
            "type": "text",
            "text": f"[{block.get('mimeType', 'audio')} audio, not shown: this MCP version has no audio]",
        }
    if kind == "resource_link" and version < "2025-06-18":
        return {"type": "text", "text": f"[resource {block.get('name', '')}: {block['uri']}]"}
    return block
