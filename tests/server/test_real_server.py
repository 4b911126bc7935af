"""The service behind a real uvicorn on 127.0.0.1: JSON and SSE over TCP, and a client that disconnects."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from toolrun import ToolCall, ToolContext, tool
from toolrun._chat_cli import iter_sse
from toolrun.models import FunctionModel, Message, ToolResultMessage, UserMessage
from toolrun.server import create_app
from toolrun.server.migrate import upgrade

from ._procs import uvicorn_server
from .conftest import sqlite_settings


async def _app_with_user(tmp_path: Path, **options: Any) -> tuple[Any, str]:
    settings = sqlite_settings(tmp_path)
    await upgrade(settings.database_url)
    app = create_app(settings, **options)
    _, token = await app.state.toolrun.users.add("alice")
    return app, token


async def test_json_and_sse_over_tcp(tmp_path: Path) -> None:
    app, token = await _app_with_user(tmp_path)
    async with (
        uvicorn_server(app) as url,
        httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http,
    ):
        r = await http.post("/api/v1/chat", json={"message": "add Water plants #home"})
        assert r.status_code == 200 and r.json()["status"] == "completed"
        conv = r.json()["conversation_id"]
        events: list[tuple[str, str, dict[str, Any]]] = []
        async with http.stream(
            "POST", "/api/v1/chat/stream", json={"message": "list", "conversation_id": conv}
        ) as s:
            assert s.status_code == 200
            assert s.headers["content-type"].startswith("text/event-stream")
            ids: list[str] = []
            event = None
            async for line in s.aiter_lines():
                if line.startswith("id:"):
                    ids.append(line[3:].strip())
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    events.append((ids[-1], event or "", json.loads(line[5:])))
        names = [e[1] for e in events]
        assert names[0] == "run_started" and names[-1] == "run_finished"
        assert names[1:3] == ["tool_call_started", "tool_call_finished"]
        assert set(names[3:-1]) == {"text_delta"}
        run_id = events[0][2]["run_id"]
        assert [e[0] for e in events] == [f"{run_id}:{i}" for i in range(1, len(events) + 1)]
        final = events[-1][2]
        assert final["status"] == "completed" and final["conversation_id"] == conv
        assert "".join(e[2]["text"] for e in events if e[1] == "text_delta") == final["output"]
        # errors before a stream starts are plain problem responses
        r = await http.post("/api/v1/chat/stream", json={"message": "x", "conversation_id": "conv_nope"})
        assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


async def test_a_client_that_disconnects_does_not_leave_the_run_half_done(tmp_path: Path) -> None:
    release = asyncio.Event()
    ran: list[str] = []

    @tool
    async def slow_note(text: str, ctx: ToolContext) -> str:
        """Write a note slowly.

        Args:
            text: The note.
        """
        await release.wait()
        ran.append(text)
        return "noted"

    def answer(messages: list[Message], tools: list[Any]) -> Any:
        if isinstance(messages[-1], ToolResultMessage):
            return "Your note is written."
        assert isinstance(messages[-1], UserMessage)
        return ToolCall(name="slow_note", arguments={"text": messages[-1].content})

    app, token = await _app_with_user(tmp_path, model=FunctionModel(answer), extra_tools=[slow_note])
    async with (
        uvicorn_server(app) as url,
        httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http,
    ):
        seen: list[str] = []
        async with http.stream("POST", "/api/v1/chat/stream", json={"message": "remember this"}) as s:
            async for event, data in iter_sse(s):
                seen.append(event)
                if event == "run_started":
                    conversation_id = data["conversation_id"]
                if event == "tool_call_started":
                    break  # the client goes away while the tool waits
        assert seen == ["run_started", "tool_call_started"]
        busy = await http.post("/api/v1/chat", json={"message": "again", "conversation_id": conversation_id})
        assert busy.status_code == 409 and busy.json()["code"] == "conversation_busy"
        release.set()
        for _ in range(200):
            detail = (await http.get(f"/api/v1/conversations/{conversation_id}")).json()
            if detail["last_run"]["status"] != "running":
                break
            await asyncio.sleep(0.02)
        assert detail["last_run"]["status"] == "completed"
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert detail["messages"][-1]["content"] == "Your note is written."
        assert ran == ["remember this"]
        # the conversation is free again
        again = await http.post("/api/v1/chat", json={"message": "again", "conversation_id": conversation_id})
        assert again.status_code == 200
        release.set()
