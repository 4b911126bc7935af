"""Serving one MCP connection over a stream pair (stdio, `mcp.Client(server, mode="legacy")` in memory).

The SDK's `Server.run` peeks at the client's first request to pick the protocol era, then relays every
later message through an extra task and memory stream into the chosen loop: one more task switch per
message, for the whole life of the connection. Here the peeked frames are replayed in front of the
original stream instead (no relay task), and the rest is the SDK's own machinery: the same
`JSONRPCDispatcher`, `Connection` and `ServerRunner` as the SDK's handshake-era loop (initialize inline,
requests concurrent, cancellation, progress, server-to-client requests for elicitation). A connection that
opens in the 2026-07-28 era (per-request envelope) is handed to the SDK's `serve_dual_era_loop` whole.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import ServerRunner, aclose_shielded, serve_dual_era_loop
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.dispatcher import DispatchContext
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext
from mcp_types import INVALID_REQUEST, PROTOCOL_VERSION_META_KEY, JSONRPCRequest

__all__ = ["serve_streams"]

_logger = logging.getLogger("toolrun.mcp")

_T = TypeVar("_T")

_LEAD_LIMIT = 8
"""Frames kept from before the first request (as the SDK: a bare `notifications/initialized` matters)."""


class _Prepended(Generic[_T]):
    """A receive stream that yields `lead` (with the sender contexts captured for it) before `inner`."""

    def __init__(self, lead: list[tuple[contextvars.Context | None, _T]], inner: ReadStream[_T]) -> None:
        self._lead = lead
        self._inner = inner
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> _T:
        if self._lead:
            self.last_context, item = self._lead.pop(0)
            return item
        item = await self._inner.receive()
        self.last_context = getattr(self._inner, "last_context", None)
        return item

    def __aiter__(self) -> _Prepended[_T]:
        return self

    async def __anext__(self) -> _T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._lead.clear()
        await self._inner.aclose()

    async def __aenter__(self) -> _Prepended[_T]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    meta = params.get("_meta") if params else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


async def serve_streams(
    server: Server[Any],
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
    *,
    lifespan_state: Any,
    init_options: InitializationOptions | None,
    raise_exceptions: bool,
) -> None:
    """Serve one connection until the client closes the read side (what `Server.run` does, one hop less)."""
    try:
        lead: list[tuple[contextvars.Context | None, SessionMessage | Exception]] = []
        opening: JSONRPCRequest | None = None
        try:
            async for item in read_stream:
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    opening = item.message
                elif len(lead) >= _LEAD_LIMIT:
                    _logger.debug("dropped a frame received before the first request: %r", item)
                    continue
                lead.append((getattr(read_stream, "last_context", None), item))
                if opening is not None:
                    break
        except anyio.ClosedResourceError:
            pass
        stream: _Prepended[SessionMessage | Exception] = _Prepended(lead, read_stream)
        serve = _serve_handshake_era
        if opening is not None and opening.method != "initialize" and _has_modern_envelope(opening.params):
            serve = serve_dual_era_loop  # the 2026-07-28 era: the SDK's loop, whole
        await serve(
            server,
            stream,
            write_stream,
            lifespan_state=lifespan_state,
            init_options=init_options,
            raise_exceptions=raise_exceptions,
        )
    finally:
        await read_stream.aclose()
        await write_stream.aclose()


async def _serve_handshake_era(
    server: Server[Any],
    read_stream: ReadStream[SessionMessage | Exception],
    write_stream: WriteStream[SessionMessage],
    *,
    lifespan_state: Any,
    init_options: InitializationOptions | None,
    raise_exceptions: bool,
) -> None:
    dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
        read_stream,
        write_stream,
        raise_handler_exceptions=raise_exceptions,
        inline_methods=frozenset({"initialize"}),  # a pipelined next request sees the initialized state
    )
    connection = Connection.for_loop(dispatcher)
    runner = ServerRunner(server, connection, lifespan_state, init_options=init_options)
    run_request = runner.on_request

    async def on_request(
        dctx: DispatchContext[TransportContext], method: str, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if method != "initialize" and _has_modern_envelope(params):
            raise MCPError(
                code=INVALID_REQUEST,
                message="this connection serves the handshake protocol era; "
                "requests carrying the 2026-07-28 envelope are not accepted on it",
            )
        return await run_request(dctx, method, params)

    try:
        await dispatcher.run(on_request, runner.on_notify)
    finally:
        await aclose_shielded(connection)
