"""Checkpointers for the LangGraph tests: in memory, SQLite (a file in tmp_path), PostgreSQL (real server).

The PostgreSQL saver gets a database of its own (`CREATE DATABASE test_<uuid>`), dropped after the test,
because other test runs share the server. An unreachable server fails the test; nothing is skipped.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

POSTGRES_DSN = os.environ.get(
    "TOOLRUN_TEST_LANGGRAPH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


async def _admin(sql: str) -> None:
    try:
        async with asyncio.timeout(10):
            conn = await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True)
            async with conn:
                await conn.execute(sql)  # type: ignore[arg-type]
    except (OSError, psycopg.OperationalError) as exc:
        pytest.fail(
            f"PostgreSQL {POSTGRES_DSN} unreachable ({type(exc).__name__}: {exc}); .ci/run starts it.",
            pytrace=False,
        )


async def _postgres_saver() -> AsyncIterator[Any]:
    name = f"test_{uuid.uuid4().hex}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        dsn = POSTGRES_DSN.rsplit("/", 1)[0] + f"/{name}"
        async with AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            yield saver
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each LangGraph checkpointer the node must work with."""
    if request.param == "memory":
        yield InMemorySaver()
    elif request.param == "sqlite":
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
            yield saver
    else:
        async for saver in _postgres_saver():
            yield saver
