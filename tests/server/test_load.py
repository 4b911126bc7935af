"""The service under load: the SQLite connection is free again as soon as a block of statements ends, runs
past `max_runs` are shed with `503` + `Retry-After` on every chat route, and nothing is lost meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from toolrun.models import Message
from toolrun.models.function import FunctionModel
from toolrun.server._db import create_engine
from toolrun.tools import Tool

from .conftest import make_service, sqlite_settings


async def test_sqlite_connection_goes_back_to_the_pool_without_yielding_to_the_loop(tmp_path: Path) -> None:
    # SQLAlchemy's own AsyncConnection closes in a task of its own and waits for it: the connection stays
    # checked out until the loop has run everything queued before that task (the callback below), and on
    # a busy loop every other transaction of the process waits that long for the one connection.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/t.db")
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
            loop.call_soon(ran.append, "connect")
        assert ran == [] and engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        async with engine.begin() as conn:
            await conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
            loop.call_soon(ran.append, "begin")
        assert ran == [] and engine.pool.checkedout() == 0  # type: ignore[attr-defined]

        async def failing_block() -> None:
            async with engine.begin() as conn:
                await conn.execute(sa.text("INSERT INTO t VALUES (1)"))
                raise ZeroDivisionError

        with pytest.raises(ZeroDivisionError):
            await failing_block()
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        async with engine.connect() as conn:  # the failed block was rolled back
            assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar() == 0
    finally:
        await engine.dispose()


async def test_one_connection_serves_many_concurrent_transactions_on_a_busy_loop(tmp_path: Path) -> None:
    # 200 tasks x 5 write transactions through the one pooled connection, with the loop kept busy: none
    # waits for the pool (a 0.5 s pool timeout would fail them), and every row is there.
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path}/t.db", pool_timeout=0.5)
    stop = asyncio.Event()

    async def busy() -> None:
        while not stop.is_set():
            await asyncio.sleep(0)

    async def writer(i: int) -> None:
        for j in range(5):
            async with engine.begin() as conn:
                await conn.execute(sa.text("INSERT INTO t VALUES (:x)"), {"x": i * 10 + j})
            await asyncio.sleep(0)

    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
        spinners = [asyncio.create_task(busy()) for _ in range(50)]
        await asyncio.gather(*(writer(i) for i in range(200)))
        stop.set()
        await asyncio.gather(*spinners)
        async with engine.connect() as conn:
            assert (await conn.execute(sa.text("SELECT count(*) FROM t"))).scalar() == 1000
    finally:
        await engine.dispose()


class Gate:
    """A model that answers once `open` is set, counting the requests that wait."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.waiting = 0

    async def __call__(self, messages: list[Message], tools: list[Tool]) -> str:
        self.waiting += 1
        await self.open.wait()
        return "done"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/chat", {"message": "two"}),
        ("/api/v1/chat/stream", {"message": "two"}),
        (
            "/api/v1/ag-ui",
            {"threadId": "t2", "runId": "r2", "messages": [{"id": "m", "role": "user", "content": "two"}]},
        ),
        (
            "/api/v1/ai-sdk",
            {
                "id": "c2",
                "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": "two"}]}],
            },
        ),
    ],
)
async def test_runs_past_max_runs_are_shed_with_503_and_retry_after(
    tmp_path: Path, path: str, body: dict[str, Any]
) -> None:
    gate = Gate()
    settings = sqlite_settings(tmp_path, max_runs=1)
    async for service in make_service(settings, model=FunctionModel(gate, name="gate")):
        admission = service.state.chat.admission
        first = asyncio.create_task(service.alice.http.post("/api/v1/chat", json={"message": "one"}))
        while gate.waiting < 1:  # the first run is admitted and waits on the model
            await asyncio.sleep(0.01)
        assert admission.in_flight == 1
        shed = await service.bob.http.post(path, json=body)
        assert shed.status_code == 503, shed.text
        assert shed.headers["retry-after"] == "1"
        assert shed.headers["content-type"].startswith("application/problem+json")
        assert shed.json()["code"] == "overloaded"
        gate.open.set()
        done = await first
        assert done.status_code == 200 and done.json()["output"] == "done"
        while admission.in_flight:  # the run's task ends right after its answer
            await asyncio.sleep(0.01)
        again = await service.bob.http.post("/api/v1/chat", json={"message": "three"})
        assert again.status_code == 200, again.text
        while admission.in_flight:
            await asyncio.sleep(0.01)
        assert admission.refused == 1
        # the shed request left nothing behind: bob has exactly the one conversation that ran
        listed = await service.bob.http.get("/api/v1/conversations")
        assert [c["title"] for c in listed.json()["conversations"]] == ["Three"]


async def test_a_refused_start_does_not_leak_a_slot(tmp_path: Path) -> None:
    # A start that fails (404: unknown conversation) gives its slot back; max_runs=1 still admits the next.
    settings = sqlite_settings(tmp_path, max_runs=1)
    async for service in make_service(settings, model=FunctionModel(lambda m, t: "ok", name="ok")):
        for _ in range(3):
            r = await service.alice.http.post(
                "/api/v1/chat", json={"message": "x", "conversation_id": "conv_no"}
            )
            assert r.status_code == 404
        assert service.state.chat.admission.in_flight == 0
        ok = await service.alice.http.post("/api/v1/chat", json={"message": "x"})
        assert ok.status_code == 200


async def test_many_concurrent_chats_on_the_default_settings_all_succeed_and_persist(tmp_path: Path) -> None:
    # 60 concurrent chats, each one tool call (create_task) and an answer, over one ASGI app on SQLite:
    # no error, and every task, run, message and audit record is stored.
    from toolrun.tools import ToolCall

    def script(messages: list[Message], tools: list[Tool]) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return "created"
        return ToolCall(name="create_task", arguments={"title": str(last.content)})

    async for service in make_service(sqlite_settings(tmp_path), model=FunctionModel(script, name="s")):
        results = await asyncio.gather(
            *(service.alice.http.post("/api/v1/chat", json={"message": f"task {i}"}) for i in range(60))
        )
        assert [r.status_code for r in results] == [200] * 60
        state = service.state
        await state.audit.flush()
        async with state.engine.connect() as conn:
            counts = {
                t: (await conn.execute(sa.text(f"SELECT count(*) FROM {t}"))).scalar()
                for t in ("toolrun_tasks", "toolrun_runs", "toolrun_messages", "toolrun_audit")
            }
        assert counts == {
            "toolrun_tasks": 60,
            "toolrun_runs": 60,
            "toolrun_messages": 240,
            "toolrun_audit": 60,
        }


async def test_a_database_pool_timeout_is_a_503_not_a_500(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    async def exhausted(token: str) -> None:
        raise PoolTimeout(
            "QueuePool limit of size 10 overflow 20 reached, connection timed out, timeout 30.00"
        )

    monkeypatch.setattr(service.state.users, "authenticate", exhausted)
    r = await service.alice.http.get("/api/v1/me")
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert r.json()["code"] == "overloaded"
