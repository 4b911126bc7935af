"""`/api/v1/jobs` with `TOOLRUN_DURABLE=dbos`: a background tool's job through the API (the owner's only),
its cancel, and its result in the next turn; without durable runs the routes answer empty / 404."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolrun import ToolCall, ToolContext, tool
from toolrun.models import ScriptedModel

from .conftest import Client, Service, make_service, sqlite_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

GATE: dict[str, asyncio.Event] = {}


@tool(background=True, timeout=60)
async def crunch(n: int, *, ctx: ToolContext) -> dict[str, int]:
    """Crunch numbers for a long time."""
    await ctx.report_progress(1, total=2, message="halfway")
    await GATE[f"{n}"].wait()
    return {"sum": n * 2}


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[tuple[Service, ScriptedModel]]:
    model = ScriptedModel(
        [ToolCall(id="c1", name="crunch", arguments={"n": 21}), "Started.", "The sum is 42."]
    )
    settings = sqlite_settings(tmp_path, durable="dbos")
    async for service in make_service(settings, model=model, extra_tools=[crunch]):
        yield service, model


def _job_id(response: dict[str, Any]) -> str:
    """The job id the model was told about (the tool message names it)."""
    said = next(m["content"] for m in response["messages"] if m["role"] == "tool")
    match = re.match(r"Started background job (job_\w+) \(crunch\)", said)
    assert match is not None, said
    return match[1]


async def _until(check: Any, timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := await check()):
            await asyncio.sleep(0.02)
    return value


async def test_a_job_through_the_api_and_into_the_next_turn(durable: tuple[Service, ScriptedModel]) -> None:
    service, model = durable
    GATE["21"] = asyncio.Event()
    alice, bob = service.alice.http, service.bob.http
    first = (await alice.post("/api/v1/chat", json={"message": "crunch 21"})).json()
    assert first["status"] == "completed", first
    job_id = _job_id(first)

    async def progressed() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["progress"] else None

    job = await _until(progressed)
    assert job["status"] == "running"
    assert job["progress"] == {"progress": 1, "total": 2, "message": "halfway"}
    assert [j["id"] for j in (await alice.get("/api/v1/jobs")).json()["jobs"]] == [job_id]
    # someone else's job is not there, for reading or cancelling
    assert (await bob.get("/api/v1/jobs")).json() == {"jobs": []}
    assert (await bob.get(f"/api/v1/jobs/{job_id}")).status_code == 404
    assert (await bob.delete(f"/api/v1/jobs/{job_id}")).status_code == 404
    GATE["21"].set()

    async def finished() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["status"] == "completed" else None

    assert (await _until(finished))["result"]["value"] == {"sum": 42}
    second = (
        await alice.post(
            "/api/v1/chat", json={"message": "and?", "conversation_id": first["conversation_id"]}
        )
    ).json()
    assert second["output"] == "The sum is 42."
    seen = model.requests[-1].messages[-1].content
    assert seen == f'[Background job {job_id} (crunch) completed] {{"sum":42}}'


async def test_cancel_a_running_job(durable: tuple[Service, ScriptedModel]) -> None:
    service, _ = durable
    GATE["21"] = asyncio.Event()  # never set: only the cancel ends it
    alice = service.alice.http
    first = (await alice.post("/api/v1/chat", json={"message": "crunch 21"})).json()
    job_id = _job_id(first)
    assert (await alice.delete(f"/api/v1/jobs/{job_id}")).status_code == 202

    async def stopped() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["result"] else None

    job = await _until(stopped)
    assert job["status"] == "cancelled"
    assert job["result"]["error"]["details"] == {"cancelled": True}


async def test_without_durable_runs_there_are_no_jobs(service: Service) -> None:
    assert (await service.alice.http.get("/api/v1/jobs")).json() == {"jobs": []}
    assert (await service.alice.http.get("/api/v1/jobs/job_x")).status_code == 404
    assert (await service.alice.http.delete("/api/v1/jobs/job_x")).status_code == 404


def _sse(body: str) -> list[tuple[str, dict[str, Any]]]:
    """`(event name, data)` of each SSE event in a body."""
    import json

    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data and data != ["[DONE]"]:
            events.append((name, json.loads("\n".join(data))))
    return events


async def test_the_jobs_stream_sends_progress_then_the_end_once(
    durable: tuple[Service, ScriptedModel],
) -> None:
    service, _ = durable
    GATE["21"] = asyncio.Event()
    alice, bob = service.alice.http, service.bob.http
    job_id = _job_id((await alice.post("/api/v1/chat", json={"message": "crunch 21"})).json())
    listening = asyncio.create_task(alice.get("/api/v1/jobs/events", params={"until_idle": "true"}))

    jobs = service.app.state.toolrun_jobs
    listed, seen = jobs.list_jobs, asyncio.Event()

    async def list_jobs(*args: Any, **kwargs: Any) -> Any:  # what the stream reads, every 0.5 s
        found = await listed(*args, **kwargs)
        if any(j["id"] == job_id and j["progress"] for j in found):
            seen.set()
        return found

    jobs.list_jobs = list_jobs
    await asyncio.wait_for(seen.wait(), 20)  # the stream has read the progress: it sends it
    GATE["21"].set()
    response = await asyncio.wait_for(listening, 30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = _sse(response.text)
    names = [name for name, _ in events]
    assert set(names) == {"job_progress", "job_finished"} and names[-1] == "job_finished"
    assert names.count("job_finished") == 1  # the end, once
    assert all(data["id"] == job_id for _, data in events)
    assert any(data["progress"] == {"progress": 1, "total": 2, "message": "halfway"} for _, data in events)
    assert events[-1][1]["status"] == "completed" and events[-1][1]["result"]["value"] == {"sum": 42}
    # someone else's stream has nothing of alice's
    assert _sse((await bob.get("/api/v1/jobs/events", params={"until_idle": "true"})).text) == []
    # the same news for AG-UI (CUSTOM events in one run) and the AI SDK (one data part per job)
    ag_ui = await alice.get("/api/v1/jobs/events", params={"until_idle": "true", "format": "ag-ui"})
    kinds = [data["type"] for _, data in _sse(ag_ui.text)]
    assert kinds == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    custom = _sse(ag_ui.text)[1][1]
    assert custom["name"] == "job_finished" and custom["value"]["id"] == job_id
    ai_sdk = await alice.get("/api/v1/jobs/events", params={"until_idle": "true", "format": "ai-sdk"})
    assert ai_sdk.headers["x-vercel-ai-ui-message-stream"] == "v1"
    parts = [data for _, data in _sse(ai_sdk.text)]
    assert [p["type"] for p in parts] == ["start", "data-job", "finish"]
    assert parts[1]["id"] == job_id and parts[1]["data"]["status"] == "completed"
    assert ai_sdk.text.rstrip().endswith("data: [DONE]")


async def test_without_durable_runs_the_jobs_stream_is_empty(service: Service) -> None:
    response = await service.alice.http.get("/api/v1/jobs/events", params={"until_idle": "true"})
    assert response.status_code == 200 and _sse(response.text) == []


@tool(background=True, timeout=60)
async def list_files(folder: str, *, ctx: ToolContext) -> dict[str, list[str]]:
    """List the files of a folder."""
    # a name that is not UTF-8 on disk, as os.listdir gives it: a lone surrogate (surrogateescape)
    names = ["ok.txt", b"caf\xe9.txt".decode("utf-8", "surrogateescape")]
    await ctx.report_progress(1, total=2, message=f"read {names[-1]}")
    await GATE["files"].wait()
    return {"files": names}


@pytest.fixture
async def files_service(tmp_path: Path) -> AsyncIterator[tuple[Service, ScriptedModel]]:
    model = ScriptedModel(
        [ToolCall(id="c1", name="list_files", arguments={"folder": "/srv"}), "Started.", "Here they are."]
    )
    settings = sqlite_settings(tmp_path, durable="dbos")
    async for service in make_service(settings, model=model, extra_tools=[list_files]):
        yield service, model


async def test_a_job_whose_output_is_not_unicode_still_reads_and_its_conversation_goes_on(
    files_service: tuple[Service, ScriptedModel],
) -> None:
    service, model = files_service
    GATE["files"] = asyncio.Event()
    alice = service.alice.http
    first = (await alice.post("/api/v1/chat", json={"message": "list /srv"})).json()
    said = next(m["content"] for m in first["messages"] if m["role"] == "tool")
    job_id = re.match(r"Started background job (job_\w+)", said)[1]  # type: ignore[index]

    async def progressed() -> Any:
        r = await alice.get(f"/api/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json() if r.json()["progress"] else None

    assert (await _until(progressed))["progress"]["message"] == "read caf\ufffd.txt"
    GATE["files"].set()

    async def finished() -> Any:
        r = await alice.get(f"/api/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json() if r.json()["status"] == "completed" else None

    assert (await _until(finished))["result"]["value"] == {"files": ["ok.txt", "caf\ufffd.txt"]}
    listed = await alice.get("/api/v1/jobs")
    assert listed.status_code == 200 and listed.json()["jobs"][0]["id"] == job_id
    second = await alice.post(
        "/api/v1/chat", json={"message": "and?", "conversation_id": first["conversation_id"]}
    )
    assert second.status_code == 200, second.text
    assert second.json()["output"] == "Here they are."
    assert "caf\ufffd.txt" in model.requests[-1].messages[-1].content


RELEASE: dict[str, threading.Event] = {}


@tool(background=True, timeout=60)
def copy_disk(disk: str) -> str:
    """Copy a disk, blocking (a plain def: it runs in a worker thread that cannot be stopped)."""
    RELEASE[disk].wait(30)
    return f"copied {disk}"


@pytest.fixture
async def blocking(tmp_path: Path) -> AsyncIterator[Service]:
    calls = [ToolCall(id=f"c{n}", name="copy_disk", arguments={"disk": f"d{n}"}) for n in (1, 2, 3)]
    model = ScriptedModel([calls[0], "Started.", calls[1], "Tried.", calls[2], "Started again."])
    settings = sqlite_settings(tmp_path, durable="dbos", max_jobs_per_user=1)
    async for service in make_service(settings, model=model, extra_tools=[copy_disk]):
        yield service
    for event in RELEASE.values():
        event.set()


async def test_a_cancelled_blocking_job_holds_its_place_until_its_thread_has_stopped(
    blocking: Service,
) -> None:
    RELEASE.update(d1=threading.Event(), d2=threading.Event(), d3=threading.Event())
    alice = blocking.alice.http
    first = (await alice.post("/api/v1/chat", json={"message": "copy d1"})).json()
    said = next(m["content"] for m in reversed(first["messages"]) if m["role"] == "tool")
    job_id = re.match(r"Started background job (job_\w+)", said)[1]  # type: ignore[index]
    conversation = {"conversation_id": first["conversation_id"]}
    assert (await alice.delete(f"/api/v1/jobs/{job_id}")).status_code == 202
    job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
    assert job["status"] == "cancelling"  # asked to stop; its thread still runs
    # the thread still runs: the user's one place is taken
    refused = (await alice.post("/api/v1/chat", json={"message": "copy d2", **conversation})).json()
    said = next(m["content"] for m in reversed(refused["messages"]) if m["role"] == "tool")
    assert "Too many background jobs" in said
    assert [j["id"] for j in (await alice.get("/api/v1/jobs")).json()["jobs"]] == [job_id]
    # The job's runner reads the cancel from the store every quarter of a second (it may run in another
    # process): a thread released before it has read it ends the job as it finished. Wait for that read.
    jobs = blocking.app.state.toolrun_jobs
    status, read = jobs.status, asyncio.Event()

    async def read_status(asked: str) -> Any:
        found = await status(asked)
        if asked == job_id and found == "cancelling":
            read.set()
        return found

    jobs.status = read_status
    await asyncio.wait_for(read.wait(), 20)
    RELEASE["d1"].set()  # the thread returns: only now has the job stopped

    async def ended() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["status"] != "cancelling" else None

    job = await _until(ended)
    assert job["status"] == "cancelled" and job["result"]["error"]["details"] == {"cancelled": True}
    again = (await alice.post("/api/v1/chat", json={"message": "copy d3", **conversation})).json()
    said = next(m["content"] for m in reversed(again["messages"]) if m["role"] == "tool")
    assert said.startswith("Started background job")


async def test_a_cancel_that_lands_as_the_job_finishes_leaves_it_finished(
    durable: tuple[Service, ScriptedModel],
) -> None:
    service, _ = durable
    GATE["21"] = asyncio.Event()
    alice = service.alice.http
    jobs = service.app.state.toolrun_jobs
    job_id = _job_id((await alice.post("/api/v1/chat", json={"message": "crunch 21"})).json())
    finish = jobs.finish

    async def cancelled_as_it_finishes(job: str, result: Any) -> None:
        # the user's cancel arrives after the tool returned, before its result is stored
        assert (await alice.delete(f"/api/v1/jobs/{job}")).status_code == 202
        await finish(job, result)

    jobs.finish = cancelled_as_it_finishes
    GATE["21"].set()

    async def ended() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["result"] else None

    job = await _until(ended)
    assert (job["status"], job["result"]["status"]) == ("completed", "ok")
    assert job["result"]["value"] == {"sum": 42}


@tool(background=True, timeout=60)
async def count_rows(n: int, *, ctx: ToolContext) -> int:
    """Count rows, reporting each."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
        if i % 100 == 0:
            await asyncio.sleep(0)
    return n


@pytest.fixture
async def counting(tmp_path: Path) -> AsyncIterator[Service]:
    model = ScriptedModel([ToolCall(id="c1", name="count_rows", arguments={"n": 5000}), "Started."])
    settings = sqlite_settings(tmp_path, durable="dbos")
    async for service in make_service(settings, model=model, extra_tools=[count_rows]):
        yield service


async def test_job_progress_is_throttled_and_its_last_report_is_kept(counting: Service) -> None:
    alice = counting.alice.http
    jobs = counting.app.state.toolrun_jobs
    writes: list[float] = []
    progress = jobs.progress

    async def counted(job: str, done: float, total: float | None, message: str | None) -> None:
        writes.append(done)
        await progress(job, done, total, message)

    jobs.progress = counted
    first = (await alice.post("/api/v1/chat", json={"message": "count"})).json()
    said = next(m["content"] for m in reversed(first["messages"]) if m["role"] == "tool")
    job_id = re.match(r"Started background job (job_\w+)", said)[1]  # type: ignore[index]

    async def ended() -> Any:
        job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
        return job if job["status"] == "completed" else None

    job = await _until(ended)
    assert job["progress"]["progress"] == 5000 and writes[-1] == 5000  # the last report is stored
    assert len(writes) < 100  # not a database write per report


HELD: dict[str, threading.Event] = {}
HOLDING: set[str] = set()
_HOLDING_LOCK = threading.Lock()


@tool(background=True, timeout=60)
def hold_disk(disk: str) -> str:
    """Hold a disk, blocking (a plain def: it takes a worker thread until its event is set)."""
    with _HOLDING_LOCK:
        HOLDING.add(disk)
    HELD[disk].wait(60)
    return f"held {disk}"


@tool(timeout=5)
def ping() -> str:
    """Answer at once (a sync tool of a chat turn)."""
    return "pong"


# As many jobs in all as the executor has worker threads for sync tools (its default pool): before jobs
# ran in a pool of their own, two users' blocking jobs took every one of them.
_SHARED_THREADS = min(32, (os.cpu_count() or 1) + 4)
_PER_USER = -(-_SHARED_THREADS // 2)


def _holds(user: str) -> list[ToolCall]:
    return [
        ToolCall(id=f"{user}{n}", name="hold_disk", arguments={"disk": f"{user}{n}"})
        for n in range(_PER_USER)
    ]


@pytest.fixture
async def holding(tmp_path: Path) -> AsyncIterator[Service]:
    model = ScriptedModel(
        [
            _holds("a"),
            "Started.",
            _holds("b"),
            "Started.",
            ToolCall(id="p", name="ping", arguments={}),
            "pong.",
        ],
        cursor="sequential",
    )
    settings = sqlite_settings(tmp_path, durable="dbos", max_jobs_per_user=_PER_USER)
    HELD.update({c.arguments["disk"]: threading.Event() for c in (*_holds("a"), *_holds("b"))})
    HOLDING.clear()
    try:
        async for service in make_service(settings, model=model, extra_tools=[hold_disk, ping]):
            yield service
    finally:
        for event in HELD.values():
            event.set()


async def test_blocking_jobs_never_take_the_threads_of_other_users_sync_tools(holding: Service) -> None:
    for client in (holding.alice, holding.bob):
        started = await client.chat("hold my disks")
        said = [m["content"] for m in started["messages"] if m["role"] == "tool"]
        assert len(said) == _PER_USER and all(s.startswith("Started background job") for s in said), said

    async def all_blocking() -> bool:
        return len(HOLDING) == 2 * _PER_USER

    await _until(all_blocking)  # every job's thread is taken, each user at their limit
    carol, token = await holding.state.users.add("carol")
    transport = httpx.ASGITransport(app=holding.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", headers={"Authorization": f"Bearer {token}"}
    ) as http:
        reply = await Client(http, carol.user_id, token).chat("ping")
    said = [m["content"] for m in reply["messages"] if m["role"] == "tool" and m["tool_name"] == "ping"]
    assert said == ["pong"]  # answered while every job still blocks
    assert not any(event.is_set() for event in HELD.values())
    for client in (holding.alice, holding.bob):
        jobs = (await client.http.get("/api/v1/jobs")).json()["jobs"]
        assert [j["status"] for j in jobs] == ["running"] * _PER_USER
    for event in HELD.values():
        event.set()

    async def all_done() -> bool:
        jobs = [
            j for c in (holding.alice, holding.bob) for j in (await c.http.get("/api/v1/jobs")).json()["jobs"]
        ]
        return all(j["status"] == "completed" for j in jobs)

    await _until(all_done)


class _EndlessJobs:
    """A job store with one job that runs forever: a `toolrun` jobs stream over it never ends by itself."""

    def __init__(self) -> None:
        self.reads = 0

    async def list_jobs(self, user_id: str, limit: int = 50) -> list[dict[str, Any]]:
        self.reads += 1
        return [{"id": "job_1", "status": "running", "updated_at": 1.0, "progress": None}]


async def test_a_quiet_jobs_stream_pings_and_stops_when_the_client_goes_away(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between changes the stream sends `: ping` comments (proxies keep it open); the client's disconnect
    ends the response and the store is no longer read."""
    from toolrun.server.routes import jobs as jobs_routes

    monkeypatch.setattr(jobs_routes, "PING_SECONDS", 0.05)
    store = _EndlessJobs()
    service.app.state.toolrun_jobs = store
    bodies: list[bytes] = []
    pinged = asyncio.Event()
    requested = False

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])
            if b": ping" in message["body"]:
                pinged.set()

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await pinged.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/v1/jobs/events",
        "raw_path": b"/api/v1/jobs/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), (b"authorization", f"Bearer {service.alice.token}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    async with asyncio.timeout(20):
        await service.app(scope, receive, send)
    text = b"".join(bodies).decode()
    assert text.startswith("id: jobs:1\r\nevent: job_progress\r\ndata: ")
    assert ": ping" in text.split("\r\n\r\n", 1)[1]
    reads = store.reads
    await asyncio.sleep(0.6)  # longer than the stream's store interval: a stream still running reads again
    assert store.reads == reads
