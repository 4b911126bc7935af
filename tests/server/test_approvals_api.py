"""Approvals 2.0 through the HTTP API: the preview on every pending item (chat, list, SSE), edit then
approve (previewed first, 422 for a bad edit), a denial's reason reaching the model, standing approval
rules (listed, revocable, audited with their id, only for the user's own tools and calls)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from .conftest import Service, tool_result


def _in(days: float) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat()


def _tool_messages(body: dict[str, Any], tool: str) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool" and m["tool_name"] == tool]


async def test_every_pending_item_carries_the_preview_from_the_task_store(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Renew passport due 2026-12-01"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    [pending] = r["pending"]
    expected = "Delete the task 'Renew passport' (due 1 Dec 2026), permanently."
    assert pending["preview"] == expected
    assert task["id"] in pending["summary"]  # the plain summary stays, for the details
    assert (await a.http.get("/api/v1/confirmations")).json()["pending"][0]["preview"] == expected
    conversation = (await a.http.get(f"/api/v1/conversations/{r['conversation_id']}")).json()
    assert conversation["pending"][0]["preview"] == expected
    await a.decide(pending["confirmation_id"], False)
    async with a.http.stream("POST", "/api/v1/chat/stream", json={"message": f"delete {task['id']}"}) as s:
        lines = [line async for line in s.aiter_lines()]
    events = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    asked = [e for e in events if e.get("confirmation_id")]
    assert asked and asked[0]["preview"] == expected


async def test_edit_then_approve_previews_validates_and_runs_the_edited_call_once(service: Service) -> None:
    a = service.alice
    keep = tool_result(await a.chat("add Keep me"), "create_task")
    drop = tool_result(await a.chat("add Drop me"), "create_task")
    r = await a.chat(f"delete {keep['id']}")
    cid = r["pending"][0]["confirmation_id"]

    bad = await a.http.post(f"/api/v1/confirmations/{cid}/preview", json={"arguments": {"task_id": 5}})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
    seen = await a.http.post(
        f"/api/v1/confirmations/{cid}/preview", json={"arguments": {"task_id": drop["id"]}}
    )
    assert seen.status_code == 200, seen.text
    assert seen.json()["preview"] == "Delete the task 'Drop me' (no due date), permanently."
    assert seen.json()["changes"] == [f'task_id: "{keep["id"]}" → "{drop["id"]}"']
    theirs = await service.bob.http.post(f"/api/v1/confirmations/{cid}/preview", json={"arguments": {}})
    assert theirs.status_code == 404

    refused = await a.http.post(f"/api/v1/confirmations/{cid}", json={"approve": True, "arguments": {}})
    assert refused.status_code == 422  # task_id missing: nothing decided
    done = await a.http.post(
        f"/api/v1/confirmations/{cid}", json={"approve": True, "arguments": {"task_id": drop["id"]}}
    )
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["status"] == "completed"
    [told] = _tool_messages(body, "delete_task")
    assert "The user changed the arguments before approving" in told and drop["id"] in told
    left = [t["id"] for t in (await a.http.get("/api/v1/tasks")).json()["tasks"]]
    assert left == [keep["id"]]
    assert (await a.http.post(f"/api/v1/confirmations/{cid}", json={"approve": True})).status_code == 404


async def test_a_denial_reason_reaches_the_model(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Keep me"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    cid = r["pending"][0]["confirmation_id"]
    denied = await a.http.post(
        f"/api/v1/confirmations/{cid}", json={"approve": False, "reason": "I still need it"}
    )
    assert denied.status_code == 200
    [told] = _tool_messages(denied.json(), "delete_task")
    assert "The user said: I still need it" in told


async def test_standing_rules_decide_listed_calls_are_audited_and_revocable(service: Service) -> None:
    a, b = service.alice, service.bob
    first = tool_result(await a.chat("add One"), "create_task")
    second = tool_result(await a.chat("add Two"), "create_task")
    made = await a.http.post(
        "/api/v1/approval-rules",
        json={"tool": "delete_task", "expires_at": _in(30), "note": "tidying is fine"},
    )
    assert made.status_code == 201, made.text
    rule = made.json()
    assert rule["tool"] == "delete_task" and rule["decision"] == "allow" and rule["expired"] is False

    r = await a.chat(f"delete {first['id']}")
    assert r["status"] == "completed" and r["pending"] == []  # no question asked
    await service.state.audit.flush()
    async with service.state.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.text("SELECT outcome, rule_id, user_id FROM toolrun_audit WHERE tool = 'delete_task'")
            )
        ).all()
    assert [tuple(row) for row in rows] == [("ok", rule["id"], a.user_id)]

    assert (await b.http.get("/api/v1/approval-rules")).json()["rules"] == []  # Bob sees none of it
    assert (await b.http.delete(f"/api/v1/approval-rules/{rule['id']}")).status_code == 404
    bob_task = tool_result(await b.chat("add Bob's"), "create_task")
    assert (await b.chat(f"delete {bob_task['id']}"))["status"] == "awaiting_confirmation"

    assert [x["id"] for x in (await a.http.get("/api/v1/approval-rules")).json()["rules"]] == [rule["id"]]
    assert (await a.http.delete(f"/api/v1/approval-rules/{rule['id']}")).status_code == 204
    assert (await a.chat(f"delete {second['id']}"))["status"] == "awaiting_confirmation"


async def test_deny_rules_and_argument_constraints(service: Service) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Precious"), "create_task")
    other = tool_result(await a.chat("add Other"), "create_task")
    made = await a.http.post(
        "/api/v1/approval-rules",
        json={
            "tool": "delete_task",
            "decision": "deny",
            "arguments": {"task_id": task["id"]},
            "expires_at": _in(1),
        },
    )
    assert made.status_code == 201
    r = await a.chat(f"delete {task['id']}")
    assert r["status"] == "completed" and r["pending"] == []
    [told] = _tool_messages(r, "delete_task")
    assert "standing rule to refuse" in told
    assert (await a.chat(f"delete {other['id']}"))["status"] == "awaiting_confirmation"


async def test_rules_are_refused_for_tools_that_never_ask_and_bad_expiries(service: Service) -> None:
    a = service.alice
    unknown = await a.http.post("/api/v1/approval-rules", json={"tool": "no_such_tool", "expires_at": _in(1)})
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_tool")
    for body, code in [
        ({"tool": "create_task", "expires_at": _in(1)}, "no_confirmation"),
        ({"tool": "delete_task", "expires_at": _in(-1)}, "invalid_expiry"),
        ({"tool": "delete_task", "expires_at": _in(400)}, "invalid_expiry"),
        ({"tool": "delete_task", "expires_at": _in(1), "arguments": {"nope": 1}}, "unknown_argument"),
    ]:
        r = await a.http.post("/api/v1/approval-rules", json=body)
        assert (r.status_code, r.json()["code"]) == (422, code), body
    missing = await a.http.post("/api/v1/approval-rules", json={"tool": "delete_task"})
    assert missing.status_code == 422 and missing.json()["errors"][0]["path"] == "body.expires_at"


def _raw(body: str) -> dict[str, Any]:
    """A request whose JSON text is sent as written (escapes such as a lone `\\ud800` included)."""
    return {"content": body.encode(), "headers": {"content-type": "application/json"}}


async def test_a_rule_with_text_that_is_not_unicode_is_refused_and_nothing_is_stored(
    service: Service,
) -> None:
    a = service.alice
    for body, where in [
        ('{"tool":"delete_task","arguments":{"task_id":"x\\ud800"}', "task_id is not valid Unicode"),
        ('{"tool":"delete_task","arguments":{"task_id":"x\\u0000"}', "task_id holds a NUL"),
        ('{"tool":"delete_task","note":"\\udfff"', "The text is not valid Unicode"),
    ]:
        r = await a.http.post("/api/v1/approval-rules", **_raw(body + f',"expires_at":"{_in(1)}"}}'))
        assert r.status_code == 422, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert where in r.json()["detail"], r.json()
    listed = await a.http.get("/api/v1/approval-rules")
    assert listed.status_code == 200 and listed.json()["rules"] == []


async def test_edited_arguments_that_are_not_unicode_are_refused_and_never_reach_the_tool(
    service: Service,
) -> None:
    a = service.alice
    task = tool_result(await a.chat("add Keep me"), "create_task")
    r = await a.chat(f"delete {task['id']}")
    cid = r["pending"][0]["confirmation_id"]
    edited = '{"task_id":"' + task["id"] + '\\ud800"}'
    preview = await a.http.post(f"/api/v1/confirmations/{cid}/preview", **_raw(f'{{"arguments":{edited}}}'))
    assert preview.status_code == 422, preview.text
    assert "task_id is not valid Unicode: a lone surrogate" in preview.json()["detail"]
    approve = await a.http.post(
        f"/api/v1/confirmations/{cid}", **_raw(f'{{"approve":true,"arguments":{edited}}}')
    )
    assert approve.status_code == 422, approve.text
    # nothing decided, nothing run: the confirmation still waits, the task is still there
    assert [p["confirmation_id"] for p in (await a.http.get("/api/v1/confirmations")).json()["pending"]] == [
        cid
    ]
    assert [t["id"] for t in (await a.http.get("/api/v1/tasks")).json()["tasks"]] == [task["id"]]


async def test_a_rule_stored_with_a_lone_surrogate_still_lists_and_can_be_removed(service: Service) -> None:
    # stored before every door (the HTTP API, the stores' `add`) refused such text
    rules = service.state.executor.approval_rules
    a = service.alice
    async with rules.engine.begin() as conn:
        await conn.execute(
            rules.table.insert().values(
                id="rule_old",
                user_id=a.user_id,
                tool="delete_task",
                decision="allow",
                arguments=json.dumps({"task_id": "x\ud800"}),  # an escape the JSON reads back as it was
                created_at=1.0,
            )
        )
    listed = await a.http.get("/api/v1/approval-rules")
    assert listed.status_code == 200, listed.text
    [shown] = listed.json()["rules"]
    assert (shown["id"], shown["arguments"]) == ("rule_old", {"task_id": "x\ufffd"})
    assert (await a.http.delete("/api/v1/approval-rules/rule_old")).status_code == 204
