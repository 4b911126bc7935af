"""`POST /api/v1/conversations/{id}/stop`: the page's Stop, in this process and across processes.

A model that streams a few words and then waits (until the stop closes its stream), and a slow tool that
waits until it is cancelled: the stop ends each run `stopped`, keeps what it did (the partial answer
flagged `stopped`; the cancelled call answered with a `STOPPED` error), and the history stays valid for
every provider (`history_problems`), so the next turn works. Another user's stop is 404; a stop with
nothing running is 409 `not_running`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolrun import tool
from toolrun.models import (
    FunctionModel,
    Message,
    ToolCallDelta,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from toolrun.server import create_app
from toolrun.server._statements import load_history
from toolrun.server._users import Principal

from .conftest import Service, make_service, sqlite_settings

pytestmark = pytest.mark.timeout(60)


class World:
    """What the model and the tool saw: events a test waits on."""

    def __init__(self) -> None:
        self.tool_started = asyncio.Event()
        self.tool_cancelled = asyncio.Event()
        self.stream_closed = asyncio.Event()
        self.requests: list[list[Message]] = []


def build(world: World) -> tuple[FunctionModel, Any]:
    @tool
    async def slow_report(topic: str) -> str:
        """Write a long report (slow).

        Args:
            topic: What the report is about.
        """
        world.tool_started.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            world.tool_cancelled.set()
            raise
        return "never"

    async def answer(messages: list[Message], tools: list[Any]) -> AsyncIterator[str | Any]:
        world.requests.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            yield "The report is ready."
            return
        text = last.content if isinstance(last, UserMessage) else ""
        if text.startswith("report"):
            yield "Writing it now. "
            yield ToolCallDelta(
                index=0, id="call_r1", name="slow_report", arguments_delta='{"topic": "sales"}'
            )
            return
        if text.startswith("slow"):
            yield "Here is the first half of a long answer"
            try:
                await asyncio.Event().wait()  # a model that keeps thinking
            finally:
                world.stream_closed.set()
        yield f"You said: {text}"

    return FunctionModel(stream_function=answer, name="stop-test"), slow_report


async def _principal(service: Service, client: Any) -> Principal:
    found = await service.state.users.authenticate(client.token)
    assert found is not None
    return found  # type: ignore[no-any-return]


async def _until(handle: Any, kind: str) -> list[Any]:
    seen = []
    async for event in handle:
        seen.append(event)
        if type(event).__name__ == kind:
            return seen
    raise AssertionError(f"no {kind} in {[type(e).__name__ for e in seen]}")


async def _stored_history_ok(service: Service, conversation_id: str) -> None:
    async with service.state.engine.connect() as conn:
        _, stored = await load_history(conn, conversation_id)
    assert history_problems(stored) == [], history_problems(stored)


@pytest.fixture
async def world_service(tmp_path: Path) -> AsyncIterator[tuple[Service, World]]:
    world = World()
    model, slow = build(world)
    async for s in make_service(sqlite_settings(tmp_path), model=model, extra_tools=[slow]):
        yield s, world


async def test_a_stop_during_a_streaming_answer_keeps_the_partial_text_marked_stopped(
    world_service: tuple[Service, World],
) -> None:
    service, world = world_service
    alice = await _principal(service, service.alice)
    handle = await service.state.chat.start_message(alice, "slow please")
    await _until(handle, "TextDelta")
    r = await service.alice.http.post(f"/api/v1/conversations/{handle.conversation_id}/stop")
    assert r.status_code == 202, r.text
    assert r.json() == {
        "conversation_id": handle.conversation_id,
        "run_id": handle.run_id,
        "status": "stopping",
    }
    end = (await _until(handle, "RunFinished"))[-1]
    assert end.response["status"] == "stopped"
    assert end.response["output"] == "Here is the first half of a long answer"
    await asyncio.wait_for(world.stream_closed.wait(), 5)  # the model stream was closed

    detail = (await service.alice.http.get(f"/api/v1/conversations/{handle.conversation_id}")).json()
    assert detail["last_run"]["status"] == "stopped"
    last = detail["messages"][-1]
    assert last["role"] == "assistant" and last["stopped"] is True and not last["interrupted"]
    assert last["content"] == "Here is the first half of a long answer"
    await _stored_history_ok(service, handle.conversation_id)

    # The next turn works, and what the model is sent is valid for every provider.
    nxt = await service.alice.chat("hello again", handle.conversation_id)
    assert nxt["status"] == "completed" and nxt["output"] == "You said: hello again"
    assert history_problems(world.requests[-1]) == []


async def test_a_stop_during_a_slow_tool_cancels_it(world_service: tuple[Service, World]) -> None:
    service, world = world_service
    alice = await _principal(service, service.alice)
    handle = await service.state.chat.start_message(alice, "report on sales")
    await _until(handle, "ToolCallStarted")
    await asyncio.wait_for(world.tool_started.wait(), 5)
    r = await service.alice.http.post(f"/api/v1/conversations/{handle.conversation_id}/stop")
    assert r.status_code == 202, r.text
    events = await _until(handle, "RunFinished")
    await asyncio.wait_for(world.tool_cancelled.wait(), 5)  # the executor cancelled the running tool
    finished = [e for e in events if type(e).__name__ == "ToolCallFinished"]
    assert finished and finished[-1].error["code"] == "STOPPED"
    assert events[-1].response["status"] == "stopped"

    detail = (await service.alice.http.get(f"/api/v1/conversations/{handle.conversation_id}")).json()
    roles = [(m["role"], m["tool_name"]) for m in detail["messages"]]
    assert roles == [("user", None), ("assistant", None), ("tool", "slow_report")]
    assert detail["messages"][1]["content"] == "Writing it now. "
    assert detail["messages"][2]["is_error"] and "STOPPED" in detail["messages"][2]["content"]
    await _stored_history_ok(service, handle.conversation_id)
    nxt = await service.alice.chat("and now?", handle.conversation_id)
    assert nxt["status"] == "completed"
    assert history_problems(world.requests[-1]) == []


async def test_stop_answers_404_for_another_user_and_409_when_nothing_runs(
    world_service: tuple[Service, World],
) -> None:
    service, world = world_service
    alice = await _principal(service, service.alice)
    handle = await service.state.chat.start_message(alice, "slow please")
    await _until(handle, "TextDelta")
    cid = handle.conversation_id
    r = await service.bob.http.post(f"/api/v1/conversations/{cid}/stop")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    r = await service.alice.http.post("/api/v1/conversations/conv_nope/stop")
    assert r.status_code == 404
    assert not world.stream_closed.is_set()  # bob's stop did nothing
    assert (await service.alice.http.post(f"/api/v1/conversations/{cid}/stop")).status_code == 202
    await _until(handle, "RunFinished")
    r = await service.alice.http.post(f"/api/v1/conversations/{cid}/stop")
    assert r.status_code == 409 and r.json()["code"] == "not_running", r.text


async def test_a_stop_that_reaches_another_process_stops_the_run(tmp_path: Path) -> None:
    """Two apps on one database (two processes' worth): the stop is recorded by one, seen by the other's
    heartbeat."""
    world = World()
    model, slow = build(world)
    settings = sqlite_settings(tmp_path, lease_seconds=0.6)
    async for service in make_service(settings, model=model, extra_tools=[slow]):
        other = create_app(settings, model=model, extra_tools=[slow])
        async with (
            other.router.lifespan_context(other),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=other),
                base_url="http://other",
                headers={"Authorization": f"Bearer {service.alice.token}"},
            ) as elsewhere,
        ):
            alice = await _principal(service, service.alice)
            handle = await service.state.chat.start_message(alice, "slow please")
            await _until(handle, "TextDelta")
            r = await elsewhere.post(f"/api/v1/conversations/{handle.conversation_id}/stop")
            assert r.status_code == 202, r.text
            end = (await _until(handle, "RunFinished"))[-1]
            assert end.response["status"] == "stopped"
            await _stored_history_ok(service, handle.conversation_id)


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_a_stop_of_a_durable_run_cancels_its_workflow_and_its_tool(tmp_path: Path) -> None:
    """`TOOLRUN_DURABLE=dbos`: the run's loop is a DBOS workflow beside the task that follows it. A stop
    cancels the workflow (no step of it starts again, here or on recovery) and the tool call in flight;
    the turn ends stopped, and the model is never asked about the cancelled call."""
    from dbos import DBOS

    world = World()
    model, slow = build(world)
    async for service in make_service(
        sqlite_settings(tmp_path, durable="dbos"), model=model, extra_tools=[slow]
    ):
        alice = await _principal(service, service.alice)
        handle = await service.state.chat.start_message(alice, "report on sales")
        await asyncio.wait_for(world.tool_started.wait(), 20)
        r = await service.alice.http.post(f"/api/v1/conversations/{handle.conversation_id}/stop")
        assert r.status_code == 202, r.text
        events = await _until(handle, "RunFinished")
        assert events[-1].response["status"] == "stopped"
        await asyncio.wait_for(world.tool_cancelled.wait(), 10)  # the call in flight was cancelled
        async with asyncio.timeout(10):  # the workflow is cancelled, not waiting or running on
            while await DBOS.list_workflows_async(status=["PENDING", "ENQUEUED"]):
                await asyncio.sleep(0.05)
        assert [w.status for w in await DBOS.list_workflows_async()] == ["CANCELLED"]
        assert len(world.requests) == 1  # the model was never asked about the cancelled call
        nxt = await service.alice.chat("hello again", handle.conversation_id)
        assert nxt["status"] == "completed" and nxt["output"] == "You said: hello again"
