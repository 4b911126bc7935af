"""A real HTTP server on 127.0.0.1 for the real tools: uvicorn serving Starlette in a thread of its own.

The tools' event loops (one per test) and their worker threads all talk to it over TCP, as they would to
any remote API. `/slow?s=2` answers after two seconds with the client's port (so a tool can prove its
connection pool reused one connection); `/undo` is the slow compensating call of a tool that cleans up
after a cancellation.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


async def _pause(request: Request, seconds: float) -> None:
    """Sleep `seconds`, or less if the client goes away meanwhile (as a real server stops working)."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    waits = [asyncio.ensure_future(asyncio.sleep(seconds)), asyncio.ensure_future(gone())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def _slow(request: Request) -> JSONResponse:
    seconds = float(request.query_params.get("s", "0"))
    await _pause(request, seconds)
    client = request.client
    return JSONResponse({"slept": seconds, "port": client.port if client else None})


class LocalHTTP:
    """The server; `url` is its base URL. `undone` counts finished `/undo` calls."""

    def __init__(self) -> None:
        self.undone = 0

        async def undo(request: Request) -> JSONResponse:
            await _pause(request, float(request.query_params.get("s", "0")))
            self.undone += 1
            return JSONResponse({"undone": True})

        app = Starlette(routes=[Route("/slow", _slow), Route("/undo", undo, methods=["POST"])])
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="realtools-http"
        )

    def __enter__(self) -> LocalHTTP:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the local HTTP server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()


def free_port() -> int:
    """A port nothing listens on (bound, then released): connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
