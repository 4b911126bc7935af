"""The HTTP API over ASGI: chat, confirmations, conversations, tasks, tools, errors, isolation of users."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Service, tool_result


async def test_chat_creates_a_task_and_answers_with_the_conversation(service: Service) -> None:
    r = await service.alice.chat("add Buy milk !high due 2026-12-01 #home")
    assert r["status"] == "completed"
    assert r["model"] == {"name": "demo", "demo": True}
    assert [m["role"] for m in r["messages"]] == ["user", "assistant", "tool", "assistant"]
    call = r["messages"][1]["tool_calls"][0]
    assert call["name"] == "create_task"
    assert call["arguments"] == {
        "title": "Buy milk",
        "priority": "high",
        "eta": "2026-12-01",
        "tags": ["home"],
    }
    task = tool_result(r, "create_task")
    assert task["status"] == "pending" and task["eta"] == "2026-12-01T00:00:00Z"
    assert r["output"] == f"Created {task['id']}: Buy milk (pending, high, due 2026-12-01, #home)."
    assert r["pending"] == []
    again = await service.alice.chat("list tasks", r["conversation_id"])
    assert again["conversation_id"] == r["conversation_id"]
    assert len(again["messages"]) == 8
    assert [m["seq"] for m in again["messages"]] == list(range(8))


async def test_delete_waits_for_approval_and_runs_once(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Old thing"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    assert r["status"] == "awaiting_confirmation"
    [pending] = r["pending"]
    assert pending["tool"] == "delete_task"
    assert pending["arguments"] == {"task_id": task["id"]}
    assert pending["run_id"] == r["run_id"] and pending["conversation_id"] == r["conversation_id"]
    assert pending["expires_at"].endswith("Z")
    listed = (await a.http.get("/api/v1/confirmations")).json()["pending"]
    assert listed == [pending]
    assert (await a.http.get("/api/v1/tasks")).json()["total"] == 1  # nothing ran yet

    done = await a.decide(pending["confirmation_id"], True)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["status"] == "completed" and body["run_id"] == r["run_id"]
    assert body["output"] == f"Deleted task {task['id']} (Old thing)."
    assert body["pending"] == []
    assert (await a.http.get("/api/v1/tasks")).json()["total"] == 0
    assert (await a.http.get("/api/v1/confirmations")).json()["pending"] == []

    replay = await a.decide(pending["confirmation_id"], True)
    assert replay.status_code == 404
    assert replay.headers["content-type"] == "application/problem+json"
    # the tool ran exactly once: one approved call in the audit trail
    await service.state.audit.flush()
    async with service.state.engine.connect() as conn:
        from sqlalchemy import text

        rows = (
            await conn.execute(
                text("SELECT outcome FROM toolrun_audit WHERE tool = 'delete_task' AND action = 'approve'")
            )
        ).all()
    assert [r[0] for r in rows] == ["ok"]


async def test_denial_never_runs_the_tool(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Keep me"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    denied = await a.decide(r["pending"][0]["confirmation_id"], False)
    assert denied.status_code == 200
    assert denied.json()["status"] == "completed"
    assert denied.json()["output"] == "OK, I did not do it."
    assert (await a.http.get("/api/v1/tasks")).json()["tasks"][0]["id"] == task["id"]


@pytest.mark.parametrize("value", ["true", 1, 0, "yes", None, [], {}])
async def test_approve_takes_only_json_booleans(service: Service, value: Any) -> None:
    r = await service.alice.http.post("/api/v1/confirmations/conf_x", json={"approve": value})
    assert r.status_code == 422
    problem = r.json()
    assert r.headers["content-type"] == "application/problem+json"
    assert problem["errors"][0]["path"] == "body.approve"
    assert problem["status"] == 422 and problem["code"] == "invalid_request"


async def test_unknown_fields_and_wrong_types_name_the_field(service: Service) -> None:
    http = service.alice.http
    r = await http.post("/api/v1/chat", json={"message": 42})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "body.message"
    r = await http.post("/api/v1/chat", json={"message": "hi", "extra": 1})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "body.extra"
    r = await http.post("/api/v1/chat", json={"message": ""})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "body.message"
    r = await http.post(
        "/api/v1/chat", content=b'{"message": "hi"', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"] == "The request body is not valid JSON."
    r = await http.get("/api/v1/tasks", params={"limit": 0})
    assert r.status_code == 422 and r.json()["errors"][0]["path"] == "query.limit"


async def test_a_body_json_cannot_read_is_invalid_json_not_a_bare_400(service: Service) -> None:
    # Found by schemathesis's full check set: FastAPI answers bytes it cannot decode with its own 400.
    for path in ("/api/v1/chat", "/api/v1/chat/stream", "/api/v1/ai-sdk", "/api/v1/confirmations/conf_x"):
        r = await service.alice.http.post(
            path, content=b'{"message": "\xff\xfe"}', headers={"content-type": "application/json"}
        )
        assert r.status_code == 422, path
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert body["code"] == "invalid_request" and body["errors"][0]["type"] == "json_invalid"
        assert body["detail"] == "The request body is not valid JSON (it is not UTF-8 text)."
    deep = b'{"message": "hi", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = await service.alice.http.post(
        "/api/v1/chat", content=deep, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["detail"] == "The request body is not valid JSON (it is nested too deeply)."


async def test_task_date_filters_take_iso_8601_only(service: Service) -> None:
    http = service.alice.http
    # Pydantic alone reads numbers as Unix times; the last one is year 0 in UTC (it once was a 500).
    for value in ("0.5", "1700000000", "soon", "2026-13-01", "0001-01-01T00:30:00+01:00"):
        r = await http.get("/api/v1/tasks", params={"due_before": value})
        assert r.status_code == 422, value
        assert r.json()["errors"][0]["path"] == "query.due_before"
    for value, expected in (
        ("2026-12-10", "2026-12-10T00:00:00Z"),
        ("2026-12-10T17:30:00+02:00", "2026-12-10T15:30:00Z"),
        ("2026-12-10T17:30:00z", "2026-12-10T17:30:00Z"),
        ("20261210", "2026-12-10T00:00:00Z"),
        ("0999-12-31", "0999-12-31T00:00:00Z"),
    ):
        r = await http.get("/api/v1/tasks", params={"due_after": value})
        assert r.status_code == 200, value
        assert r.json()["applied_filters"]["due_after"] == expected


async def test_bodies_over_the_limit_get_413(service: Service) -> None:
    big = json.dumps({"message": "x" * (10 * 1024 * 1024)})
    r = await service.alice.http.post(
        "/api/v1/chat", content=big, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["code"] == "payload_too_large"

    async def chunks() -> Any:  # no content-length: counted while read
        for _ in range(11):
            yield b"x" * (1024 * 1024)

    r = await service.alice.http.post(
        "/api/v1/chat", content=chunks(), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413


async def test_unknown_routes_and_methods_are_problems(service: Service) -> None:
    r = await service.alice.http.get("/api/v1/nothing-here")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    r = await service.alice.http.put("/api/v1/chat", json={})
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"
    assert r.headers["allow"] == "POST"
    # One path, three routes (GET, PATCH, DELETE): `Allow` names all, not only the first route that matched.
    r = await service.alice.http.request("OPTIONS", "/api/v1/conversations/conv_x")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, PATCH, DELETE"


async def test_every_get_route_answers_head_without_a_body(service: Service) -> None:
    http = service.alice.http
    for path in ("/healthz", "/readyz", "/", "/api/v1/me", "/api/v1/tasks", "/api/v1/tools"):
        got, head = await http.get(path), await http.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"", path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.headers["content-length"] == got.headers["content-length"], path
        assert head.headers["x-request-id"].startswith("req_")
    r = await http.head("/api/v1/tasks", headers={"Authorization": "Bearer trk_nope"})
    assert r.status_code == 401 and r.content == b""
    r = await http.head("/api/v1/chat")  # a POST route: still not HEAD
    assert r.status_code == 405 and r.headers["allow"] == "POST"


async def test_tokens_are_required_and_revocable(service: Service) -> None:
    http = service.alice.http
    r = await http.get("/api/v1/me", headers={"Authorization": "Bearer trk_nope"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = await http.get("/api/v1/me", headers={"Authorization": ""})
    assert r.status_code == 401
    me = (await http.get("/api/v1/me")).json()
    assert me["name"] == "alice" and me["model"]["demo"] is True
    assert await service.state.users.revoke("alice") == 1
    assert (await http.get("/api/v1/me")).status_code == 401


async def test_a_disabled_users_live_token_is_refused(service: Service) -> None:
    """A user disabled in the database (their token not revoked) is signed out at the next request."""

    from toolrun.server._db import users

    http = service.alice.http
    assert (await http.get("/api/v1/me")).status_code == 200
    state = service.state
    async with state.engine.begin() as conn:
        await conn.execute(users.update().where(users.c.name == "alice").values(disabled=True))
    state.users._cache.clear()  # what a disable through the store does (`revoke`)
    assert (await http.get("/api/v1/me")).status_code == 401
    assert (await service.bob.http.get("/api/v1/me")).status_code == 200


async def test_another_users_ids_answer_like_missing_ones(service: Service) -> None:
    a, b = service.alice, service.bob
    task = tool_result(await a.chat("add Secret plan"), "create_task")
    paused = await a.chat(f"delete {task['id']}")
    conv, conf = paused["conversation_id"], paused["pending"][0]["confirmation_id"]

    def same(x: Any, y: Any) -> None:
        assert x.status_code == y.status_code == 404
        bx, by = x.json(), y.json()
        bx.pop("request_id"), by.pop("request_id")
        assert bx == by

    same(
        await b.http.get(f"/api/v1/conversations/{conv}"),
        await b.http.get("/api/v1/conversations/conv_missing"),
    )
    same(
        await b.http.delete(f"/api/v1/conversations/{conv}"),
        await b.http.delete("/api/v1/conversations/nope"),
    )
    same(await b.decide(conf, True), await b.decide("conf_missing", True))
    same(
        await b.http.post(f"/api/v1/confirmations/{conf}/stream", json={"approve": True}),
        await b.http.post("/api/v1/confirmations/conf_missing/stream", json={"approve": True}),
    )
    r1 = await b.http.post("/api/v1/chat", json={"message": "list", "conversation_id": conv})
    r2 = await b.http.post("/api/v1/chat", json={"message": "list", "conversation_id": "conv_missing"})
    same(r1, r2)
    assert (await b.http.get("/api/v1/confirmations")).json()["pending"] == []
    assert (await b.http.get("/api/v1/conversations")).json()["conversations"] == []
    assert (await b.http.get("/api/v1/tasks")).json()["total"] == 0

    # every tool, with alice's ids, from bob's chat: NOT_FOUND exactly like an unknown id
    att = tool_result(await a.chat(f"attach https://github.com/o/r/pull/1 to {task['id']}"), "add_attachment")
    for theirs, missing in [
        (f"done {task['id']}", "done task_000000000000"),
        (f"attachments {task['id']}", "attachments task_000000000000"),
        (f"attach https://example.com to {task['id']}", "attach https://example.com to task_000000000000"),
        (f"refresh {att['id']}", "refresh att_000000000000"),
    ]:
        x = (await b.chat(theirs))["output"]
        y = (await b.chat(missing))["output"]
        assert x.replace(task["id"], "ID").replace(att["id"], "ID") == y.replace(
            "task_000000000000", "ID"
        ).replace("att_000000000000", "ID")
        assert "NOT_FOUND" in x
    for theirs in [
        f"delete {task['id']}",
        f"detach {att['id']}",
    ]:  # destructive: held, then NOT_FOUND on approval
        held = await b.chat(theirs)
        done = (await b.decide(held["pending"][0]["confirmation_id"], True)).json()
        assert "NOT_FOUND" in done["output"]
    # and alice still has everything
    assert (await a.http.get("/api/v1/tasks", params={"format": "detailed"})).json()["tasks"][0][
        "attachments"
    ]
    assert (await a.decide(conf, False)).status_code == 200


async def test_a_paused_conversation_refuses_new_messages_until_decided(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add X"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    busy = await a.http.post(
        "/api/v1/chat", json={"message": "list", "conversation_id": r["conversation_id"]}
    )
    assert busy.status_code == 409 and busy.json()["code"] == "confirmation_pending"
    await a.decide(r["pending"][0]["confirmation_id"], False)
    assert (await a.chat("list", r["conversation_id"]))["status"] == "completed"


async def test_conversations_list_get_delete(service: Service) -> None:
    a = service.alice
    first = await a.chat("add One")
    second = await a.chat("add Two")
    listed = (await a.http.get("/api/v1/conversations")).json()["conversations"]
    assert [c["id"] for c in listed] == [second["conversation_id"], first["conversation_id"]]
    assert listed[0]["title"] == "Add Two"
    detail = (await a.http.get(f"/api/v1/conversations/{first['conversation_id']}")).json()
    assert detail["messages"] == first["messages"]
    assert detail["last_run"] == {"run_id": first["run_id"], "status": "completed"}
    r = await a.http.delete(f"/api/v1/conversations/{first['conversation_id']}")
    assert r.status_code == 204
    assert (await a.http.get(f"/api/v1/conversations/{first['conversation_id']}")).status_code == 404


async def test_tasks_endpoint_filters_sorts_and_searches(service: Service) -> None:
    a = service.alice
    await a.chat("add Renew passport !critical due 2026-12-20 #admin")
    await a.chat("add Buy oat milk !low due 2026-12-01 #home #shop")
    await a.chat("add Call the plumber about the sink #home")
    http = a.http
    titles = [t["title"] for t in (await http.get("/api/v1/tasks")).json()["tasks"]]
    assert titles == ["Buy oat milk", "Renew passport", "Call the plumber about the sink"]  # undated last
    r = (await http.get("/api/v1/tasks", params={"sort": "priority_desc"})).json()
    assert r["tasks"][0]["title"] == "Renew passport"
    r = (await http.get("/api/v1/tasks", params={"tags": ["home", "shop"]})).json()
    assert [t["title"] for t in r["tasks"]] == ["Buy oat milk"] and r["applied_filters"]["tags"] == [
        "home",
        "shop",
    ]
    r = (await http.get("/api/v1/tasks", params={"text": "plumb"})).json()
    assert [t["title"] for t in r["tasks"]] == ["Call the plumber about the sink"]
    r = (await http.get("/api/v1/tasks", params={"text": 'milk"* ('})).json()  # no query syntax injection
    assert [t["title"] for t in r["tasks"]] == ["Buy oat milk"]
    r = (await http.get("/api/v1/tasks", params={"due_before": "2026-12-10"})).json()
    assert [t["title"] for t in r["tasks"]] == ["Buy oat milk"]
    r = (await http.get("/api/v1/tasks", params={"format": "concise", "limit": 1})).json()
    assert r["total"] == 3 and set(r["tasks"][0]) <= {
        "id",
        "status",
        "title",
        "description",
        "priority",
        "eta",
        "tags",
        "created_at",
        "updated_at",
        "attachments",
    }
    assert r["tasks"][0]["title"] is None
    bad = await http.get("/api/v1/tasks", params={"due_before": "soon"})
    assert bad.status_code == 422


async def test_tools_endpoint_exports_every_format(service: Service) -> None:
    for fmt in ("openai", "openai-responses", "anthropic", "gemini", "mcp"):
        r = await service.alice.http.get("/api/v1/tools", params={"format": fmt})
        assert r.status_code == 200
        assert len(r.json()["tools"]) == 9
    assert (await service.alice.http.get("/api/v1/tools", params={"format": "cobol"})).status_code == 422


async def test_health_ready_metrics(service: Service) -> None:
    http = service.alice.http
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    assert (await http.get("/readyz")).json() == {"status": "ok"}
    await service.alice.chat("add Count me")
    service.state.settings.metrics_public = True
    text = (await http.get("/metrics")).text
    assert 'toolrun_runs_total{status="completed"} 1.0' in text
    assert 'toolrun_tool_calls_total{outcome="ok",tool="create_task"} 1.0' in text
    assert 'toolrun_http_requests_total{method="POST",route="/api/v1/chat",status="200"} 1.0' in text
    assert "toolrun_http_request_duration_seconds_bucket" in text


async def test_an_expired_confirmation_no_longer_blocks_the_conversation(tmp_path: Any) -> None:
    import asyncio

    from .conftest import make_service, sqlite_settings

    async for service in make_service(sqlite_settings(tmp_path, confirmation_ttl=0.3)):
        a = service.alice
        task = tool_result(await a.chat("add Linger"), "create_task")
        paused = await a.chat(
            f"delete {task['id']}",
        )
        conv = paused["conversation_id"]
        busy = await a.http.post("/api/v1/chat", json={"message": "list", "conversation_id": conv})
        assert busy.status_code == 409 and busy.json()["code"] == "confirmation_pending"
        await asyncio.sleep(0.4)
        assert (await a.http.get("/api/v1/confirmations")).json()["pending"] == []
        after = await a.chat("list", conv)
        assert after["status"] == "completed" and task["id"] in after["output"]  # it was never deleted
        roles = [m["role"] for m in after["messages"]][len(paused["messages"]) :]
        assert roles == ["tool", "user", "assistant", "tool", "assistant"]
        held = after["messages"][len(paused["messages"])]
        assert held["role"] == "tool" and held["is_error"] and "CONFIRMATION_EXPIRED" in held["content"]
        detail = (await a.http.get(f"/api/v1/conversations/{conv}")).json()
        assert detail["awaiting_confirmation"] is False
        late = await a.decide(paused["pending"][0]["confirmation_id"], True)
        assert late.status_code == 404


async def test_conversations_get_short_clean_titles_and_are_renamed(service: Service) -> None:
    a = service.alice
    long = await a.chat(
        "**Please** add a task: renew my [passport](https://example.com) before the trip to Lisbon next month"
    )
    cid = long["conversation_id"]
    listed = (await a.http.get("/api/v1/conversations")).json()["conversations"]
    assert listed[0]["title"] == "Please add a task: renew my passport…"  # words, no markdown, cut at a word

    r = await a.http.patch(f"/api/v1/conversations/{cid}", json={"title": "  Lisbon   passport "})
    assert r.status_code == 200, r.text
    assert r.json()["title"] == "Lisbon passport" and r.json()["id"] == cid
    detail = (await a.http.get(f"/api/v1/conversations/{cid}")).json()
    assert detail["title"] == "Lisbon passport"
    for bad in ("", "   ", "a\x00b", "a\u202eb", "x" * 121):
        r = await a.http.patch(f"/api/v1/conversations/{cid}", json={"title": bad})
        assert r.status_code == 422, (bad, r.text)
    assert (
        await a.http.patch(f"/api/v1/conversations/{cid}", json={"title": "x", "extra": 1})
    ).status_code == 422
    assert (
        await service.bob.http.patch(f"/api/v1/conversations/{cid}", json={"title": "mine"})
    ).status_code == 404
    assert (await a.http.patch("/api/v1/conversations/conv_nope", json={"title": "x"})).status_code == 404
    assert (await a.http.get(f"/api/v1/conversations/{cid}")).json()["title"] == "Lisbon passport"
