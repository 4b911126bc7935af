"""Fixtures for the real tools: one local HTTP server and one pool of worker processes per session; a fresh
`Env` (work folder, PostgreSQL application name, child process list) per test."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from servers import POSTGRES_URL
from toolrun.runtime import ProcessIsolation

from ._localhttp import LocalHTTP
from ._tools import SSL, Env

DOORS = 5
"""How many door tests share the worker processes (`test_doors.py`)."""


@pytest.fixture(scope="session")
def local_http() -> Iterator[LocalHTTP]:
    # The first httpx client of a process pays about a second of one-time setup (lazy imports, the
    # environment's proxy settings): paid here, not inside the first tool's time box.
    httpx.Client(verify=SSL).close()
    with LocalHTTP() as server:
        yield server


@pytest.fixture(scope="session")
def isolation() -> Iterator[ProcessIsolation]:
    # Two workers per door (the slow call and the one killed at its timeout), all started here: starting one
    # costs a second or more (never inside a tool's time box, nor once per door). `forkserver` imports the
    # main module and toolrun once, in its server process, and forks the workers from it.
    multiprocessing.get_context("forkserver").set_forkserver_preload(["__main__", "toolrun.runtime._process"])
    pool = ProcessIsolation(max_workers=2 * DOORS, start_method="forkserver")
    asyncio.run(pool.start())
    yield pool
    pool.close()


@pytest.fixture
def env(local_http: LocalHTTP, isolation: ProcessIsolation, tmp_path: Path) -> Env:
    return Env(
        http=local_http.url,
        postgres=POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://"),
        workdir=tmp_path,
        isolation=isolation,
        app_name=f"toolrun-realtools-{uuid.uuid4().hex[:8]}",
    )
