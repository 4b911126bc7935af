"""`TOOLRUN_DURABLE=dbos`: `toolrun serve` killed in the middle of a run; the restarted server finishes it,
and the conversation (what the page shows) gets the answer. The model is a fake OpenAI server on
127.0.0.1 that counts the requests it answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

from ._procs import ServeProcess, uvicorn_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


class FakeOpenAI:
    """Chat Completions streams: the first request stops after its first words and never ends (the
    server is killed meanwhile); later ones answer in full. `requests` counts what came in."""

    def __init__(self) -> None:
        self.requests = 0
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> StreamingResponse:
        await request.body()
        self.requests += 1
        first = self.requests == 1

        async def frames() -> AsyncIterator[bytes]:
            yield _chunk({"role": "assistant", "content": "Half"})
            if first:
                await asyncio.Event().wait()  # hangs until the client is gone
            for word in ("The", " whole", " answer."):
                yield _chunk({"content": word})
            yield _chunk({}, finish_reason="stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    if delta.get("content") == "Half":
        delta = {"role": "assistant", "content": ""}
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(data)}\n\n".encode()


async def _first_event(http: httpx.AsyncClient, message: str) -> tuple[dict[str, Any], Any]:
    """Open the chat stream and read its first event (run_started); the stream stays open."""
    request = http.build_request("POST", "/api/v1/chat/stream", json={"message": message})
    response = await http.send(request, stream=True)
    assert response.status_code == 200
    lines = response.aiter_lines()
    async for line in lines:
        if line.startswith("data:"):
            return json.loads(line[5:]), response
    raise AssertionError("the stream ended before its first event")


async def test_a_run_killed_mid_request_is_finished_by_the_restarted_server(tmp_path: Path) -> None:
    fake = FakeOpenAI()
    async with uvicorn_server(fake.app) as fake_url:
        await _kill_and_restart(tmp_path, fake, fake_url)
    assert fake.requests == 2  # the one cut by the kill, and the one the recovered run made


async def _kill_and_restart(tmp_path: Path, fake: FakeOpenAI, fake_url: str) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    env = {
        "TOOLRUN_DATABASE_URL": db,
        "TOOLRUN_DATA_DIR": str(tmp_path / "data"),
        "TOOLRUN_DURABLE": "dbos",
        "TOOLRUN_MODEL": "openai:gpt-4o-mini",
        "OPENAI_BASE_URL": f"{fake_url}/v1",
        "OPENAI_API_KEY": "sk-test",
    }
    await upgrade(db)
    engine = create_engine(db)
    try:
        _, token = await UserStore(engine).add("alice")
    finally:
        await engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    first = ServeProcess(env)
    try:
        url = await first.wait_ready(timeout=60)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            started, response = await _first_event(http, "hello")
            conversation_id = started["conversation_id"]
            async with asyncio.timeout(30):
                while fake.requests < 1:  # the model request is in flight
                    await asyncio.sleep(0.05)
            first.kill()
            await response.aclose()
    finally:
        first.kill()
    second = ServeProcess(env)  # the same executor id (SQLite: one host): DBOS recovers the run
    try:
        url = await second.wait_ready(timeout=60)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            async with asyncio.timeout(60):
                while True:
                    body = (await http.get(f"/api/v1/conversations/{conversation_id}")).json()
                    said = [m.get("content") for m in body["messages"] if m["role"] == "assistant"]
                    if said:
                        break
                    await asyncio.sleep(0.2)
            assert said == ["The whole answer."]
            assert body["last_run"]["status"] == "completed", body
    finally:
        second.kill()
