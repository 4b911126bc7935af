"""`toolrun serve` processes: SIGKILL while a run awaits confirmation, two processes on PostgreSQL + Redis,
and what the server's logs may hold (a canary)."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

from ._procs import ServeProcess
from .conftest import REDIS_URL, delete_redis_prefix, redis_prefix

pytestmark = pytest.mark.slow


async def _user(url: str, name: str) -> str:
    engine = create_engine(url)
    try:
        _, token = await UserStore(engine).add(name)
    finally:
        await engine.dispose()
    return token


async def _scalar(url: str, query: str) -> Any:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return (await conn.execute(sa.text(query))).scalar()
    finally:
        await engine.dispose()


def _client(url: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=20)


def _task_id(body: dict[str, Any]) -> str:
    for m in reversed(body["messages"]):
        if m["role"] == "tool":
            return str(json.loads(m["content"])["id"])
    raise AssertionError("no tool result")


async def test_sigkill_while_awaiting_confirmation_then_restart_and_approve(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    env = {"TOOLRUN_DATABASE_URL": db, "TOOLRUN_DATA_DIR": str(tmp_path / "data")}
    await upgrade(db)
    token = await _user(db, "alice")
    first = ServeProcess(env)
    try:
        url = await first.wait_ready()
        async with _client(url, token) as http:
            created = (await http.post("/api/v1/chat", json={"message": "add Doomed task"})).json()
            task_id = _task_id(created)
            paused = (
                await http.post(
                    "/api/v1/chat",
                    json={"message": f"delete {task_id}", "conversation_id": created["conversation_id"]},
                )
            ).json()
            assert paused["status"] == "awaiting_confirmation"
            confirmation_id = paused["pending"][0]["confirmation_id"]
    finally:
        first.kill()
    assert first.proc.returncode == -9

    second = ServeProcess(env)
    try:
        url = await second.wait_ready()
        async with _client(url, token) as http:
            listed = (await http.get("/api/v1/confirmations")).json()["pending"]
            assert [p["confirmation_id"] for p in listed] == [confirmation_id]
            done = await http.post(f"/api/v1/confirmations/{confirmation_id}", json={"approve": True})
            assert done.status_code == 200, done.text
            assert done.json()["status"] == "completed"
            assert done.json()["output"] == f"Deleted task {task_id} (Doomed task)."
            assert (await http.get("/api/v1/tasks")).json()["total"] == 0
    finally:
        second.stop()


async def test_two_processes_on_postgres_and_redis_run_an_approved_call_once(postgres_url: str) -> None:
    await upgrade(postgres_url)
    prefix = redis_prefix()
    env = {
        "TOOLRUN_DATABASE_URL": postgres_url,
        "TOOLRUN_REDIS_URL": REDIS_URL,
        "TOOLRUN_REDIS_PREFIX": prefix,
        "TOOLRUN_SECRET_KEY": secrets.token_urlsafe(32),
    }
    token = await _user(postgres_url, f"alice_{secrets.token_hex(3)}")
    a, b = ServeProcess(env), ServeProcess(env)
    try:
        url_a, url_b = await a.wait_ready(), await b.wait_ready()
        async with _client(url_a, token) as on_a, _client(url_b, token) as on_b:
            created = (await on_a.post("/api/v1/chat", json={"message": "add Shared task"})).json()
            task_id = _task_id(created)
            paused = (
                await on_a.post(
                    "/api/v1/chat",
                    json={"message": f"delete {task_id}", "conversation_id": created["conversation_id"]},
                )
            ).json()
            confirmation_id = paused["pending"][0]["confirmation_id"]
            # B sees A's pending confirmation, and approvals race on both processes
            assert [
                p["confirmation_id"] for p in (await on_b.get("/api/v1/confirmations")).json()["pending"]
            ] == [confirmation_id]
            answers = await asyncio.gather(
                *(
                    client.post(f"/api/v1/confirmations/{confirmation_id}", json={"approve": True})
                    for client in (on_b, on_a, on_b, on_a)
                )
            )
            codes = sorted(r.status_code for r in answers)
            assert codes.count(200) == 1, [r.text for r in answers]
            assert set(codes) <= {200, 404, 409}
            winner = next(r for r in answers if r.status_code == 200).json()
            assert winner["status"] == "completed"
            assert (await on_a.get("/api/v1/tasks")).json()["total"] == 0
            # the conversation continues on either process
            more = await on_b.post(
                "/api/v1/chat", json={"message": "list", "conversation_id": created["conversation_id"]}
            )
            assert more.status_code == 200 and more.json()["output"] == "No tasks match."
        for _ in range(100):  # audit records are written in batches
            ran = await _scalar(
                postgres_url,
                "SELECT count(*) FROM toolrun_audit WHERE tool = 'delete_task' AND action = 'approve' "
                "AND outcome = 'ok'",
            )
            if ran:
                break
            await asyncio.sleep(0.05)
        assert ran == 1
    finally:
        a.stop()
        b.stop()
        await delete_redis_prefix(prefix)


async def test_server_logs_are_json_with_ids_and_no_content(tmp_path: Path) -> None:
    canary = "CANARY" + secrets.token_hex(6)
    db = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    env = {
        "TOOLRUN_DATABASE_URL": db,
        "TOOLRUN_DATA_DIR": str(tmp_path / "data"),
        "TOOLRUN_LOG_LEVEL": "DEBUG",
    }
    await upgrade(db)
    token = await _user(db, "alice")
    proc = ServeProcess(env)
    try:
        url = await proc.wait_ready()
        async with _client(url, token) as http:
            created = (
                await http.post("/api/v1/chat", json={"message": f"add {canary} task #{canary}"})
            ).json()
            conv = created["conversation_id"]
            await http.post("/api/v1/chat", json={"message": f"search {canary}", "conversation_id": conv})
            await http.post(
                "/api/v1/chat", json={"message": f"what about {canary}?", "conversation_id": conv}
            )
            await http.post("/api/v1/chat", json={"message": f"delete {canary}", "conversation_id": conv})
            async with http.stream("POST", "/api/v1/chat/stream", json={"message": f"add {canary}"}) as s:
                await s.aread()
            await http.post("/api/v1/chat", json={"message": canary * 100, "nope": canary})
    finally:
        proc.stop()
    leaks = [line for line in proc.lines if canary in line]
    assert leaks == []
    records = proc.records()
    # Every log line is JSON; the indented banner `toolrun serve` prints for the person (model, URL) is not
    # a log line.
    logs = [ln for ln in proc.lines if ln.strip() and not ln.startswith("  ")]
    assert len(records) >= 6 and len(records) == len(logs)
    requests = [r for r in records if r.get("event") == "request"]
    runs = [r for r in records if r.get("event") == "run"]
    calls = [r for r in records if r.get("event") == "tool_call"]
    assert len(requests) == 6 and all(r["request_id"].startswith("req_") for r in requests)
    assert {r["status"] for r in requests} == {200, 422}
    assert all(r["user_id"] for r in requests)
    assert len(runs) == 5 and all(r["run_id"] and r["conversation_id"] and r["user_id"] for r in runs)
    assert {c["tool"] for c in calls} == {"create_task", "query_tasks", "delete_task"}
    assert all(c["call_id"] and c["run_id"] and c["conversation_id"] for c in calls)
