"""The page, AG-UI and AI SDK routes over ASGI: headers, the CSP, errors before any stream, and the
server's records deciding (another user's thread, a stored conversation's resent history)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolrun.server.routes.web import CSP

from ..conftest import Service, make_service, sqlite_settings


@pytest.fixture
async def service(tmp_path: Path) -> Any:
    async for s in make_service(sqlite_settings(tmp_path)):
        yield s


def sse(text: str) -> list[Any]:
    return [
        json.loads(line[6:]) if line[6:] != "[DONE]" else "[DONE]"
        for line in text.splitlines()
        if line.startswith("data: ")
    ]


async def test_page_has_a_strict_csp_no_inline_script_and_the_demo_label(service: Service) -> None:
    http = service.alice.http
    page = await http.get("/", headers={"Authorization": ""})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page.text, re.S)
    assert scripts == [""]  # one module script, loaded by src, with no inline body
    assert not re.search(r"\son[a-z]+=", page.text)  # no inline event handlers either
    assert 'data-demo="true"' in page.text and "TOOLRUN_MODEL" in page.text
    for name, kind in [
        ("app.js", "text/javascript"),
        ("view.js", "text/javascript"),
        ("style.css", "text/css"),
    ]:
        asset = await http.get(f"/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert (await http.get("/static/../_app.py")).status_code == 404
    assert (await http.get("/static/secret.txt")).status_code == 404
    view = (await http.get("/static/view.js")).text
    assert "innerHTML" not in view and "insertAdjacentHTML" not in view


async def test_the_csp_in_the_docs_is_the_one_the_page_is_served_with(service: Service) -> None:
    """docs/frontends.md prints the page's policy; it is read from the page and compared, so it cannot
    drift from the header again (it once lacked `blob:` in img-src)."""
    page = (Path(__file__).parents[3] / "docs" / "frontends.md").read_text(encoding="utf-8")
    found = re.search(r"^```\n(Content-Security-Policy:.*?)^```", page, re.M | re.S)
    assert found is not None, "docs/frontends.md no longer shows the page's Content-Security-Policy"
    name, _, value = " ".join(found[1].split()).partition(": ")
    served = await service.alice.http.get("/", headers={"Authorization": ""})
    assert (name, value) == ("Content-Security-Policy", served.headers["content-security-policy"])


async def test_ag_ui_errors_before_any_stream(service: Service) -> None:
    http = service.alice.http
    body = {"threadId": "t", "runId": "r", "messages": []}
    assert (await http.post("/api/v1/ag-ui", json=body, headers={"Authorization": ""})).status_code == 401
    not_json = await http.post(
        "/api/v1/ag-ui", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code in (400, 422)
    bad = await http.post("/api/v1/ag-ui", json={"threadId": "t"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    assert "runId" in bad.text
    # Past the envelope, a broken input is a run that ends with RUN_ERROR (what AG-UI clients expect).
    odd = await http.post("/api/v1/ag-ui", json={**body, "messages": [{"role": "robot"}]})
    assert [e["type"] for e in sse(odd.text)] == ["RUN_STARTED", "RUN_ERROR"]
    assert sse(odd.text)[-1]["code"] == "INVALID_INPUT"


async def test_ag_ui_thread_is_the_users_own_and_resent_history_is_not_answered_twice(
    service: Service,
) -> None:
    said = {"id": "m1", "role": "user", "content": "add Plant tulips"}
    body = {"threadId": "garden", "runId": "r1", "messages": [said]}
    first = sse((await service.alice.http.post("/api/v1/ag-ui", json=body)).text)
    assert [e["type"] for e in first][-1] == "RUN_FINISHED"
    conversation = first[-1]["result"]["conversation_id"]

    again = sse((await service.alice.http.post("/api/v1/ag-ui", json={**body, "runId": "r2"})).text)
    assert [e["type"] for e in again] == ["RUN_STARTED", "RUN_ERROR"] and again[-1][
        "code"
    ] == "ALREADY_ANSWERED"
    tasks = (await service.alice.http.get("/api/v1/tasks")).json()["tasks"]
    assert [t["title"] for t in tasks] == ["Plant tulips"]

    # Bob's thread of the same name is his own; the conversation id itself is nothing to him.
    for thread in ("garden", conversation):
        bobs = sse((await service.bob.http.post("/api/v1/ag-ui", json={**body, "threadId": thread})).text)
        assert bobs[-1]["type"] == "RUN_FINISHED"
        assert bobs[-1]["result"]["conversation_id"] != conversation
    detail = (await service.alice.http.get(f"/api/v1/conversations/{conversation}")).json()
    assert [m["content"] for m in detail["messages"] if m["role"] == "user"] == ["add Plant tulips"]

    # A thread id that is one of Alice's conversations continues it.
    more = {
        "threadId": conversation,
        "runId": "r3",
        "messages": [said, {"id": "m2", "role": "user", "content": "list"}],
    }
    cont = sse((await service.alice.http.post("/api/v1/ag-ui", json=more)).text)
    assert cont[-1]["type"] == "RUN_FINISHED" and cont[-1]["result"]["conversation_id"] == conversation


async def test_ai_sdk_headers_and_strict_approvals(service: Service) -> None:
    http = service.alice.http
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "add Call mum"}]}
    response = await http.post(
        "/api/v1/ai-sdk", json={"id": "chat-1", "messages": [user], "trigger": "submit-message"}
    )
    assert response.status_code == 200
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["content-type"].startswith("text/event-stream")
    parts = sse(response.text)
    assert parts[0]["type"] == "start" and parts[-1] == "[DONE]" and parts[-2]["type"] == "finish"

    part = {"type": "tool-delete_task", "toolCallId": "c", "state": "approval-responded", "input": {},
            "approval": {"id": "conf_x", "approved": "false"}}  # fmt: skip
    loose = {"id": "chat-1", "messages": [user, {"id": "a", "role": "assistant", "parts": [part]}]}
    refused = await http.post("/api/v1/ai-sdk", json=loose)
    assert refused.status_code == 200 and refused.headers["x-vercel-ai-ui-message-stream"] == "v1"
    error = [p for p in sse(refused.text) if p != "[DONE]" and p["type"] == "error"]
    assert "JSON boolean" in error[0]["errorText"]
    regenerate = await http.post(
        "/api/v1/ai-sdk", json={"id": "chat-1", "messages": [user], "trigger": "regenerate-message"}
    )
    assert sse(regenerate.text)[1]["type"] == "error"
    assert len((await http.get("/api/v1/tasks")).json()["tasks"]) == 1
