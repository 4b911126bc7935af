"""Helpers shared by the MCP tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types


class Clock:
    """A wall clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def answer(action: str, approve: bool | None = True) -> Any:
    """An elicitation callback that answers every request with `action` (and `approve` on accept)."""

    asked: list[types.ElicitRequestParams] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        content = {"approve": approve} if action == "accept" and approve is not None else None
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    callback.asked = asked  # type: ignore[attr-defined]
    return callback


def text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


@asynccontextmanager
async def serving(app: Any, http: str = "auto") -> AsyncIterator[str]:
    """Run an ASGI app with uvicorn on 127.0.0.1 (a free port); yields its base URL. `http`: uvicorn's
    HTTP parser (`h11`, `httptools`; `auto` takes httptools where installed, as `toolrun serve` does)."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", http=http)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


@asynccontextmanager
async def http_transport(url: str, token: str | None = None) -> AsyncIterator[Any]:
    """A Streamable HTTP transport sending `Authorization: Bearer <token>` (its HTTP client closed after)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams
