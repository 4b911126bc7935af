"""`toolrun chat`: a terminal client of the chat API — against a running server, or in-process.

In-process, it builds the same app (`create_app(Settings())`) behind an ASGI transport and signs in as the
local demo user: the terminal and the web page go through exactly the same HTTP code.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from rich.console import Console
from rich.prompt import Confirm

__all__ = ["iter_sse", "run_chat"]


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


async def _stream(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], console: Console
) -> dict[str, Any] | None:
    """Show one run as it streams; its final body, or None after an error."""
    status: Any = None
    printed = False
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            await response.aread()
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            console.print(f"[red]{response.status_code}[/red] {detail}")
            return None
        async for event, data in iter_sse(response):
            if event == "run_started" and data.get("demo"):
                console.print("[dim](demo model)[/dim]", end=" ")
            elif event == "text_delta":
                console.print(data["text"], end="", markup=False, highlight=False)
                printed = True
            elif event == "tool_call_started":
                status = console.status(f"running {data['tool']}…")
                status.start()
            elif event == "tool_call_finished":
                if status is not None:
                    status.stop()
                    status = None
                mark = {"ok": "[green]✓[/green]", "error": "[red]✗[/red]"}.get(
                    data["status"], "[yellow]?[/yellow]"
                )
                console.print(f"{mark} {data['tool']}", highlight=False)
            elif event == "error":
                console.print(f"\n[red]error:[/red] {data.get('message')}")
                return None
            elif event == "run_finished":
                if status is not None:
                    status.stop()
                if printed:
                    console.print()
                elif data.get("output"):
                    console.print(data["output"], markup=False, highlight=False)
                return data
    return None


async def _session(
    client: httpx.AsyncClient, conversation_id: str | None, console: Console, ask: Callable[[], str]
) -> int:
    while True:
        try:
            message = ask().strip()
        except (EOFError, KeyboardInterrupt):
            console.print()
            return 0
        if message in ("exit", "quit", "/exit", "/quit"):
            return 0
        if not message:
            continue
        body: dict[str, Any] = {"message": message}
        if conversation_id:
            body["conversation_id"] = conversation_id
        result = await _stream(client, "/api/v1/chat/stream", body, console)
        while result is not None:
            conversation_id = result["conversation_id"]
            pending = result.get("pending") or []
            if result.get("status") != "awaiting_confirmation" or not pending:
                break
            item = pending[0]
            approve = Confirm.ask(
                f"[yellow]Allow?[/yellow] {item.get('preview') or item['summary']}",
                console=console,
                default=False,
            )
            result = await _stream(
                client,
                f"/api/v1/confirmations/{item['confirmation_id']}/stream",
                {"approve": approve},
                console,
            )


async def run_chat(
    *,
    url: str | None,
    token: str | None,
    conversation_id: str | None,
    console: Console,
    ask: Callable[[], str] | None = None,
) -> int:
    """Chat until `exit` or end of input; returns the exit code."""
    prompt = ask or (lambda: console.input("[bold]you>[/bold] "))
    if url is not None:
        if not token:
            console.print("[red]error:[/red] --token (or TOOLRUN_TOKEN) is required with --url")
            return 2
        async with httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=None
        ) as client:
            return await _session(client, conversation_id, console, prompt)

    from toolrun.cli import ensure_demo_user
    from toolrun.server import Settings, create_app
    from toolrun.server.migrate import upgrade

    settings = Settings()
    await upgrade(settings.database_url)
    local_token = token or await ensure_demo_user(settings, "demo")
    app = create_app(settings)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(app.router.lifespan_context(app))
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app),
                base_url="http://toolrun",
                headers={"Authorization": f"Bearer {local_token}"},
                timeout=None,
            )
        )
        return await _session(client, conversation_id, console, prompt)
