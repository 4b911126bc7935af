"""Rich results through the real JS clients: a tool that reports progress and returns an image reaches
@ag-ui/client (CUSTOM `tool_call_progress` events, a TOOL_CALL_RESULT whose image is a URL) and the AI SDK 6
chat (`data-tool-progress` parts through `onData`, a tool part whose output's image is a URL), and the URL
serves the PNG to its owner. An async generator tool's partial results arrive the same way."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._rich import STEPS, chart_png
from .conftest import LiveServer, run_node

pytestmark = pytest.mark.timeout(120)


def fetch(live: LiveServer, url: str, token: str) -> httpx.Response:
    return httpx.get(live.url + url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def check_image_ref(live: LiveServer, item: dict[str, Any]) -> None:
    """An image is a reference to stored bytes, served to alice (and nobody else)."""
    png = chart_png()
    assert item["type"] == "image" and item["media_type"] == "image/png" and item["size"] == len(png)
    assert item["url"].startswith("/api/v1/results/") and "data" not in item
    got = fetch(live, item["url"], live.alice)
    assert got.status_code == 200 and got.content == png and got.headers["content-type"] == "image/png"
    assert fetch(live, item["url"], live.bob).status_code == 404


def agui_say(live: LiveServer, js: Path, text: str) -> dict[str, Any]:
    payload = {
        "url": f"{live.url}/api/v1/ag-ui",
        "token": live.alice,
        "threadId": f"thread-{uuid.uuid4().hex[:8]}",
        "steps": [{"op": "say", "text": text}],
    }
    report = run_node(js, "ag_ui_client.mjs", payload)
    assert "[ag-ui]" not in report["stderr"], report["stderr"]
    (step,) = report["steps"]
    assert step["clientError"] is None and step["runError"] is None, step
    return step  # type: ignore[no-any-return]


def ai_sdk_say(live: LiveServer, js: Path, text: str) -> dict[str, Any]:
    payload = {
        "url": f"{live.url}/api/v1/ai-sdk",
        "token": live.alice,
        "chatId": f"chat-{uuid.uuid4().hex[:8]}",
        "steps": [{"op": "say", "text": text}],
    }
    (step,) = run_node(js, "ai_sdk_client.mjs", payload)["steps"]
    assert step["error"] is None and step["status"] == "ready", step
    return step  # type: ignore[no-any-return]


def test_ag_ui_client_gets_progress_events_and_an_image_url(
    rich_server: LiveServer, node_clients: Path
) -> None:
    step = agui_say(rich_server, node_clients, "chart sales")
    types = step["types"]
    progress = [e for e in step["events"] if e["type"] == "CUSTOM" and e["name"] == "tool_call_progress"]
    assert 2 <= len(progress) <= STEPS and progress[-1]["value"]["progress"] == STEPS
    assert progress[-1]["value"]["total"] == STEPS and progress[0]["value"]["message"] == "drawing sales"
    first_progress = types.index("CUSTOM")
    assert types.index("TOOL_CALL_END") < first_progress < types.index("TOOL_CALL_RESULT")
    (result,) = [e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT"]
    body = json.loads(result["content"])
    assert body["value"] == {"metric": "sales", "points": 8}
    text, image = body["content"]
    assert text == {"type": "text", "text": "sales: 8 points, rising"}
    check_image_ref(rich_server, image)
    assert len(result["content"]) < 2_000  # a reference, not the picture
    # The client's own record of the conversation holds the same reference.
    (tool_message,) = [m for m in step["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"])["content"][1]["url"] == image["url"]


def test_ag_ui_client_gets_a_generator_tools_partial_results(
    rich_server: LiveServer, node_clients: Path
) -> None:
    step = agui_say(rich_server, node_clients, "scan 4")
    progress = [e["value"] for e in step["events"] if e["type"] == "CUSTOM"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 4]
    assert json.loads(progress[1]["message"]) == {"scanned": 2, "of": 4}
    assert progress[1]["partial"] == {"scanned": 2, "of": 4}  # the value itself too
    (result,) = [e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"])["value"] == {"scanned": 4, "of": 4}


def test_ai_sdk_chat_gets_progress_parts_and_an_image_url(
    rich_server: LiveServer, node_clients: Path
) -> None:
    step = ai_sdk_say(rich_server, node_clients, "chart revenue")
    progress = [p for p in step["data"] if p["type"] == "data-tool-progress"]
    assert 2 <= len(progress) <= STEPS and progress[-1]["data"]["progress"] == STEPS
    assert all(p["id"] == progress[0]["id"] for p in progress)  # one part per call, updated in place
    assert progress[0]["data"]["message"] == "drawing revenue"
    (message,) = [m for m in step["messages"] if m["role"] == "assistant"]
    (part,) = [p for p in message["parts"] if p["type"] == "tool-chart"]
    assert part["state"] == "output-available" and part["input"] == {"metric": "revenue"}
    assert part["output"]["value"] == {"metric": "revenue", "points": 8}
    text, image = part["output"]["content"]
    assert text["text"] == "revenue: 8 points, rising"
    check_image_ref(rich_server, image)
    # transient: progress is never kept in the message
    assert not any(p["type"].startswith("data-") for p in message["parts"])
    assert "base64" not in "".join(step["bodies"]) and sum(map(len, step["bodies"])) < 20_000


def test_ai_sdk_chat_gets_a_generator_tools_partial_results(
    rich_server: LiveServer, node_clients: Path
) -> None:
    step = ai_sdk_say(rich_server, node_clients, "scan 3")
    progress = [p["data"] for p in step["data"] if p["type"] == "data-tool-progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert json.loads(progress[-1]["message"]) == {"scanned": 3, "of": 3}
    # Each partial result is also the call's preliminary output (the AI SDK's own way to show a result
    # while it grows): the chat holds the tool part with it, then the final output replaces it.
    shown = [p for p in step["preliminary"] if p["toolCallId"] == progress[0]["call_id"]]
    assert shown and all(p["state"] == "output-available" and p["type"] == "tool-scan" for p in shown)
    assert shown[0]["output"] == {"status": "running", "value": {"scanned": 1, "of": 3}}
    assert {p["output"]["value"]["scanned"] for p in shown} == {1, 2, 3}
    assert "partial" not in progress[0]  # the value travels once, as the output
    body = "".join(step["bodies"])
    assert body.index('"preliminary":true') < body.index('"output":{"status":"ok"')
    (message,) = [m for m in step["messages"] if m["role"] == "assistant"]
    (part,) = [p for p in message["parts"] if p["type"] == "tool-scan"]
    assert part["state"] == "output-available" and part["output"]["value"] == {"scanned": 3, "of": 3}
    assert part["output"]["status"] == "ok" and "preliminary" not in part  # final, not preliminary
