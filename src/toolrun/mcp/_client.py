"""A remote MCP server's tools as toolrun `Tool`s, run through toolrun's executor (`MCPToolset`).

Each remote tool gets the executor's gates: its `inputSchema` validated before anything is sent, a
`timeout` that cancels the call on the server too, retries only where the remote says it is idempotent,
and its annotations **untrusted** unless `trusted=True` (every tool not read-only is destructive, so a
person confirms it first). Failures are tool errors, never hangs (`REMOTE_UNAVAILABLE`, `REMOTE_ERROR`,
`REMOTE_TOOL_ERROR`); an elicitation the user has not already answered in toolrun ends the call with
`NEEDS_USER_INPUT`; an MCP task is polled within the same `timeout`. Results are the remote's, whole, cut
by the output budget (`read_result` pages them), and resource links it returns can be read back by the
same user (`read_resource`). Usage and every rule: docs/mcp.md, "Using a remote MCP server's tools".
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from toolrun.content import (
    MAX_ITEMS,
    Audio,
    Content,
    ContentError,
    File,
    Image,
    ResourceLink,
    Text,
    ToolOutput,
)
from toolrun.exceptions import ToolrunError
from toolrun.mcp._tasks_client import LEGACY_TASKS_VERSION, TasksExtension
from toolrun.registry import ToolRegistry
from toolrun.results import ToolError
from toolrun.tools import Tool, ToolContext
from toolrun.tools._options import OutputBudget
from toolrun.tools._tool import NAME_PATTERN

__all__ = ["MCPToolset", "import_tools"]

_logger = logging.getLogger("toolrun.mcp")

Target = str | StdioServerParameters | Sequence[str] | Server[Any]
"""A Streamable HTTP URL, a stdio command (`StdioServerParameters` or `["python", "-m", "srv"]`), or an
in-process `Server` (tests)."""

_MAX_REMOTE_CHARS = 2_000_000
"""The most characters of one remote result kept (past the output budget, in the artifact store)."""
_MAX_ERROR_CHARS = 4000
"""The most characters of a remote error's text put in the error message."""
_MAX_REMOTE_BLOCKS = MAX_ITEMS
_MAX_LINKS = 10_000
"""Resource links remembered (per toolset, all users together, oldest forgotten first)."""
READ_RESOURCE = "read_resource"


@dataclass(slots=True)
class _CallState:
    confirmed: bool
    input_request: dict[str, Any] | None = None


_CURRENT: contextvars.ContextVar[_CallState | None] = contextvars.ContextVar("toolrun_mcp_call", default=None)


class MCPToolset:
    """A connection to one MCP server and its tools as toolrun `Tool`s.

    Use as `async with MCPToolset(...) as remote:` (or `await remote.connect()` / `await remote.aclose()`).

    Args:
        server: A Streamable HTTP URL, a stdio command (`StdioServerParameters` or an argument list), or an
            in-process MCP `Server`.
        headers: HTTP headers for every request (e.g. `Authorization`).
        prefix: Register the tools as `prefix + separator + name`.
        separator: Between prefix and name (default `_`).
        trusted: Take the server's annotations at their word (default: only `readOnlyHint` is believed).
        timeout: Seconds one call may take (the tool's `timeout`).
        connect_timeout: Seconds to (re)connect before the call fails with `REMOTE_UNAVAILABLE`.
        retries: Extra attempts after a transient failure, for idempotent tools only.
        rate_limit: A rate limit for every tool of this server (e.g. `"60/minute"`), shared under one key.
        mode: The SDK's protocol negotiation (`"auto"`: 2026-07-28 when the server speaks it, else 2025).
        tasks: Declare the MCP Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a server may
            then answer a call with a task, which is polled (at the server's suggested interval) until it
            ends; when `timeout` runs out first, the task is cancelled on the server (`tasks/cancel`).
        max_poll_interval: Seconds; the longest wait between two polls of a task, whatever the server
            suggests.
        output_budget: How much of a remote result the model is shown (characters, or an
            `OutputBudget`): a longer one is cut, kept whole, and paged with `read_result`. None: the
            executor's `output_budget`.
        resources: List a `read_resource` tool (named with the prefix) for the model when the server has
            resources: it reads the resource links this server returned to the same user.
    """

    def __init__(
        self,
        server: Target,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        separator: str = "_",
        trusted: bool = False,
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        retries: int = 2,
        rate_limit: str | None = None,
        mode: str = "auto",
        tasks: bool = True,
        max_poll_interval: float = 5.0,
        output_budget: int | OutputBudget | None = 4000,
        resources: bool = True,
    ) -> None:
        if headers and not isinstance(server, str):
            raise ValueError("headers= is for Streamable HTTP URLs; a stdio or in-process server has none.")
        self.server = server
        self.headers = dict(headers or {})
        self.prefix = prefix
        self.separator = separator
        self.trusted = trusted
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = retries
        self.rate_limit = rate_limit
        self.mode = mode
        self.tasks = tasks
        self.max_poll_interval = max_poll_interval
        self.output_budget = OutputBudget.coerce(output_budget) if output_budget is not None else None
        self.resources = resources
        self.label = _label(server)
        self._task_waiter = TasksExtension(max_poll_interval=max_poll_interval)
        self._links: OrderedDict[tuple[str | None, str], None] = OrderedDict()
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._inflight: list[_CallState] = []

    # ----------------------------------------------------------------------------------------------
    # Connection

    async def __aenter__(self) -> MCPToolset:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Connect now (calls also connect on demand, and reconnect after a failure); after `aclose`,
        open the toolset again (a service started twice in one process, `async with` twice).

        Raises:
            ConnectionError: the server could not be reached within `connect_timeout`.
        """
        self._closed = False
        await self._connected()

    async def aclose(self) -> None:
        """Close the connection (a stdio server process is stopped); calls refuse until `connect` or
        `register` opens the toolset again."""
        self._closed = True
        await self._disconnect()

    async def _connected(self) -> Client:
        async with self._lock:
            if self._client is not None and self._task is not None and not self._task.done():
                return self._client
            await self._disconnect_locked()
            if self._closed:
                raise ConnectionError(f"The MCP toolset for {self.label} is closed.")
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[Client] = loop.create_future()
            stop = asyncio.Event()
            task = loop.create_task(self._run(ready, stop), name=f"toolrun-mcp {self.label}")
            try:
                client = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            except BaseException as exc:
                stop.set()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise ConnectionError(f"Could not connect to the MCP server {self.label}.") from exc
            self._client, self._stop, self._task = client, stop, task
            return client

    async def _run(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        # One task owns the SDK client from enter to exit (its task groups must not change task).
        try:
            async with self._new_client() as client:
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # the connection died or never came up
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError("cancelled"))
            elif not isinstance(exc, asyncio.CancelledError):
                _logger.debug("MCP connection to %s ended: %s", self.label, type(exc).__name__)
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _new_client(self) -> Client:
        server = self.server
        target: Any
        if isinstance(server, str):
            target = _http_transport(server, self.headers) if self.headers else server
        elif isinstance(server, StdioServerParameters | Server):
            target = server
        else:
            args = list(server)
            target = StdioServerParameters(command=args[0], args=args[1:])
        extensions = [self._task_waiter] if self.tasks else None
        return Client(
            target, mode=self.mode, elicitation_callback=self._on_elicit, cache=None, extensions=extensions
        )

    async def _disconnect(self) -> None:
        async with self._lock:
            await self._disconnect_locked()

    async def _disconnect_locked(self) -> None:
        task, stop = self._task, self._stop
        self._client = self._task = self._stop = None
        if task is None:
            return
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except BaseException:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _mark_dead(self, client: Client) -> None:
        if self._client is client:
            self._client = None  # the next call reconnects (after the runner has closed this one)
            if self._stop is not None:
                self._stop.set()

    # ----------------------------------------------------------------------------------------------
    # Tools

    async def list_tools(self) -> list[Tool]:
        """The server's tools as toolrun `Tool`s (a tool with an unusable name or schema is skipped)."""
        client = await self._connected()
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang us
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        tools = []
        for remote in listed:
            try:
                tools.append(self._tool(remote))
            except (ToolrunError, ValueError, TypeError) as exc:
                _logger.warning("Skipping MCP tool %r from %s: %s", remote.name[:100], self.label, exc)
        if self.resources and client.server_capabilities.resources is not None:
            reader = self._reader_tool()
            if any(t.name == reader.name for t in tools):
                _logger.warning(
                    "The MCP server %s has a tool named %r: no resource reader", self.label, reader.name
                )
            else:
                tools.append(reader)
        return tools

    async def register(self, registry: ToolRegistry) -> list[Tool]:
        """List the server's tools and register them in `registry`; returns them.

        Opens the toolset again after `aclose` (as `connect`).

        Raises:
            ToolAlreadyExistsError: a name is taken (use `prefix=`).
        """
        self._closed = False
        tools = await self.list_tools()
        for t in tools:
            registry.register(t)
        return tools

    def _tool(self, remote: types.Tool) -> Tool:
        hints = remote.annotations
        read_only = bool(hints is not None and hints.read_only_hint)
        if self.trusted:
            destructive = not read_only and (hints is None or hints.destructive_hint is not False)
        else:
            destructive = not read_only
        idempotent = read_only or bool(hints is not None and hints.idempotent_hint)
        name = f"{self.prefix}{self.separator}{remote.name}" if self.prefix else remote.name
        if not NAME_PATTERN.match(name):
            raise ValueError("the name is not one toolrun accepts")
        options: dict[str, Any] = {
            "read_only": read_only,
            "destructive": destructive,
            "idempotent": idempotent,
            "retries": self.retries if idempotent else 0,
            "timeout": self.timeout,
            "tags": {"mcp"},
        }
        if hints is not None and hints.open_world_hint is not None:
            options["open_world"] = hints.open_world_hint
        if hints is not None and hints.title:
            options["title"] = hints.title
        options.update(self._shared_options())
        description = (remote.description or remote.title or remote.name).strip() or remote.name
        as_task = remote.execution is not None and remote.execution.task_support == "required"
        handler = self._handler(remote.name, destructive, _wraps_result(remote.output_schema), as_task)
        return Tool.from_schema(name, description, remote.input_schema, handler, **options)

    def _shared_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.rate_limit is not None:
            from toolrun.tools._options import parse_rate_limit

            options["rate_limit"] = parse_rate_limit(self.rate_limit, key=f"mcp:{self.label}")
        if self.output_budget is not None:
            options["output_budget"] = self.output_budget
        return options

    def _handler(self, remote_name: str, confirmed: bool, unwrap: bool, as_task: bool) -> Callable[..., Any]:
        async def call_remote(toolrun_context_: ToolContext, **arguments: Any) -> Any:
            value = await self._call(remote_name, arguments, confirmed, toolrun_context_, as_task)
            if isinstance(value, ToolOutput):
                inner = value.value
                if unwrap and isinstance(inner, dict) and set(inner) == {"result"}:
                    return ToolOutput(value=inner["result"], content=value.content)
                return value
            if unwrap and isinstance(value, dict) and set(value) == {"result"}:
                return value["result"]
            return value

        return call_remote

    async def _call(
        self, name: str, arguments: dict[str, Any], confirmed: bool, ctx: ToolContext, as_task: bool = False
    ) -> Any:
        try:
            client = await self._connected()
        except ConnectionError as exc:
            raise self._unavailable(f"The MCP server {self.label} cannot be reached.") from exc
        state = _CallState(confirmed=confirmed)
        token = _CURRENT.set(state)
        self._inflight.append(state)
        try:
            progress = _progress_to(ctx)
            if as_task and client.protocol_version == LEGACY_TASKS_VERSION:
                result = await self._task_waiter.call_legacy_task(
                    client.session, name, arguments, progress_callback=progress
                )
            else:
                result = await client.call_tool(name, arguments, progress_callback=progress)
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            raise self._failure(
                client, exc, refused="refused the call", unusable="answered with a result that cannot be used"
            ) from exc
        finally:
            _CURRENT.reset(token)
            self._inflight.remove(state)
        if state.input_request is not None:
            raise _needs_input(state.input_request)
        if result.is_error:
            raise ToolError("REMOTE_TOOL_ERROR", _error_text(result) or "The remote tool failed.")
        return self._output(result.content, result.structured_content, ctx)

    def _output(self, blocks: Sequence[Any], structured: Any, ctx: ToolContext) -> Any:
        """The remote's blocks as a value and content items: text blocks make the value (unless the
        structured content is the value), the other blocks stay what they are (see `_content`)."""
        texts = [block.text for block in blocks if isinstance(block, types.TextContent)]
        others = [block for block in blocks if not isinstance(block, types.TextContent)]
        value = structured if structured is not None else _kept("\n".join(texts)) if texts else None
        if not others:
            return value if value is not None or structured is not None else ""
        items = [_content(block) for block in others[:_MAX_REMOTE_BLOCKS]]
        for item in items:
            if isinstance(item, ResourceLink):
                self._remember(ctx.user_id, item.uri)
        return ToolOutput(value=value, content=items)

    # ----------------------------------------------------------------------------------------------
    # Resources

    async def read_resource(self, resource: str | ResourceLink) -> list[Content]:
        """Read a resource of this server (`resources/read`): a URI, or a `ResourceLink` a tool returned.

        Returns:
            Its contents as content items: text as `Text`; bytes as `Image`, `Audio` or `File` by their
            media type (bytes that are not what they claim become a `Text` note).

        Raises:
            ToolError: `REMOTE_UNAVAILABLE` (cannot reach the server), `REMOTE_ERROR` (the server refused:
                an unknown resource, for one).
        """
        uri = resource.uri if isinstance(resource, ResourceLink) else resource
        try:
            client = await self._connected()
        except ConnectionError as exc:
            raise self._unavailable(f"The MCP server {self.label} cannot be reached.") from exc
        try:
            read = await client.read_resource(uri)
        except (asyncio.CancelledError, ToolError):
            raise
        except Exception as exc:
            refused, unusable = f"could not read {uri[:200]!r}", "answered resources/read unusably"
            raise self._failure(client, exc, refused=refused, unusable=unusable) from exc
        return [_resource_content(item) for item in read.contents[:_MAX_REMOTE_BLOCKS]]

    def _remember(self, user_id: str | None, uri: str) -> None:
        key = (user_id, uri)
        self._links[key] = None
        self._links.move_to_end(key)
        while len(self._links) > _MAX_LINKS:
            self._links.popitem(last=False)

    def _reader_tool(self) -> Tool:
        name = f"{self.prefix}{self.separator}{READ_RESOURCE}" if self.prefix else READ_RESOURCE
        schema = {
            "type": "object",
            "properties": {
                "uri": {
                    "type": "string",
                    "description": "The resource link's URI, as the tool result gave it.",
                }
            },
            "required": ["uri"],
        }

        async def read_resource(toolrun_context_: ToolContext, uri: str) -> Any:
            if (toolrun_context_.user_id, uri) not in self._links:
                raise ToolError(
                    "NOT_FOUND",
                    f"No resource link {uri[:200]!r} from {self.label} to read: only links a tool of "
                    "this server returned in this conversation's calls can be opened.",
                    recover_action="Use a resource link's URI exactly as a tool result gave it.",
                )
            items = await self.read_resource(uri)
            texts = [item.text for item in items if isinstance(item, Text)]
            others = [item for item in items if not isinstance(item, Text)]
            value = _kept("\n".join(texts)) if texts else None
            return ToolOutput(value=value, content=others) if others else value or ""

        return Tool.from_schema(
            name,
            f"Read a resource that a tool of {self.label} returned as a resource link (by its URI).",
            schema,
            read_resource,
            read_only=True,
            idempotent=True,
            retries=self.retries,
            timeout=self.timeout,
            tags={"mcp"},
            **self._shared_options(),
        )

    def _failure(self, client: Any, exc: Exception, *, refused: str, unusable: str) -> ToolError:
        """What a failed request to the server becomes (`refused`, `unusable`: the words after "The MCP
        server <label>"): the server's own refusal (a closed connection marks the client dead; -32042
        asks the user to open a URL), an answer the SDK could not use (the connection is fine, the remote
        is wrong: Pydantic's ValidationError is a ValueError), or a transport failure (the connection is
        gone)."""
        if isinstance(exc, MCPError):
            if exc.code == types.CONNECTION_CLOSED:
                self._mark_dead(client)
                return self._unavailable(f"The MCP server {self.label} closed the connection.")
            if exc.code == types.URL_ELICITATION_REQUIRED:
                return _url_elicitation_error(exc, self.label)
            return ToolError(
                "REMOTE_ERROR",
                f"The MCP server {self.label} {refused}: {exc.message[:300]}",
                details={"mcp_code": exc.code},
            )
        if isinstance(exc, RuntimeError | ValueError):
            return ToolError(
                "REMOTE_ERROR",
                f"The MCP server {self.label} {unusable}: {str(exc)[:300]}",
                details={"reason": "invalid_result"},
            )
        self._mark_dead(client)
        return self._unavailable(f"The connection to the MCP server {self.label} failed.")

    def _unavailable(self, message: str) -> ToolError:
        return ToolError(
            "REMOTE_UNAVAILABLE",
            message,
            retryable=True,
            recover_action="Try again later, or tell the user the service is unavailable.",
        )

    async def _on_elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        state = _CURRENT.get()
        if state is None and len(self._inflight) == 1:
            # 2025 servers ask on their own request, outside the calling task: one call in flight is it
            state = self._inflight[0]
        if state is None:  # cannot tell which call asks: refuse
            return types.ElicitResult(action="decline")
        if isinstance(params, types.ElicitRequestFormParams):
            schema = params.requested_schema
            properties = schema.get("properties") or {}
            # A yes/no confirmation: what it requires is booleans only (optional fields, such as a reason
            # for a refusal, are left out of the answer).
            required = schema.get("required") or list(properties)
            if (
                state.confirmed
                and required
                and all(
                    isinstance(properties.get(name), Mapping) and properties[name].get("type") == "boolean"
                    for name in required
                )
            ):
                return types.ElicitResult(action="accept", content=dict.fromkeys(required, True))
            state.input_request = {"message": params.message, "requested_schema": dict(schema)}
        else:
            state.input_request = _url_request(params.message, params.url, params.elicitation_id)
        return types.ElicitResult(action="cancel")


async def import_tools(registry: ToolRegistry, server: Target, **options: Any) -> MCPToolset:
    """Connect to `server`, register its tools in `registry`, and return the open toolset (close it with
    `await toolset.aclose()` when done). `options` are `MCPToolset`'s."""
    toolset = MCPToolset(server, **options)
    try:
        await toolset.register(registry)
    except BaseException:
        await toolset.aclose()
        raise
    return toolset


@asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    # The SDK leaves a caller's HTTP client open: this transport owns and closes it.
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _progress_to(ctx: ToolContext) -> Any:
    if ctx.progress is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(progress, total, message)

    return forward


def _wraps_result(schema: Mapping[str, Any] | None) -> bool:
    """The MCP convention for a non-object result: `{"result": value}` described by a one-field schema."""
    if not schema:
        return False
    properties = schema.get("properties")
    return (
        isinstance(properties, Mapping)
        and set(properties) == {"result"}
        and schema.get("required") == ["result"]
    )


def _needs_input(request: dict[str, Any], more: Sequence[dict[str, Any]] = ()) -> ToolError:
    message = f"The tool needs input from the user: {str(request.get('message', ''))[:500]}"
    url = request.get("url")
    if url is not None:
        message += f" (the user opens {url})"
    details: dict[str, Any] = {"input_request": request}
    if more:
        details["more_input_requests"] = list(more)
    return ToolError(
        "NEEDS_USER_INPUT",
        message,
        recover_action=(
            "Ask the user to open the link and finish there, then call the tool again."
            if url is not None
            else "Ask the user for this, then call the tool again."
        ),
        details=details,
    )


def _url_request(message: str, url: str, elicitation_id: str | None) -> dict[str, Any]:
    """A URL elicitation as `input_request`; the URL only when it is http(s), the server being untrusted."""
    request: dict[str, Any] = {"message": message[:2000]}
    if _showable_url(url):
        request["url"] = url
    else:
        request["refused_url"] = "the server asked to open a link that is not an http(s) URL"
    if elicitation_id is not None:
        request["elicitation_id"] = elicitation_id[:200]
    return request


def _showable_url(url: str) -> bool:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return len(url) <= 4000 and parts.scheme in ("http", "https") and bool(parts.netloc)


def _url_elicitation_error(exc: MCPError, label: str) -> ToolError:
    """A -32042 answer (the URL elicitations the call needs first) as `NEEDS_USER_INPUT`."""
    from mcp.shared.exceptions import UrlElicitationRequiredError

    try:
        elicitations = UrlElicitationRequiredError.from_error(exc.error).elicitations
    except (ValueError, TypeError):
        elicitations = []
    requests = [_url_request(e.message, e.url, e.elicitation_id) for e in elicitations[:10]]
    if not requests:
        return ToolError(
            "REMOTE_ERROR",
            f"The MCP server {label} asked the user to open a link but sent none usable: {exc.message[:300]}",
            details={"mcp_code": exc.code},
        )
    return _needs_input(requests[0], requests[1:])


def _kept(text: str) -> str:
    """A remote text as kept: whole up to `_MAX_REMOTE_CHARS` (the output budget cuts what the model sees),
    past it cut with a note."""
    if len(text) <= _MAX_REMOTE_CHARS:
        return text
    return text[:_MAX_REMOTE_CHARS] + f"\n[… {len(text) - _MAX_REMOTE_CHARS:,} more characters not kept …]"


def _resource_content(item: Any) -> Content:
    """One `resources/read` content as a content item (untrusted bytes that fail become a note)."""
    media = item.mime_type
    try:
        if isinstance(item, types.TextResourceContents):
            return Text(_kept(item.text))
        data = base64.b64decode(item.blob, validate=True)
        if media is not None and media.startswith("image/"):
            return Image(data=data, media_type=media)
        if media is not None and media.startswith("audio/"):
            return Audio(data=data, media_type=media)
        name = str(item.uri).rstrip("/").rsplit("/", 1)[-1] or "resource"
        return File(data=data, name=name[:200], media_type=media)
    except (ContentError, ValueError):
        return Text(
            f"[the MCP server sent a resource{f' ({media})' if media else ''} that could not be read]"
        )


def _content(block: Any) -> Content:
    """An MCP content block as a toolrun content item. The remote server is not trusted: a block whose
    bytes do not match its media type (or are not base64) becomes a text note, never an error."""
    try:
        if isinstance(block, types.TextContent):
            return Text(_kept(block.text))
        if isinstance(block, types.ImageContent):
            return Image(data=base64.b64decode(block.data, validate=True), media_type=block.mime_type)
        if isinstance(block, types.AudioContent):
            return Audio(data=base64.b64decode(block.data, validate=True), media_type=block.mime_type)
        if isinstance(block, types.ResourceLink):
            return ResourceLink(
                uri=str(block.uri), name=block.name, media_type=block.mime_type, description=block.description
            )
        if isinstance(block, types.EmbeddedResource):
            resource = block.resource
            name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or "resource"
            if isinstance(resource, types.BlobResourceContents):
                data = base64.b64decode(resource.blob, validate=True)
                return File(data=data, name=name, media_type=resource.mime_type)
            text_type = resource.mime_type or "text/plain"
            return File(data=resource.text.encode("utf-8", "surrogatepass"), name=name, media_type=text_type)
    except (ContentError, ValueError):
        pass
    kind = getattr(block, "type", "unknown")
    media = getattr(block, "mime_type", None)
    return Text(
        f"[the MCP server sent {kind} content{f' ({media})' if media else ''} that could not be read]"
    )


def _error_text(result: types.CallToolResult) -> str:
    """A remote tool's error as text for the message: cut, visibly, past `_MAX_ERROR_CHARS`."""
    text = "\n".join(
        block.text if isinstance(block, types.TextContent) else f"[{block.type}]" for block in result.content
    )
    if len(text) <= _MAX_ERROR_CHARS:
        return text
    return text[:_MAX_ERROR_CHARS] + f"\n[… {len(text) - _MAX_ERROR_CHARS:,} more characters left out …]"


def _label(server: Target) -> str:
    if isinstance(server, str):
        return server.split("?", 1)[0]
    if isinstance(server, StdioServerParameters):
        return " ".join([server.command, *server.args])[:120]
    if isinstance(server, Server):
        return f"in-process:{server.name}"
    return " ".join(server)[:120]
