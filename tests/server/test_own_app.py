"""An App of the test's own (notes, `own_app/notes_app.py`), not the task assistant, through every door:
chat JSON and SSE, AG-UI, the AI SDK stream, `/api/v1/tools`, `/mcp`, an approval of its destructive tool,
a background job, `/api/v1/app` and its panel, its own router and migrations. The offline model here is
the one every App without a `demo_model` gets: `/tool {json}` calls a tool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolrun.cli import create_service_app
from toolrun.server import App, AppError, Panel, create_app, load_app
from toolrun.server.migrate import app_revision, current_revision, downgrade, head_revision, upgrade

from .conftest import Service, sqlite_settings
from .own_app import notes_app
from .own_app.notes_app import app as notes

NOTE_TOOLS = {"add_note", "list_notes", "delete_note", "export_notes"}


def sse(text: str) -> list[tuple[str, Any]]:
    out, name = [], ""
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:") and line[5:].strip() != "[DONE]":
            out.append((name, json.loads(line[5:])))
    return out


def result_of(response: dict[str, Any], tool: str) -> Any:
    for m in reversed(response["messages"]):
        if m["role"] == "tool" and m["tool_name"] == tool:
            return json.loads(m["content"])
    raise AssertionError(f"no result of {tool}: {response}")


@asynccontextmanager
async def serve_app(settings: Any, **options: Any) -> AsyncIterator[Service]:
    """The notes App with `/mcp`, migrated, two users signed in over ASGI (entered and left in one task:
    the MCP session manager's lifespan must be)."""
    from .conftest import Client

    await upgrade(settings.database_url, app=notes)
    app = create_service_app(settings, app=notes, **options)
    state = app.state.toolrun
    alice, alice_token = await state.users.add("alice")
    bob, bob_token = await state.users.add("bob")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient(
                transport=transport, base_url="http://t", headers={"Authorization": f"Bearer {alice_token}"}
            ) as a,
            httpx.AsyncClient(
                transport=transport, base_url="http://t", headers={"Authorization": f"Bearer {bob_token}"}
            ) as b,
        ):
            yield Service(
                app=app,
                settings=settings,
                alice=Client(a, alice.user_id, alice_token),
                bob=Client(b, bob.user_id, bob_token),
            )


@asynccontextmanager
async def uvicorn_serving(app: Any) -> AsyncIterator[str]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


async def mcp_names_and_call(url: str, headers: dict[str, str], tool: str) -> tuple[set[str], Any]:
    """The tools an MCP client sees at `url`, and the structured result of `tool` called with no arguments."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from mcp import Client

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as streams,
        ):
            yield streams

    async with Client(transport()) as client:
        listed = await client.list_tools()
        called = await client.call_tool(tool, {})
    return {t.name for t in listed.tools}, called.structured_content


async def test_every_door_serves_the_apps_tools_and_only_them(tmp_path: Path) -> None:
    async with serve_app(sqlite_settings(tmp_path)) as service:
        await _every_door(service)


async def _every_door(service: Service) -> None:
    alice, bob = service.alice.http, service.bob.http

    face = (await alice.get("/api/v1/app")).json()
    assert face == {
        "name": "notes",
        "title": "Notes",
        "intro": "Keeps your notes.",
        "starters": ["Add a note: buy milk", "What are my notes?"],
        "panel": {"title": "Your notes", "tool": "list_notes"},
        "demo": True,
    }
    assert (await alice.get("/api/v1/app/panel")).json()["value"] == {"notes": []}

    # chat (JSON): the app's tool writes the app's own table
    added = (await alice.post("/api/v1/chat", json={"message": '/add_note {"text": "buy milk"}'})).json()
    note = result_of(added, "add_note")
    assert note["text"] == "buy milk"

    # chat (SSE)
    stream = sse((await alice.post("/api/v1/chat/stream", json={"message": "/list_notes"})).text)
    (finished,) = [data for name, data in stream if name == "tool_call_finished"]
    assert finished["result"] == {"notes": [note]}

    # AG-UI
    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "/list_notes"}],
    }
    ag = [data for _, data in sse((await alice.post("/api/v1/ag-ui", json=body)).text)]
    (ag_result,) = [e for e in ag if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(ag_result["content"])["value"] == {"notes": [note]}

    # the AI SDK stream
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "/list_notes"}]}
    ai = await alice.post(
        "/api/v1/ai-sdk", json={"id": "chat-1", "messages": [user], "trigger": "submit-message"}
    )
    (output,) = [p for _, p in sse(ai.text) if p["type"] == "tool-output-available"]
    assert output["output"]["value"] == {"notes": [note]}

    # /api/v1/tools: the app's tools, none of the task assistant's
    listed = (await alice.get("/api/v1/tools", params={"format": "mcp"})).json()["tools"]
    assert {t["name"] for t in listed} == NOTE_TOOLS
    assert (await alice.get("/api/v1/tasks")).status_code == 404  # the tasks app's router is not here
    assert (await alice.get("/api/v1/notes/count")).json() == {"count": 1}  # the notes app's is

    # an approval of the app's destructive tool, for its user only
    asked = (
        await alice.post("/api/v1/chat", json={"message": f'/delete_note {{"note_id": "{note["id"]}"}}'})
    ).json()
    [pending] = asked["pending"]
    assert pending["tool"] == "delete_note"
    assert (await service.bob.decide(pending["confirmation_id"], True)).status_code == 404
    assert (await service.alice.decide(pending["confirmation_id"], True)).status_code == 200
    panel = (await alice.get("/api/v1/app/panel")).json()
    assert panel == {
        "title": "Your notes",
        "tool": "list_notes",
        "status": "ok",
        "value": {"notes": []},
        "error": None,
    }

    # the panel is each user's own, and needs a user
    await bob.post("/api/v1/chat", json={"message": '/add_note {"text": "bob only"}'})
    assert [n["text"] for n in (await bob.get("/api/v1/app/panel")).json()["value"]["notes"]] == ["bob only"]
    assert (await alice.get("/api/v1/app/panel")).json()["value"] == {"notes": []}
    assert (await alice.get("/api/v1/app/panel", headers={"Authorization": ""})).status_code == 401

    # /mcp: the same tools, the same user's rows, over a real MCP client
    async with uvicorn_serving(service.app) as base:
        names, value = await mcp_names_and_call(
            f"{base}/mcp", {"Authorization": f"Bearer {service.bob.token}"}, "list_notes"
        )
    assert names == NOTE_TOOLS
    assert [n["text"] for n in value["notes"]] == ["bob only"]
    assert service.app.title == "Notes"


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_a_background_job_of_the_app(tmp_path: Path) -> None:
    async with serve_app(sqlite_settings(tmp_path, durable="dbos")) as service:
        alice, bob = service.alice.http, service.bob.http
        await alice.post("/api/v1/chat", json={"message": '/add_note {"text": "one"}'})
        started = (await alice.post("/api/v1/chat", json={"message": "/export_notes"})).json()
        assert started["status"] == "completed", started
        said = next(m["content"] for m in started["messages"] if m["role"] == "tool")
        job_id = said.split()[3]
        assert job_id.startswith("job_"), said

        async def done() -> Any:
            job = (await alice.get(f"/api/v1/jobs/{job_id}")).json()
            return job if job["status"] == "completed" else None

        async with asyncio.timeout(30):
            while not (job := await done()):
                await asyncio.sleep(0.05)
        assert job["result"]["value"] == {"exported": 1}
        assert (await bob.get(f"/api/v1/jobs/{job_id}")).status_code == 404


async def test_the_apps_migrations_have_their_own_history(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/n.db"
    await upgrade(url, app=notes)
    assert await current_revision(url) == head_revision()
    assert await app_revision(url, notes) == "notes_0001" == head_revision(notes)
    assert await app_revision(url, "toolrun.apps.tasks:app") is None  # no task table in a notes database
    await downgrade(url, "base", app=notes)
    assert await current_revision(url) is None and await app_revision(url, notes) is None


def test_an_app_that_cannot_be_served_says_why(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    with pytest.raises(AppError, match="must be read-only"):
        create_app(
            settings,
            app=App(name="x", title="X", tools=notes_app.tools, panel=Panel(title="p", tool="add_note")),
        )
    with pytest.raises(AppError, match="not one of the app's tools"):
        create_app(
            settings, app=App(name="x", title="X", tools=notes_app.tools, panel=Panel(title="p", tool="nope"))
        )
    with pytest.raises(AppError, match=r"\[a-z0-9-\]"):
        App(name="Notes App", title="X")
    with pytest.raises(AppError, match="not 'module:attribute'"):
        load_app("notes_app")
    with pytest.raises(AppError, match="no such module"):
        load_app("no_such_module_here:app")
    with pytest.raises(AppError, match="no attribute 'nope'"):
        load_app("toolrun.apps.tasks:nope")
    with pytest.raises(AppError, match=r"not a toolrun\.server\.App"):
        load_app("toolrun.apps.tasks:task_tools")
    assert load_app(None).name == "tasks"  # the task assistant, by name only


async def test_a_remote_mcp_toolset_is_served_through_the_same_gates(tmp_path: Path) -> None:
    """`tools=[MCPToolset(...)]`: the remote server's tools are fetched when the service starts and served
    by every door like the app's own (here an in-process MCP server)."""
    from toolrun import ToolContext, ToolRegistry, tool
    from toolrun.mcp import MCPToolset, create_server

    @tool(read_only=True)
    def forecast(city: str = "Paris", *, ctx: ToolContext) -> dict[str, str]:
        """Tomorrow's weather.

        Args:
            city: The city.
        """
        return {"city": city, "weather": "sunny"}

    remote = MCPToolset(create_server(ToolRegistry([forecast])), trusted=True)
    weather = App(
        name="weather", title="Weather", tools=[remote], panel=Panel(title="Tomorrow", tool="forecast")
    )
    settings = sqlite_settings(tmp_path)
    await upgrade(settings.database_url, app=weather)
    app = create_app(settings, app=weather)
    _, token = await app.state.toolrun.users.add("ada")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as http:
            listed = (await http.get("/api/v1/tools", params={"format": "mcp"})).json()["tools"]
            said = (await http.post("/api/v1/chat", json={"message": '/forecast {"city": "Oslo"}'})).json()
            panel = (await http.get("/api/v1/app/panel")).json()
    assert [t["name"] for t in listed] == ["forecast"]
    assert result_of(said, "forecast") == {"city": "Oslo", "weather": "sunny"}
    assert panel["status"] == "ok" and panel["value"] == {"city": "Paris", "weather": "sunny"}
