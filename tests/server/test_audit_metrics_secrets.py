"""Audit, metrics and secrets: one bad audit record never costs another, metric labels come from the
registry only and `/metrics` is not public by default, and a model URL's credentials and host stay on the
server."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from models.fakes import OPENAI_PATH, FakeServer, Reply, openai_chunk, openai_stream
from toolrun.models import FunctionModel, ModelResponse
from toolrun.runtime import AuditRecord
from toolrun.server import create_app
from toolrun.server._audit_sink import SQLAuditSink, bounded
from toolrun.server._db import create_engine
from toolrun.server._observe import Observer
from toolrun.server._settings import public_model_name
from toolrun.server.migrate import upgrade
from toolrun.tools import ToolCall

from .conftest import Service, make_service, sqlite_settings

# -- audit ids -------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=st.characters(codec=None), max_size=300), limit=st.integers(64, 128))
def test_bounded_ids_fit_the_column_and_encode(value: str, limit: int) -> None:
    out = bounded(value, limit)
    assert out is not None and len(out) <= limit and "\x00" not in out
    out.encode("utf-8")  # strict: no lone surrogate is left
    storable = len(value) <= limit and "\x00" not in value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        storable = False
    assert (out == value) == storable


@settings(max_examples=300, deadline=None)
@given(a=st.text(max_size=200), b=st.text(max_size=200))
def test_bounded_ids_stay_distinct(a: str, b: str) -> None:
    if a != b:
        assert bounded(a + "\x00" * 80, 64) != bounded(b + "\x00" * 80, 64)
        assert bounded(a, 64) != bounded(b, 64)


def _record(call_id: str, *, user: str = "u1", outcome: str = "ok") -> AuditRecord:
    return AuditRecord(
        action="execute",
        tool="create_task",
        call_id=call_id,
        trace_id="run_1",
        conversation_id="conv_1",
        principal=user,
        arguments_hash="h" * 32,
        outcome=outcome,
        code=None,
        duration_ms=1.0,
        attempts=1,
        cached=False,
        error_id=None,
        confirmation_id=None,
        timestamp=time.time(),
    )


async def _audit_sink_keeps_every_honest_record(url: str) -> None:
    await upgrade(url)
    engine = create_engine(url)
    drops: list[tuple[str, int]] = []
    sink = SQLAuditSink(engine, flush_interval=3600, on_drop=lambda reason, n: drops.append((reason, n)))
    try:
        hostile = ["x" * 300, "a\x00b", "\ud83d" + "y" * 10, "é" * 129]
        for i in range(3):
            sink.write(_record(f"honest_{i}", user=f"user_{i}"))
        for call_id in hostile:
            sink.write(_record(call_id, user="mallory"))
        await sink.flush()
        async with engine.connect() as conn:
            rows = (await conn.execute(sa.text("SELECT call_id, user_id FROM toolrun_audit"))).all()
        assert sorted(r[0] for r in rows if r[1] != "mallory") == ["honest_0", "honest_1", "honest_2"]
        stored = [r[0] for r in rows if r[1] == "mallory"]
        assert len(stored) == len(hostile) and len(set(stored)) == len(hostile)
        assert all(len(c) <= 128 and "\x00" not in c for c in stored)
        assert drops == []

        # A record the database refuses (here an outcome longer than its column) costs only itself.
        sink.write(_record("before", user="u9"))
        sink.write(_record("refused", user="u9", outcome="o" * 40))
        sink.write(_record("after", user="u9"))
        await sink.flush()
        async with engine.connect() as conn:
            kept = (
                await conn.execute(sa.text("SELECT call_id FROM toolrun_audit WHERE user_id = 'u9'"))
            ).all()
        if url.startswith("postgresql"):
            assert sorted(r[0] for r in kept) == ["after", "before"]
            assert drops == [("invalid", 1)] and sink.dropped["invalid"] == 1
        else:  # SQLite does not enforce lengths: everything is kept
            assert len(kept) == 3
    finally:
        await sink.aclose()
        await engine.dispose()


async def test_one_bad_audit_record_never_costs_another_on_sqlite(tmp_path: Path) -> None:
    await _audit_sink_keeps_every_honest_record(f"sqlite+aiosqlite:///{tmp_path}/a.db")


@pytest.mark.slow
async def test_one_bad_audit_record_never_costs_another_on_postgres(postgres_url: str) -> None:
    await _audit_sink_keeps_every_honest_record(postgres_url)


async def test_records_wait_while_the_database_is_unreachable(tmp_path: Path) -> None:
    engine = create_engine("postgresql+asyncpg://nobody@127.0.0.1:1/none")
    sink = SQLAuditSink(engine, flush_interval=3600, max_queue=3)
    try:
        for i in range(2):
            sink.write(_record(f"c{i}"))
        await sink.flush()  # refused to connect: kept for the next flush
        assert len(sink._queue) == 2 and sum(sink.dropped.values()) == 0
        sink.write(_record("c2"))
        sink.write(_record("c3"))
        assert sink.dropped["queue_full"] == 1
    finally:
        await sink.aclose()  # the last flush fails too: what waited is counted as dropped
        await engine.dispose()
    assert sink.dropped["database"] == 3


# -- metrics ---------------------------------------------------------------------------------------------


def _invented_calls(messages: Any, tools: Any) -> ModelResponse:
    if any(getattr(m, "role", "") == "tool" for m in messages):
        return ModelResponse(text="done")
    calls = [ToolCall(id=f"c{i}", name=f"Buy milk {i}!", arguments="{}") for i in range(5)]
    calls.append(ToolCall(id="c9", name="query_tasks", arguments="{}"))
    return ModelResponse(tool_calls=calls)


@pytest.fixture
async def invented(tmp_path: Path) -> AsyncIterator[Service]:
    settings = sqlite_settings(tmp_path, metrics_token="m" * 24)
    async for s in make_service(settings, model=FunctionModel(_invented_calls, name="inventor")):
        yield s


async def test_metric_labels_come_from_the_registry_and_metrics_need_the_token(invented: Service) -> None:
    http = invented.alice.http
    await invented.alice.chat("go")
    assert (await http.get("/metrics")).status_code == 401  # a user's token is not the metrics token
    anonymous = httpx.AsyncClient(transport=httpx.ASGITransport(app=invented.app), base_url="http://t")
    async with anonymous:
        assert (await anonymous.get("/metrics")).status_code == 401
        wrong = await anonymous.get("/metrics", headers={"Authorization": "Bearer " + "n" * 24})
        assert wrong.status_code == 401
        r = await anonymous.get("/metrics", headers={"Authorization": "Bearer " + "m" * 24})
    assert r.status_code == 200
    text = r.text
    assert "Buy milk" not in text
    assert 'toolrun_tool_calls_total{outcome="error",tool="unregistered"} 5.0' in text
    assert 'toolrun_tool_calls_total{outcome="ok",tool="query_tasks"} 1.0' in text


async def test_tool_call_log_lines_name_tools_by_their_metric_label(
    invented: Service, caplog: pytest.LogCaptureFixture
) -> None:
    """A name the model made up is no log field, as it is no metric label."""
    with caplog.at_level(logging.INFO, logger="toolrun.server"):
        await invented.alice.chat("go")
    lines = [r for r in caplog.records if getattr(r, "event", None) == "tool_call"]
    assert sorted(vars(r)["tool"] for r in lines) == ["query_tasks"] + ["unregistered"] * 5
    assert all("milk" not in json.dumps(vars(r), default=str).lower() for r in lines)


async def test_metrics_are_closed_unless_a_token_or_public_is_set(tmp_path: Path) -> None:
    async for s in make_service(sqlite_settings(tmp_path)):
        r = await s.alice.http.get("/metrics")
        assert r.status_code == 403 and r.json()["code"] == "metrics_not_public"
    (tmp_path / "p").mkdir()
    async for s in make_service(sqlite_settings(tmp_path / "p", metrics_public=True)):
        assert (await s.alice.http.get("/metrics")).status_code == 200


def test_an_observer_without_a_registry_labels_every_tool_unregistered() -> None:
    obs = Observer()
    assert obs.tool_label("create_task") == "unregistered"
    obs.tools = {"create_task"}
    assert obs.tool_label("create_task") == "create_task" and obs.tool_label("x") == "unregistered"


# -- the model's URL --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ("demo", "demo"),
        ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
        ("ollama:llama3.1:8b", "ollama:llama3.1:8b"),
        ("openai-compatible:http://KEY@gateway/v1:llama3.1", "openai-compatible:llama3.1"),
        ("openai-compatible:https://u:p@gw.internal:8443/v1:llama3.1:8b", "openai-compatible:llama3.1:8b"),
        ("openai-compatible:http://[fd00::1]:80/v1:m", "openai-compatible:m"),
        ("openai-compatible:http://KEY@gateway", "openai-compatible"),
    ],
)
def test_public_model_name_keeps_provider_and_model_only(spec: str, shown: str) -> None:
    assert public_model_name(spec) == shown


async def test_a_model_url_with_credentials_is_never_shown(tmp_path: Path) -> None:
    fake = FakeServer().start()
    try:
        secret = "sk-SECRETKEY123"
        spec = f"openai-compatible:http://{secret}@127.0.0.1:{fake.port}/v1:llama3.1"
        settings = sqlite_settings(tmp_path, model=spec)
        chunk = openai_chunk({"role": "assistant", "content": "hello"}, finish_reason="stop")
        fake.reply(OPENAI_PATH, Reply(frames=openai_stream([chunk])), Reply(frames=openai_stream([chunk])))
        await upgrade(settings.database_url)
        app = create_app(settings)
        _, token = await app.state.toolrun.users.add("alice")
        seen: list[str] = []
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as anon:
                seen.append((await anon.get("/")).text)
            auth = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=auth) as http:
                me = (await http.get("/api/v1/me")).json()
                assert me["model"]["name"] == "openai-compatible:llama3.1"
                seen.append(json.dumps(me))
                reply = await http.post("/api/v1/chat", json={"message": "hi"})
                assert reply.status_code == 200, reply.text
                assert reply.json()["model"]["name"] == "openai-compatible:llama3.1"
                seen.append(reply.text)
                async with http.stream("POST", "/api/v1/chat/stream", json={"message": "hi"}) as s:
                    seen.append((await s.aread()).decode())
        for text in seen:
            assert secret not in text and "127.0.0.1" not in text
        assert "run_started" in seen[-1] and "openai-compatible:llama3.1" in seen[-1]
    finally:
        fake.stop()
