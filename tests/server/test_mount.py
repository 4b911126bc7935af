"""An App inside a team's own FastAPI app: `mount(host, app, prefix=..., user=their_dependency)`. The
host's auth (a header the team's dependency reads) replaces toolrun's tokens on every door: the page,
the chat API (JSON and SSE), AG-UI, the AI SDK stream, tools, approvals, the panel and `/mcp`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header, HTTPException

from toolrun.server import mount
from toolrun.server.migrate import upgrade

from .conftest import sqlite_settings
from .own_app.notes_app import app as notes
from .test_own_app import NOTE_TOOLS, mcp_names_and_call, result_of, sse, uvicorn_serving

ACCOUNTS = {"ada": ("member",), "root": ("admin", "member")}


def host_app(seen: list[str]) -> FastAPI:
    """The team's app: its own routes, its own auth (an `X-User` header checked against its accounts)."""
    host = FastAPI()

    async def account(x_user: str | None = Header(default=None)) -> str:
        if x_user not in ACCOUNTS:
            raise HTTPException(401, "who are you?")
        seen.append(x_user)
        return x_user

    async def current_user(name: str = Depends(account)) -> tuple[str, tuple[str, ...]]:
        return f"acct-{name}", ACCOUNTS[name]

    @host.get("/hello")
    async def hello(name: str = Depends(account)) -> dict[str, str]:
        return {"hello": name}

    host.state.current_user = current_user
    return host


async def test_the_app_mounted_in_a_host_with_the_hosts_auth(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path)
    await upgrade(settings.database_url, app=notes)
    seen: list[str] = []
    host = host_app(seen)
    mounted = mount(host, notes, prefix="/assistant", user=host.state.current_user, settings=settings)
    ada = {"X-User": "ada"}
    async with host.router.lifespan_context(host):
        transport = httpx.ASGITransport(app=host)
        async with httpx.AsyncClient(transport=transport, base_url="http://host", headers=ada) as http:
            assert (await http.get("/hello")).json() == {"hello": "ada"}  # the host's own routes stay
            assert (await http.get("/assistant/api/v1/app")).json()["title"] == "Notes"
            page = await http.get("/assistant/")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            # The page's files and its API calls are under the host's prefix, not the site's root.
            assert 'src="/assistant/static/app.js"' in page.text and 'data-root="/assistant"' in page.text
            assert "<title>Notes</title>" in page.text
            script = await http.get("/assistant/static/app.js")
            assert script.status_code == 200 and "javascript" in script.headers["content-type"]
            me = (await http.get("/assistant/api/v1/me")).json()
            assert me["user_id"] == "acct-ada" and me["roles"] == ["member"]

            added = (
                await http.post("/assistant/api/v1/chat", json={"message": '/add_note {"text": "hi"}'})
            ).json()
            note = result_of(added, "add_note")
            stream = sse(
                (await http.post("/assistant/api/v1/chat/stream", json={"message": "/list_notes"})).text
            )
            assert [d["result"] for n, d in stream if n == "tool_call_finished"] == [{"notes": [note]}]
            body = {
                "threadId": "t",
                "runId": "r",
                "messages": [{"id": "m", "role": "user", "content": "/list_notes"}],
            }
            ag = [d for _, d in sse((await http.post("/assistant/api/v1/ag-ui", json=body)).text)]
            assert [json.loads(e["content"])["value"] for e in ag if e["type"] == "TOOL_CALL_RESULT"] == [
                {"notes": [note]}
            ]
            user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "/list_notes"}]}
            ai = await http.post(
                "/assistant/api/v1/ai-sdk", json={"id": "c", "messages": [user], "trigger": "submit-message"}
            )
            assert [
                p["output"]["value"] for _, p in sse(ai.text) if p["type"] == "tool-output-available"
            ] == [{"notes": [note]}]
            tools = (await http.get("/assistant/api/v1/tools", params={"format": "mcp"})).json()["tools"]
            assert {t["name"] for t in tools} == NOTE_TOOLS

            asked = (
                await http.post(
                    "/assistant/api/v1/chat", json={"message": f'/delete_note {{"note_id": "{note["id"]}"}}'}
                )
            ).json()
            cid = asked["pending"][0]["confirmation_id"]
            other = await http.post(
                f"/assistant/api/v1/confirmations/{cid}", json={"approve": True}, headers={"X-User": "root"}
            )
            assert other.status_code == 404  # another account of the host's cannot decide it
            assert (
                await http.post(f"/assistant/api/v1/confirmations/{cid}", json={"approve": True})
            ).status_code == 200
            assert (await http.get("/assistant/api/v1/app/panel")).json()["value"] == {"notes": []}

            # the host's auth, not toolrun's tokens: no header (or a toolrun token alone) is refused
            _, token = await mounted.state.toolrun.users.add("eve")
            for headers in (
                {"X-User": ""},
                {"X-User": "mallory"},
                {"X-User": "", "Authorization": f"Bearer {token}"},
            ):
                refused = await http.get("/assistant/api/v1/app/panel", headers=headers)
                assert refused.status_code == 401, headers
            assert (
                await http.post("/assistant/api/v1/chat", json={"message": "hi"}, headers={"X-User": ""})
            ).status_code == 401

        async with uvicorn_serving(host) as base:
            await http_ok(base)
            names, value = await mcp_names_and_call(f"{base}/assistant/mcp", {"X-User": "ada"}, "list_notes")
            assert names == NOTE_TOOLS and value == {"notes": []}
            refused = await _mcp_status(f"{base}/assistant/mcp", {"X-User": "mallory"})
            assert refused == 401
    assert "ada" in seen and "root" in seen


async def http_ok(base: str) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"X-User": "ada"}) as http:
        assert (await http.get("/assistant/api/v1/app")).status_code == 200


async def _mcp_status(url: str, headers: dict[str, str]) -> int:
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    async with httpx.AsyncClient() as http:
        r = await http.post(
            url, json=body, headers={**headers, "Accept": "application/json, text/event-stream"}
        )
    return r.status_code


def test_mount_refuses_a_bad_prefix() -> None:
    with pytest.raises(ValueError, match="must start with '/'"):
        mount(FastAPI(), notes, prefix="assistant/", user=lambda: None)
