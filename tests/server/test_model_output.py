"""The service's doors against text no store or provider takes, and conversations written before the model
boundary existed, on SQLite and PostgreSQL (the property test is `test_hostile_model.py`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from toolrun.models import FunctionModel, Message, history_problems
from toolrun.server import _db

from .conftest import _admin, make_service, sqlite_settings


def _answer(messages: list[Message], tools: list[Any]) -> str:
    return "ok"


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, FunctionModel]]:
    model = FunctionModel(_answer)
    if request.param == "sqlite":
        async for service in make_service(sqlite_settings(tmp_path), model=model):
            yield service, model
        return
    from .conftest import POSTGRES_ADMIN_URL

    name = f"test_{uuid.uuid4().hex[:16]}"
    await _admin(f'CREATE DATABASE "{name}"')
    url = sa.make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        settings = sqlite_settings(tmp_path, database_url=url, secret_key="k" * 40)
        async for service in make_service(settings, model=model):
            yield service, model
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    # escaped as a browser's JSON.stringify does: a lone surrogate travels as "\ud83d"
    return await http.post(
        path, content=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )


def _frames(text: str) -> list[Any]:
    out = []
    for line in text.split("\n"):
        if line.startswith("data:"):
            body = line[5:].strip()
            out.append(body if body == "[DONE]" else json.loads(body))
    return out


@pytest.mark.parametrize("text", ["a\x00b", "half \ud83d surrogate", " \n\t "])
async def test_a_message_no_store_takes_is_refused_at_every_door(
    backend: tuple[Any, FunctionModel], text: str
) -> None:
    service, model = backend
    http = service.alice.http
    for path in ("/api/v1/chat", "/api/v1/chat/stream"):
        r = await _post(http, path, {"message": text})
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert "message" in r.json()["detail"]
    agui = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    frames = _frames((await _post(http, "/api/v1/ag-ui", agui)).text)
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "INVALID_MESSAGE", frames[-1]
    ai = {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
    frames = _frames((await _post(http, "/api/v1/ai-sdk", ai)).text)
    assert frames[-1] == "[DONE]" and any(f.get("type") == "error" for f in frames[:-1])
    # nothing was stored, nothing reached the model, and the user can go on
    assert (await http.get("/api/v1/conversations")).json()["conversations"] == []
    assert len(model.requests) == 0
    ok = await _post(http, "/api/v1/chat", {"message": "hello \u202eRTL\u202c 😀"})
    assert ok.status_code == 200 and ok.json()["output"] == "ok"


async def test_a_conversation_written_before_the_boundary_reads_and_goes_on(
    backend: tuple[Any, FunctionModel],
) -> None:
    """Rows as the old service stored them: a lone surrogate, two calls with one id (one result),
    arguments nested 300 deep. GET answers 200 and the next turn sends the model a valid history."""
    service, model = backend
    http = service.alice.http
    first = (await _post(http, "/api/v1/chat", {"message": "hi"})).json()
    conversation_id, run_id = first["conversation_id"], first["run_id"]
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    legacy = [
        {"role": "user", "content": "again"},
        {
            "role": "assistant",
            "content": "bad \ud83d text",
            "tool_calls": [
                {"id": "dup", "name": "create_task", "arguments": json.dumps({"title": "x\ud83d"})},
                {"id": "dup", "name": "create_task", "arguments": {"title": "deep", "description": deep}},
            ],
        },
        {"role": "tool", "call_id": "dup", "tool_name": "create_task", "content": "{}", "is_error": False},
    ]
    now = time.time()
    async with service.state.chat.engine.begin() as conn:
        await conn.execute(
            _db.messages.insert(),
            [
                {
                    "conversation_id": conversation_id,
                    "user_id": service.alice.user_id,
                    "run_id": run_id,
                    "seq": 2 + i,
                    "role": data["role"],
                    "data": json.dumps(data),  # ASCII: the surrogate is stored as an escape, as it was
                    "created_at": now,
                }
                for i, data in enumerate(legacy)
            ],
        )
    r = await http.get(f"/api/v1/conversations/{conversation_id}")
    assert r.status_code == 200, r.text
    shown = r.json()["messages"]
    assert shown[3]["content"] == "bad \ufffd text"
    assert shown[3]["tool_calls"][0]["arguments"] == {"title": "x\ufffd"}
    assert isinstance(shown[3]["tool_calls"][1]["arguments"], str)  # too deep to show as JSON: its text
    r = await _post(http, "/api/v1/chat", {"message": "go on", "conversation_id": conversation_id})
    assert r.status_code == 200, r.text
    sent = model.requests[-1].messages
    assert history_problems(sent) == []
    ids = [c.id for m in sent if m.role == "assistant" for c in m.tool_calls]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids)) == 2
    lost = [m for m in sent if m.role == "tool" and "RESULT_LOST" in m.content]
    assert len(lost) == 1


async def test_streams_end_with_their_terminal_event_when_the_server_fails(
    backend: tuple[Any, FunctionModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = backend

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(service.state.chat, "start_message", broken)
    http = service.alice.http
    agui = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    frames = _frames((await _post(http, "/api/v1/ag-ui", agui)).text)
    assert frames[-1]["type"] == "RUN_ERROR" and frames[-1]["code"] == "INTERNAL_ERROR"
    assert "store went away" not in json.dumps(frames)
    ai = {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    frames = _frames((await _post(http, "/api/v1/ai-sdk", ai)).text)
    assert frames[-1] == "[DONE]" and any(f.get("type") == "error" for f in frames[:-1])
