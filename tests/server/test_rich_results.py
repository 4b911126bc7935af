"""Rich results through the service: progress as `tool_call_progress` (SSE), a CUSTOM event (AG-UI) and a
transient data part (AI SDK); images and files as URLs to `GET /api/v1/results/{id}` (never inline
bytes), served to their owner only, a tool's HTML never inline on the service's origin."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from media_samples import png
from toolrun import ToolContext, tool
from toolrun.content import File, Image, Text, ToolOutput
from toolrun.models import FunctionModel, ModelResponse

from .conftest import Service, make_service, sqlite_settings


@tool(read_only=True)
async def chart(q: str, ctx: ToolContext) -> ToolOutput[dict[str, int]]:
    """Draws a chart for a question."""
    for i in range(1000):
        await ctx.report_progress(i + 1, 1000, "drawing")
    return ToolOutput(
        value={"points": 3},
        content=[
            Text(f"chart of {q}"),
            Image(data=png(4, 4)),
            File(data=b"<script>alert(1)</script>", name="page.html", media_type="text/html"),
        ],
    )


def model() -> FunctionModel:
    def reply(messages, tools):  # type: ignore[no-untyped-def]
        if messages[-1].role == "user":
            return ModelResponse.from_tool_calls(("chart", {"q": "sales"}))
        return ModelResponse.from_text("Here is the chart.")

    return FunctionModel(reply)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async for s in make_service(sqlite_settings(tmp_path), model=model(), extra_tools=[chart]):
        yield s


def sse_events(text: str) -> list[tuple[str, Any]]:
    out, name = [], ""
    for line in text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:") and line[5:].strip() != "[DONE]":
            out.append((name, json.loads(line[5:])))
    return out


async def test_sse_progress_and_content_by_url_for_the_owner_only(service: Service) -> None:
    alice, bob = service.alice.http, service.bob.http
    response = await alice.post("/api/v1/chat/stream", json={"message": "chart sales"})
    events = sse_events(response.text)
    names = [name for name, _ in events]
    progress = [data for name, data in events if name == "tool_call_progress"]
    assert 1 <= len(progress) < 100 and progress[-1]["progress"] == 1000  # throttled, final kept
    assert not any("partial" in p for p in progress)  # only a generator's partial results carry one
    assert names.index("tool_call_progress") < names.index("tool_call_finished")
    (finished,) = [data for name, data in events if name == "tool_call_finished"]
    assert finished["result"] == {"points": 3}
    text, image, page = finished["content"]
    assert text == {"type": "text", "text": "chart of sales"}
    assert image["type"] == "image" and image["media_type"] == "image/png" and image["size"] == len(png(4, 4))
    assert "base64" not in response.text and len(response.text) < 20_000  # no bytes inline
    got = await alice.get(image["url"])
    assert got.status_code == 200 and got.content == png(4, 4) and got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    html = await alice.get(page["url"])
    assert html.headers["content-disposition"].startswith("attachment")
    assert html.headers["content-security-policy"] == "sandbox"
    stranger = await bob.get(image["url"])
    assert stranger.status_code == 404 and stranger.headers["content-type"] == "application/problem+json"
    assert (await alice.get("/api/v1/results/art_nope")).status_code == 404
    assert (await alice.get(image["url"], headers={"Authorization": ""})).status_code == 401


async def test_ag_ui_and_ai_sdk_carry_progress_and_content_urls(service: Service) -> None:
    http = service.alice.http
    body = {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "chart"}]}
    ag = [data for _, data in sse_events((await http.post("/api/v1/ag-ui", json=body)).text)]
    custom = [e for e in ag if e["type"] == "CUSTOM"]
    assert custom and all(e["name"] == "tool_call_progress" for e in custom)
    (result,) = [e for e in ag if e["type"] == "TOOL_CALL_RESULT"]
    content = json.loads(result["content"])["content"]
    assert content[1]["url"].startswith("/api/v1/results/")

    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "chart"}]}
    ai = await http.post(
        "/api/v1/ai-sdk", json={"id": "chat-2", "messages": [user], "trigger": "submit-message"}
    )
    parts = [data for _, data in sse_events(ai.text)]
    data_parts = [p for p in parts if p["type"] == "data-tool-progress"]
    assert data_parts and all(p["transient"] is True for p in data_parts)
    (output,) = [p for p in parts if p["type"] == "tool-output-available"]  # no preliminary ones
    assert "preliminary" not in output
    assert output["output"]["content"][1]["url"].startswith("/api/v1/results/")
    image = await http.get(output["output"]["content"][1]["url"])
    assert image.content == png(4, 4)


async def test_stored_content_is_served_by_every_process_and_after_a_restart(
    service: Service, tmp_path: Path
) -> None:
    """The artifacts live in the database (`toolrun_artifacts`), not in one process's memory: another app
    on the same database — a second worker, or this one restarted — serves the image to its owner only."""
    import httpx

    from toolrun.server import create_app

    response = await service.alice.http.post("/api/v1/chat/stream", json={"message": "chart sales"})
    (finished,) = [data for name, data in sse_events(response.text) if name == "tool_call_finished"]
    url = finished["content"][1]["url"]
    other = create_app(service.settings, model=model(), extra_tools=[chart])
    async with other.router.lifespan_context(other):
        transport = httpx.ASGITransport(app=other)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            got = await http.get(url, headers={"Authorization": f"Bearer {service.alice.token}"})
            stranger = await http.get(url, headers={"Authorization": f"Bearer {service.bob.token}"})
    assert got.status_code == 200 and got.content == png(4, 4)
    assert stranger.status_code == 404


@tool(read_only=True)
async def tally(n: int, ctx: ToolContext) -> int:
    """Counts rows, reporting "i of i so far" (each report looks complete)."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, i, "so far")
    return n


@pytest.fixture
async def tallying(tmp_path: Path) -> AsyncIterator[Service]:
    def reply(messages, tools):  # type: ignore[no-untyped-def]
        if messages[-1].role == "user":
            return ModelResponse.from_tool_calls(("tally", {"n": 5000}))
        return ModelResponse.from_text("Counted.")

    async for s in make_service(sqlite_settings(tmp_path), model=FunctionModel(reply), extra_tools=[tally]):
        yield s


async def test_reports_that_look_complete_do_not_flood_sse_or_ag_ui(tallying: Service) -> None:
    http = tallying.alice.http
    sse = sse_events((await http.post("/api/v1/chat/stream", json={"message": "count"})).text)
    progress = [data for name, data in sse if name == "tool_call_progress"]
    assert 1 <= len(progress) < 200 and progress[-1]["progress"] == 5000  # not 5,000 events; the last kept
    body = {"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "count"}]}
    ag = [data for _, data in sse_events((await http.post("/api/v1/ag-ui", json=body)).text)]
    custom = [e for e in ag if e["type"] == "CUSTOM" and e["name"] == "tool_call_progress"]
    assert 1 <= len(custom) < 200
