"""`TOOLRUN_DURABLE=dbos` in process: a paused turn is a waiting workflow; the decision through the
confirmations API continues it (once, for its user only)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from .conftest import Service, make_service, sqlite_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[Service]:
    async for service in make_service(sqlite_settings(tmp_path, durable="dbos")):
        yield service


def _task_id(body: dict[str, Any]) -> str:
    for m in reversed(body["messages"]):
        if m["role"] == "tool":
            return str(json.loads(m["content"])["id"])
    raise AssertionError("no tool result")


async def test_an_approval_continues_the_waiting_workflow(durable: Service) -> None:
    alice, bob = durable.alice.http, durable.bob.http
    created = (await alice.post("/api/v1/chat", json={"message": "add Doomed task"})).json()
    assert created["status"] == "completed", created
    task_id = _task_id(created)
    cid = created["conversation_id"]
    paused = (
        await alice.post("/api/v1/chat", json={"message": f"delete {task_id}", "conversation_id": cid})
    ).json()
    assert paused["status"] == "awaiting_confirmation", paused
    confirmation_id = paused["pending"][0]["confirmation_id"]
    waiting = await DBOS.list_workflows_async(status="PENDING")
    assert len(waiting) == 1  # the paused run is a workflow waiting for its decision
    decide = f"/api/v1/confirmations/{confirmation_id}"
    assert (await bob.post(decide, json={"approve": True})).status_code == 404
    done = (await alice.post(decide, json={"approve": True})).json()
    assert done["status"] == "completed", done
    assert (await alice.get(f"/api/v1/tasks/{task_id}")).status_code == 404  # deleted, once
    again = await alice.post(decide, json={"approve": True})
    assert again.status_code == 404
    async with asyncio.timeout(10):  # the workflow returns just after it published the run's end
        while await DBOS.list_workflows_async(status="PENDING"):
            await asyncio.sleep(0.02)
