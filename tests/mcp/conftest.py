"""Fixtures for the MCP tests: the sample registry behind a fresh executor and server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp_helpers import Clock
from sample_tools import STATE, build_registry

from toolrun import ToolContext, ToolExecutor
from toolrun.mcp import ToolrunMCPServer, create_server
from toolrun.runtime import InMemoryAuditSink


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def audit() -> InMemoryAuditSink:
    return InMemoryAuditSink()


@pytest.fixture
def executor(audit: InMemoryAuditSink, clock: Clock) -> Iterator[ToolExecutor]:
    ex = ToolExecutor(build_registry(), audit=audit, clock=clock, confirmation_ttl=60.0)
    yield ex
    ex.close()


@pytest.fixture
def server(executor: ToolExecutor, clock: Clock) -> ToolrunMCPServer:
    return create_server(
        executor.registry,
        executor=executor,
        principal=ToolContext(user_id="u1", roles=("member",)),
        clock=clock,
    )


@pytest.fixture
def state() -> dict[str, asyncio.Event]:
    STATE["started"] = asyncio.Event()
    STATE["cancelled"] = asyncio.Event()
    return STATE
