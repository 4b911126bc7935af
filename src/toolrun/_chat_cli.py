"""`toolrun chat`: a terminal client of the chat API — against a running server, or in-process.

In-process, it builds the same app (`create_app(Settings())`) behind an ASGI transport and signs in as the
local demo user: the terminal and the web page go through exactly the same HTTP code.

Failures are one clear line, never a traceback: a URL without a scheme is a usage error (exit 2); a server
that cannot be reached, or that refuses the token (401), ends the command with exit 1 before the first
prompt. A connection lost mid-session says so and keeps the prompt: Enter sends the last request again.
Ending the session while the server is unreachable exits 1; a normal end (`exit`, Ctrl-D) exits 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from rich.console import Console
from rich.markup import escape
from rich.prompt import Confirm

from toolrun._cli_shared import ensure_demo_user

__all__ = ["iter_sse", "run_chat"]

_QUIT = ("exit", "quit", "/exit", "/quit")
_CONNECT_TIMEOUT = 10.0
_PROMPT = "[bold]you>[/bold] "
_WAKE = 0.2
"""Seconds the prompt waits for a line before it runs pending signal handlers (see `_wait_for_line`)."""


class _ConnectionLost(Exception):
    """The connection to the server broke (or the stream was cut) before the run's answer arrived."""


class _Refused(Exception):
    """The server refused the token: nothing more can work in this session."""


async def iter_sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """`(event, data)` pairs of a `text/event-stream` response."""
    event, data = "message", list[str]()
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield event, json.loads("\n".join(data))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("title") or body)[:300]
    return str(body)[:300]


class _Text:
    """Streams answer text in whole words: a line is printed once it is complete (or as wide as the
    terminal), wrapped by Rich at word boundaries, so nothing is ever cut mid-word."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.buffer = ""
        self.printed = False

    def add(self, text: str) -> None:
        self.buffer += text
        width = max(20, self.console.width)
        while True:
            newline = self.buffer.find("\n")
            if newline >= 0:
                self._line(self.buffer[:newline])
                self.buffer = self.buffer[newline + 1 :]
                continue
            if len(self.buffer) > width:
                cut = self.buffer.rfind(" ", 0, width + 1)
                if cut > 0:
                    self._line(self.buffer[:cut])
                    self.buffer = self.buffer[cut + 1 :]
                    continue
            return

    def flush(self) -> None:
        if self.buffer:
            self._line(self.buffer)
            self.buffer = ""

    def _line(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)
        self.printed = True


async def _stream(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], console: Console
) -> dict[str, Any] | None:
    """Show one run as it streams; its final body, or None after an error the server reported.

    Raises:
        _ConnectionLost: the connection broke, or the stream ended before the run did.
        _Refused: the server answered 401 (the token is unknown or revoked).
    """
    status: Any = None
    text = _Text(console)

    def stop_spinner() -> None:
        nonlocal status
        if status is not None:
            status.stop()
            status = None

    try:
        async with client.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                if response.status_code == 401:
                    raise _Refused(f"401 {_detail(response)}")
                console.print(f"[red]{response.status_code}[/red] {escape(_detail(response))}")
                return None
            async for event, data in iter_sse(response):
                if event == "text_delta":
                    text.add(str(data.get("text", "")))
                elif event == "tool_call_started":
                    text.flush()
                    stop_spinner()
                    status = console.status(f"running {escape(str(data.get('tool')))}…")
                    status.start()
                elif event == "tool_call_finished":
                    stop_spinner()
                    text.flush()
                    marks = {"ok": "[green]✓[/green]", "error": "[red]✗[/red]"}
                    mark = marks.get(str(data.get("status")), "[yellow]?[/yellow]")
                    console.print(f"{mark} {escape(str(data.get('tool')))}", highlight=False)
                elif event == "error":
                    stop_spinner()
                    text.flush()
                    console.print(f"[red]error:[/red] {escape(str(data.get('message')))}")
                    return None
                elif event == "run_finished":
                    stop_spinner()
                    text.flush()
                    if not text.printed and data.get("output"):
                        for line in str(data["output"]).split("\n"):
                            text.add(line + "\n")
                    return data
    except httpx.TransportError as exc:
        raise _ConnectionLost(_reason(exc)) from None
    finally:
        stop_spinner()
        text.flush()
    raise _ConnectionLost("the answer was cut off before the run finished")


def _read_line(console: Console) -> str:
    """The person's next line. Ctrl-C raises KeyboardInterrupt here, at the prompt: asyncio.run's own SIGINT
    handler would only cancel the chat once a line came in (dropping that line and exiting 130)."""
    if threading.current_thread() is not threading.main_thread():
        return console.input(_PROMPT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        console.print(_PROMPT, end="")
        _wait_for_line()
        return input()
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for_line() -> None:
    """On a terminal, return once a whole line (or Ctrl-D) waits to be read, waking every `_WAKE` seconds.

    A SIGINT interrupts the read only when the reading thread receives it in its read; one that lands just
    before the read begins, or that the kernel gives to another thread, would otherwise wait for Enter
    (the screen stuck at `you> ^C`). Each wake runs Python's pending handlers, so it is raised here."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test's stream, or closed
        return
    if os.name != "posix" or not os.isatty(fd):
        return
    while not select.select([fd], [], [], _WAKE)[0]:
        pass


async def _session(
    client: httpx.AsyncClient,
    conversation_id: str | None,
    console: Console,
    ask: Callable[[], str],
    where: str,
) -> int:
    last: tuple[str, dict[str, Any]] | None = None  # what to send again after a lost connection
    down = False
    while True:
        try:
            message = ask().strip()
        except KeyboardInterrupt:  # as a shell does: the line is dropped, a new prompt
            console.print()
            continue
        except EOFError:
            console.print()
            return 1 if down else 0
        if message in _QUIT:
            return 1 if down else 0
        if not message:
            if last is None:
                continue
            path, body = last
        else:
            body = {"message": message}
            if conversation_id:
                body["conversation_id"] = conversation_id
            path = "/api/v1/chat/stream"
        try:
            result = await _stream(client, path, body, console)
            last, down = None, False
            while result is not None:
                conversation_id = result.get("conversation_id") or conversation_id
                pending = result.get("pending") or []
                if result.get("status") != "awaiting_confirmation" or not pending:
                    break
                item = pending[0]
                # The trace of the calls is printed; the question stands on its own lines, whole words.
                words = item.get("preview") or item.get("summary")
                console.print(f"[yellow]Confirm:[/yellow] {escape(str(words))}")
                approve = Confirm.ask("Allow it?", console=console, default=False)
                path = f"/api/v1/confirmations/{item['confirmation_id']}/stream"
                body = {"approve": approve}
                result = await _stream(client, path, body, console)
        except _ConnectionLost as exc:
            last, down = (path, body), True
            console.print(
                f"[red]error:[/red] lost the connection to {escape(where)} ({escape(str(exc))}); the answer "
                "may be missing. Press Enter to send it again, or type `exit` to quit."
            )
        except _Refused as exc:
            console.print(
                f"[red]error:[/red] {escape(where)} refused the token ({escape(str(exc))}); sign in again "
                "with a valid --token (or TOOLRUN_TOKEN)."
            )
            return 1


def _check_url(url: str) -> str | None:
    """Why `url` cannot be a server address, or None when it can."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "it needs a scheme and a host, e.g. http://127.0.0.1:8000"
    return None


async def _connect(client: httpx.AsyncClient, url: str, console: Console) -> dict[str, Any] | None:
    """Who the token belongs to on the server (`/api/v1/me`), or None after saying why not."""
    try:
        response = await client.get("/api/v1/me")
    except httpx.TransportError as exc:
        console.print(
            f"[red]error:[/red] cannot reach a toolrun server at {escape(url)} ({escape(_reason(exc))}). "
            "Is `toolrun serve` running there?"
        )
        return None
    if response.status_code == 401:
        console.print(
            f"[red]error:[/red] {escape(url)} refused the token (401 {escape(_detail(response))}); pass a "
            "valid --token (or TOOLRUN_TOKEN), e.g. one from `toolrun users add NAME`."
        )
        return None
    try:
        me = response.json() if response.status_code == 200 else None
    except ValueError:
        me = None
    if not isinstance(me, dict):
        console.print(
            f"[red]error:[/red] {escape(url)} answered {response.status_code} to /api/v1/me: is it a toolrun "
            "server?"
        )
        return None
    return me


def _banner(console: Console, where: str, me: dict[str, Any]) -> None:
    model: dict[str, Any] = me["model"] if isinstance(me.get("model"), dict) else {}
    name = str(model.get("name") or "unknown")
    label = "the demo model (offline, a few commands: type `help`)" if model.get("demo") else f"model {name}"
    user = me.get("name") or me.get("user_id") or "?"
    console.print(
        f"toolrun chat — {escape(where)}, {escape(label)}, signed in as {escape(str(user))}. "
        "Type `exit` or press Ctrl-D to quit.",
        highlight=False,
    )


async def run_chat(
    *,
    url: str | None,
    token: str | None,
    conversation_id: str | None,
    console: Console,
    ask: Callable[[], str] | None = None,
) -> int:
    """Chat until `exit` or end of input; returns the exit code (0 ok, 1 failure, 2 usage)."""
    prompt = ask or (lambda: _read_line(console))
    timeout = httpx.Timeout(None, connect=_CONNECT_TIMEOUT)
    if url is not None:
        problem = _check_url(url)
        if problem is not None:
            console.print(
                f"[red]error:[/red] --url {escape(url)!s} is not a server address: {escape(problem)}"
            )
            return 2
        if not token:
            console.print("[red]error:[/red] --token (or TOOLRUN_TOKEN) is required with --url")
            return 2
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        ) as client:
            me = await _connect(client, url, console)
            if me is None:
                return 1
            _banner(console, url, me)
            return await _session(client, conversation_id, console, prompt, url)

    from toolrun.server import Settings, create_app
    from toolrun.server.migrate import upgrade

    settings = Settings()
    await upgrade(settings.database_url, app=settings.app)
    local_token = token or await ensure_demo_user(settings, "demo")
    app = create_app(settings)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://toolrun",
                headers={"Authorization": f"Bearer {local_token}"},
                timeout=timeout,
            )
        )
        me = await _connect(client, "the in-process server", console)
        if me is None:
            return 1
        _banner(console, "in-process server", me)
        return await _session(client, conversation_id, console, prompt, "the in-process server")
