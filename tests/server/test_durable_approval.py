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
    assert task_id not in await _task_ids(alice)  # deleted, once
    again = await alice.post(decide, json={"approve": True})
    assert again.status_code == 404
    async with asyncio.timeout(10):  # the workflow returns just after it published the run's end
        while await DBOS.list_workflows_async(status="PENDING"):
            await asyncio.sleep(0.02)


async def _task_ids(alice: Any) -> set[str]:
    return {t["id"] for t in (await alice.get("/api/v1/tasks?limit=200")).json()["tasks"]}


async def _paused_delete(alice: Any, title: str) -> tuple[str, str, str]:
    """A turn paused on deleting a new task: (task id, conversation id, confirmation id)."""
    created = (await alice.post("/api/v1/chat", json={"message": f"add {title}"})).json()
    task_id, cid = _task_id(created), created["conversation_id"]
    paused = (
        await alice.post("/api/v1/chat", json={"message": f"delete {task_id}", "conversation_id": cid})
    ).json()
    assert paused["status"] == "awaiting_confirmation", paused
    return task_id, cid, paused["pending"][0]["confirmation_id"]


async def test_a_durable_denial_carries_its_reason_and_an_edit_runs_the_edited_call(durable: Service) -> None:
    alice = durable.alice.http
    kept, _, first = await _paused_delete(alice, "Keep me")
    denied = (
        await alice.post(
            f"/api/v1/confirmations/{first}", json={"approve": False, "reason": "I still need it"}
        )
    ).json()
    assert denied["status"] == "completed", denied
    told = next(m["content"] for m in reversed(denied["messages"]) if m["role"] == "tool")
    assert "I still need it" in told  # the model was given the person's reason
    assert kept in await _task_ids(alice)

    other = _task_id((await alice.post("/api/v1/chat", json={"message": "add Other task"})).json())
    target, _, second = await _paused_delete(alice, "Not this one")
    bad = await alice.post(
        f"/api/v1/confirmations/{second}", json={"approve": True, "arguments": {"nope": 1}}
    )
    assert bad.status_code == 422  # refused before anything is decided; the turn still waits
    edited = (
        await alice.post(
            f"/api/v1/confirmations/{second}", json={"approve": True, "arguments": {"task_id": other}}
        )
    ).json()
    assert edited["status"] == "completed", edited
    remaining = await _task_ids(alice)
    assert other not in remaining  # the person's choice ran
    assert target in remaining and kept in remaining  # the model's did not
