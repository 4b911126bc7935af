"""Fixtures for the service: a migrated SQLite database per test, the app over ASGI, users with tokens,
a fresh PostgreSQL database per module (CREATE DATABASE test_<uuid>, dropped after)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from servers import POSTGRES_URL as POSTGRES_ADMIN_URL
from servers import REDIS_URL
from toolrun.server import Settings, create_app
from toolrun.server.migrate import upgrade


def sqlite_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite+aiosqlite:///{tmp_path}/toolrun.db",
        "data_dir": tmp_path / "data",
        "token_cache_seconds": 0,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@dataclass
class Client:
    """An httpx client signed in as one user."""

    http: httpx.AsyncClient
    user_id: str
    token: str

    async def chat(self, message: str, conversation_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"message": message}
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        r = await self.http.post("/api/v1/chat", json=body)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    async def decide(self, confirmation_id: str, approve: bool) -> httpx.Response:
        return await self.http.post(f"/api/v1/confirmations/{confirmation_id}", json={"approve": approve})


@dataclass
class Service:
    app: Any
    settings: Settings
    alice: Client
    bob: Client

    @property
    def state(self) -> Any:
        return self.app.state.toolrun


def tool_result(response: dict[str, Any], tool: str) -> Any:
    """The value of the last result of `tool` in the response's messages."""
    for m in reversed(response["messages"]):
        if m["role"] == "tool" and m["tool_name"] == tool:
            return json.loads(m["content"])
    raise AssertionError(f"no result of {tool}")


async def make_service(settings: Settings, **app_options: Any) -> AsyncIterator[Service]:
    await upgrade(settings.database_url)
    app = create_app(settings, **app_options)
    state = app.state.toolrun
    alice, alice_token = await state.users.add("alice")
    bob, bob_token = await state.users.add("bob")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient(
                transport=transport,
                base_url="http://test",
                headers={"Authorization": f"Bearer {alice_token}"},
            ) as a,
            httpx.AsyncClient(
                transport=transport, base_url="http://test", headers={"Authorization": f"Bearer {bob_token}"}
            ) as b,
        ):
            yield Service(
                app=app,
                settings=settings,
                alice=Client(a, alice.user_id, alice_token),
                bob=Client(b, bob.user_id, bob_token),
            )


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async for s in make_service(sqlite_settings(tmp_path)):
        yield s


# -- PostgreSQL: one fresh database per test module ---------------------------------------------------------


async def _admin(statement: str) -> None:
    engine = create_async_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A new, empty PostgreSQL database for this module (dropped at the end)."""
    name = f"test_{uuid.uuid4().hex[:16]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except OSError as exc:  # pragma: no cover - the server is part of the test environment
        pytest.fail(f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable ({exc}); start it (see .ci/run).")
    url = sa.make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    yield url
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def redis_prefix() -> str:
    return f"toolrun_test_{uuid.uuid4().hex[:12]}:"


async def delete_redis_prefix(prefix: str) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(REDIS_URL)
    try:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
