"""Every crash window of a run is a test: a real server process (uvicorn on 127.0.0.1) is SIGKILLed at a
chosen point (paced by files the model and tools wait on, never by sleeps), restarted on the same
database, and the records must say what really happened, with the conversation free within seconds.

And `DELETE /conversations/{id}` racing an approval on PostgreSQL: after a 204 nothing of the
conversation runs or is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

from .conftest import POSTGRES_ADMIN_URL, Client, _admin, make_service, sqlite_settings

pytestmark = pytest.mark.slow

LEASE = 1.5
_APPROVED = "SELECT 1 FROM toolrun_audit WHERE confirmation_id = :c AND action = 'approve'"
_SCRIPT = Path(__file__).with_name("_crash_server.py")


class CrashServer:
    """`_crash_server.py` in a subprocess; `url` once it listens."""

    def __init__(self, directory: Path, database_url: str, port: int = 0, *, lease: float = LEASE) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(_SCRIPT), str(directory), database_url, str(lease), str(port)],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            raise AssertionError("the crash server did not start")
        self.url = f"http://127.0.0.1:{json.loads(line)['port']}"

    def kill(self) -> float:
        """SIGKILL (no shutdown handler runs); returns when it happened."""
        os.kill(self.proc.pid, signal.SIGKILL)
        killed = time.time()
        self.proc.wait(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return killed


async def _until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


async def _rows(url: str, query: str, **params: Any) -> list[Any]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(sa.text(query), params)).all())
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def _client(url: str, token: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=20) as c:
        yield c


async def _setup(tmp_path: Path, db: str | None = None) -> tuple[str, str]:
    db = db or f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(db)
    engine = create_engine(db)
    try:
        _, token = await UserStore(engine).add("alice")
    finally:
        await engine.dispose()
    return db, token


async def _post_when_free(url: str, token: str, conversation_id: str, message: str) -> dict[str, Any]:
    """Send `message`, retrying while the dead process's lease holds the conversation (409)."""
    async with _client(url, token) as http:

        async def attempt() -> dict[str, Any] | None:
            r = await http.post("/api/v1/chat", json={"message": message, "conversation_id": conversation_id})
            if r.status_code == 409 and r.json()["code"] == "conversation_busy":
                return None
            assert r.status_code == 200, r.text
            return r.json()  # type: ignore[no-any-return]

        return await _until(attempt, "the conversation to be free", timeout=LEASE + 30)  # type: ignore[no-any-return]


@pytest.mark.timeout(150)
async def test_sigkill_while_a_run_works_frees_the_conversation_in_seconds_and_keeps_the_partial_answer(
    tmp_path: Path,
) -> None:
    db, token = await _setup(tmp_path)
    first = CrashServer(tmp_path, db)
    try:
        async with _client(first.url, token) as http:
            conv = (await http.post("/api/v1/chat", json={"message": "hello"})).json()["conversation_id"]
            stream = asyncio.create_task(
                http.post("/api/v1/chat", json={"message": "slow please", "conversation_id": conv})
            )
            await _until(lambda: (tmp_path / "slow_started").exists(), "the slow tool to start")
            # its heartbeat saves the answer so far (every LEASE / 3 seconds)
            await _until(
                lambda: _rows(db, "SELECT partial FROM toolrun_runs WHERE partial IS NOT NULL"),
                "the partial answer to be saved",
            )
            killed = first.kill()
            with pytest.raises(httpx.HTTPError):
                await stream
    finally:
        if first.proc.poll() is None:
            first.kill()
    (lease_until,) = (await _rows(db, "SELECT lease_until FROM toolrun_conversations"))[0]
    assert lease_until <= killed + LEASE  # not run_timeout + 30: free within one lease of the crash

    second = CrashServer(tmp_path, db)
    try:
        async with _client(second.url, token) as http:  # before anything claims it again: shown as it is
            seen = await _until(lambda: _dead_run_shown(http, conv), "the run shown interrupted", LEASE + 10)
        assert [(m["role"], m["content"]) for m in seen["messages"] if m["interrupted"]] == [
            ("assistant", "Working on it.")
        ]
        after = await _post_when_free(second.url, token, conv, "are you there?")
        assert after["status"] == "completed"
        async with _client(second.url, token) as http:
            detail = (await http.get(f"/api/v1/conversations/{conv}")).json()
    finally:
        second.kill()
    cut = [m for m in detail["messages"] if m["interrupted"]]
    assert [(m["role"], m["content"]) for m in cut] == [("assistant", "Working on it.")]
    roles = [m["role"] for m in detail["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    statuses = [r[0] for r in await _rows(db, "SELECT status FROM toolrun_runs ORDER BY created_at")]
    assert statuses == ["completed", "interrupted", "completed"]


@pytest.fixture(params=["sqlite", "postgresql"])
async def fresh_db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A new, empty database: a SQLite file, or a PostgreSQL database of its own (dropped at the end)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
        return
    name = f"test_{uuid.uuid4().hex[:16]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.timeout(150)
async def test_after_a_sigkill_a_restart_on_this_host_takes_the_conversation_at_once(
    tmp_path: Path, fresh_db: str
) -> None:
    """A lease far longer than the test (600 s): the restarted process sees that the process holding the
    conversation is gone (`lease_holder`), shows its run interrupted and takes the next message at once."""
    db, token = await _setup(tmp_path, fresh_db)
    first = CrashServer(tmp_path, db, lease=600)
    try:
        async with _client(first.url, token) as http:
            stream = asyncio.create_task(http.post("/api/v1/chat", json={"message": "slow please"}))
            await _until(lambda: (tmp_path / "slow_started").exists(), "the slow tool to start")
            (conv,) = (await _rows(db, "SELECT id FROM toolrun_conversations"))[0]
            first.kill()
            with pytest.raises(httpx.HTTPError):
                await stream
    finally:
        if first.proc.poll() is None:
            first.kill()
    (lease_until,) = (await _rows(db, "SELECT lease_until FROM toolrun_conversations"))[0]
    assert lease_until > time.time() + 500  # the dead process's lease has not lapsed

    second = CrashServer(tmp_path, db, lease=600)
    try:
        async with _client(second.url, token) as http:
            seen = (await http.get(f"/api/v1/conversations/{conv}")).json()
            r = await http.post("/api/v1/chat", json={"message": "are you there?", "conversation_id": conv})
            assert r.status_code == 200, r.text  # not 409 conversation_busy for 600 s
    finally:
        second.kill()
    assert seen["last_run"]["status"] == "interrupted"
    assert r.json()["status"] == "completed"
    statuses = [r[0] for r in await _rows(db, "SELECT status FROM toolrun_runs ORDER BY created_at")]
    assert statuses == ["interrupted", "completed"]


async def test_a_live_process_keeps_its_lease_from_a_restart_elsewhere(tmp_path: Path) -> None:
    """The other side: a process that runs (here this test's own process, as another holder on this host)
    keeps its conversation; only its death frees it before the lease lapses."""
    from toolrun.server import _holder

    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = _holder._start_ticks(alive.pid)
        mine = _holder.this_process()
        assert mine is not None and ticks is not None
        holder = f"{mine.rsplit('|', 2)[0]}|{alive.pid}|{ticks}"
        assert not _holder.holder_gone(holder)
        assert not _holder.holder_gone(f"elsewhere|1|{alive.pid}|{ticks}")  # another host: never judged
    finally:
        alive.kill()
        alive.wait()
    assert _holder.holder_gone(holder)


async def _dead_run_shown(http: httpx.AsyncClient, conv: str) -> dict[str, Any] | None:
    detail: dict[str, Any] = (await http.get(f"/api/v1/conversations/{conv}")).json()
    return detail if detail["last_run"]["status"] == "interrupted" else None


async def _approve_then_kill(tmp_path: Path, db: str, token: str, marker: str) -> tuple[str, str]:
    (tmp_path / "note_n1").write_text("keep me?")
    (tmp_path / marker).touch()
    server = CrashServer(tmp_path, db)
    try:
        async with _client(server.url, token) as http:
            paused = (await http.post("/api/v1/chat", json={"message": "wipe n1"})).json()
            assert paused["status"] == "awaiting_confirmation"
            conv, confirmation = paused["conversation_id"], paused["pending"][0]["confirmation_id"]
            approving = asyncio.create_task(
                http.post(f"/api/v1/confirmations/{confirmation}", json={"approve": True})
            )
            if marker == "hang_in_tool":
                await _until(lambda: (tmp_path / "wipe_ran").exists(), "the approved call to run")
            else:
                await _until(lambda: (tmp_path / "model_waiting").exists(), "the model's next request")
                await _until(  # the audit trail is written in batches: wait until it holds the call
                    lambda: _rows(db, _APPROVED, c=confirmation),
                    "the audit record of the approved call (the hold's record has the id too)",
                )
            server.kill()
            with pytest.raises(httpx.HTTPError):
                await approving
    finally:
        if server.proc.poll() is None:
            server.kill()
    assert not (tmp_path / "note_n1").exists()  # the action did happen
    (consumed,) = (
        await _rows(db, "SELECT consumed_at FROM toolrun_confirmations WHERE id = :c", c=confirmation)
    )[0]
    assert consumed is not None  # recorded as consumed before the call ran
    return conv, confirmation


async def _result_after_restart(tmp_path: Path, db: str, token: str, conv: str) -> dict[str, Any]:
    server = CrashServer(tmp_path, db)
    try:
        after = await _post_when_free(server.url, token, conv, "what happened?")
    finally:
        server.kill()
    assert after["status"] == "completed"
    results = [m for m in after["messages"] if m["role"] == "tool" and m["call_id"] == "w1"]
    assert len(results) == 1  # exactly one result for the held call: the history stays valid
    assert "did not run" not in results[0]["content"]
    statuses = [r[0] for r in await _rows(db, "SELECT status FROM toolrun_runs ORDER BY created_at")]
    assert statuses == ["interrupted", "completed"]
    return results[0]  # type: ignore[no-any-return]


@pytest.mark.timeout(150)
async def test_sigkill_during_an_approved_call_never_says_it_did_not_run(tmp_path: Path) -> None:
    db, token = await _setup(tmp_path)
    conv, _ = await _approve_then_kill(tmp_path, db, token, "hang_in_tool")
    result = await _result_after_restart(tmp_path, db, token, conv)
    assert result["is_error"] and result["content"].startswith("Error RESULT_UNKNOWN:")
    assert "may or may not have taken effect" in result["content"]


@pytest.mark.timeout(150)
async def test_sigkill_after_an_approved_call_ran_says_what_the_audit_knows(tmp_path: Path) -> None:
    db, token = await _setup(tmp_path)
    conv, _ = await _approve_then_kill(tmp_path, db, token, "hang_in_model")
    result = await _result_after_restart(tmp_path, db, token, conv)
    assert not result["is_error"]
    assert "ran to the end" in result["content"] and "result is not available" in result["content"]


# -- DELETE racing an approval ----------------------------------------------------------------------------


async def _delete_races_approval(settings: Any, trials: int) -> None:
    async for service in make_service(settings):
        a = service.alice
        url = settings.database_url
        outcomes = set()
        for trial in range(trials):
            created = await a.chat(f"add Race {trial}")
            task_id = json.loads(created["messages"][-2]["content"])["id"]
            paused = await a.chat(f"delete {task_id}", created["conversation_id"])
            conv, confirmation = paused["conversation_id"], paused["pending"][0]["confirmation_id"]
            delete_first = trial % 2 == 0

            async def approve(client: Client = a, confirmation: str = confirmation) -> httpx.Response:
                return await client.decide(confirmation, True)

            async def delete(client: Client = a, conv: str = conv) -> tuple[httpx.Response, float]:
                r = await client.http.delete(f"/api/v1/conversations/{conv}")
                return r, time.time()

            if delete_first:
                (deleted, deleted_at), approved = await asyncio.gather(delete(), approve())
            else:
                approved, (deleted, deleted_at) = await asyncio.gather(approve(), delete())
            if service.state.chat._tasks:  # the approved run, if it started, to its end
                await asyncio.wait(list(service.state.chat._tasks))
            outcomes.add((deleted.status_code, approved.status_code))
            assert deleted.status_code in (204, 409), deleted.text
            if deleted.status_code != 204:
                continue
            left = await _rows(
                url,
                "SELECT (SELECT count(*) FROM toolrun_messages WHERE conversation_id = :c) + "
                "(SELECT count(*) FROM toolrun_runs WHERE conversation_id = :c)",
                c=conv,
            )
            assert left[0][0] == 0, f"trial {trial}: rows written into the deleted conversation"
            await service.state.audit.flush()
            ran = await _rows(
                url,
                "SELECT timestamp FROM toolrun_audit WHERE confirmation_id = :c AND action = 'approve' "
                "AND outcome = 'ok'",
                c=confirmation,
            )
            # the approved delete either finished before the 204 (its run had ended) or never ran
            assert all(t <= deleted_at for (t,) in ran), f"trial {trial}: the approved call ran after the 204"
            if approved.status_code != 200:
                tasks = (await a.http.get("/api/v1/tasks")).json()["tasks"]
                assert task_id in [t["id"] for t in tasks]
        assert (204, 404) in outcomes or (409, 200) in outcomes


@pytest.mark.timeout(120)
async def test_delete_racing_an_approval_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, database_url=postgres_url, secret_key="k" * 32)
    await _delete_races_approval(settings, trials=20)


@pytest.mark.timeout(60)
async def test_delete_racing_an_approval_on_sqlite(tmp_path: Path) -> None:
    await _delete_races_approval(sqlite_settings(tmp_path), trials=10)
