"""The task tools through the executor: contract, errors with recover actions, user isolation, full-text
search on SQLite FTS5 and PostgreSQL, and `refresh_attachment` against a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from servers import POSTGRES_URL as POSTGRES_ADMIN_URL
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.apps.tasks import GitHubClient, TaskStore, task_tools
from toolrun.server.migrate import upgrade

ALICE = ToolContext(user_id="alice")
BOB = ToolContext(user_id="bob")


class FakeGitHub:
    """A GitHub REST API on 127.0.0.1: `routes[path] = (status, headers, body)`; records the paths asked."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], Any]] = {}
        self.seen: list[str] = []
        self.delay = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.seen.append(self.path)
                if fake.delay:
                    threading.Event().wait(fake.delay)
                status, headers, body = fake.routes.get(self.path, (404, {}, {"message": "Not Found"}))
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.close()


class Tools:
    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor

    async def __call__(self, name: str, ctx: ToolContext = ALICE, **arguments: Any) -> Any:
        result = await self.executor.execute(ToolCall(name=name, arguments=arguments), ctx)
        if result.status == "confirmation_required":
            assert result.confirmation_id is not None
            result = await self.executor.approve(result.confirmation_id, ctx)
        if result.status == "error":
            assert result.error is not None
            return result.error
        return result.value


async def _tools(url: str, github: FakeGitHub | None, **client: Any) -> AsyncIterator[Tools]:
    await upgrade(url)
    engine = create_async_engine(url)
    gh = GitHubClient(github.url if github else "http://127.0.0.1:9", **client)
    executor = ToolExecutor(ToolRegistry(task_tools(TaskStore(engine), gh)), default_timeout=30)
    try:
        yield Tools(executor)
    finally:
        await executor.aclose()
        await gh.aclose()
        await engine.dispose()


@pytest.fixture
async def tools(tmp_path: Path, github: FakeGitHub) -> AsyncIterator[Tools]:
    async for t in _tools(f"sqlite+aiosqlite:///{tmp_path}/t.db", github, timeout=0.5):
        yield t


async def test_create_task_returns_the_contract_fields(tools: Tools) -> None:
    task = await tools(
        "create_task", title="  Renew passport ", priority="high", eta="2026-12-01T17:00:00+01:00"
    )
    assert set(task) == {
        "id", "title", "description", "status", "priority", "eta", "tags", "created_at", "updated_at"
    }  # fmt: skip
    assert task["title"] == "Renew passport" and task["status"] == "pending"
    assert task["eta"] == "2026-12-01T16:00:00Z" and task["tags"] == [] and task["description"] is None
    default = await tools("create_task", title="x")
    assert default["priority"] == "medium" and default["eta"] is None


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"title": ""}, "INVALID_TITLE"),
        ({"title": "   "}, "INVALID_TITLE"),
        ({"title": "x" * 256}, "INVALID_TITLE"),
        ({"title": "ok", "priority": "urgent"}, "INVALID_PRIORITY"),
        ({"title": "ok", "eta": "next tuesday"}, "INVALID_ETA"),
        ({"title": "ok", "eta": "2026-13-45"}, "INVALID_ETA"),
        ({"title": "ok", "eta": "0001-01-01T00:30:00+01:00"}, "INVALID_ETA"),  # year 0 in UTC: overflowed
        ({"title": "ok", "eta": "9999-12-31T23:30:00-01:00"}, "INVALID_ETA"),  # year 10000 in UTC
    ],
)
async def test_create_task_errors_say_what_to_do(tools: Tools, arguments: dict[str, Any], code: str) -> None:
    error = await tools("create_task", **arguments)
    assert error.code == code
    assert error.recover_action


async def test_early_years_keep_the_fixed_width_that_sql_compares(tools: Tools) -> None:
    # ETAs are stored as `YYYY-MM-DDTHH:MM:SSZ` text and compared as text: `%Y` wrote year 999 as "999-...",
    # which sorts after "2026-...".
    old = await tools("create_task", title="Ancient", eta="0999-12-31")
    assert old["eta"] == "0999-12-31T00:00:00Z"
    await tools("create_task", title="Soon", eta="2026-12-01")
    r = await tools("query_tasks", filters={"due_before": "2000-01-01"})
    assert [t["title"] for t in r["tasks"]] == ["Ancient"]
    r = await tools("query_tasks")
    assert [t["title"] for t in r["tasks"]] == ["Ancient", "Soon"]


async def test_update_is_idempotent_and_checks_values(tools: Tools) -> None:
    task = await tools("create_task", title="Draft", tags=["a"])
    once = await tools("update_task", task_id=task["id"], priority="high", tags=["b", "c", "b"])
    twice = await tools("update_task", task_id=task["id"], priority="high", tags=["b", "c", "b"])
    assert once["priority"] == twice["priority"] == "high" and once["tags"] == twice["tags"] == ["b", "c"]
    started = await tools("set_task_status", task_id=task["id"], status="in_progress")
    assert started["status"] == "in_progress" and started["tags"] == ["b", "c"]
    assert (await tools("set_task_status", task_id=task["id"], status="finished")).code == "INVALID_STATUS"
    assert (await tools("set_task_status", task_id="task_nope", status="done")).code == "NOT_FOUND"
    assert (await tools("update_task", task_id=task["id"], priority="meh")).code == "INVALID_PRIORITY"
    assert (await tools("update_task", task_id="task_nope", title="x")).code == "NOT_FOUND"
    assert (await tools("update_task", task_id=task["id"], status="done")).code == "INVALID_ARGUMENTS"


async def test_overwriting_what_the_user_wrote_needs_confirmation_a_status_change_does_not(
    tools: Tools,
) -> None:
    """A model that rewrites the user's tasks in one turn is held at the gate, every call; marking a task
    done is not."""
    ids = [
        (await tools("create_task", title=f"Mine {i}", description="my notes", tags=["me"]))["id"]
        for i in range(5)
    ]
    overwrites = [
        {"title": "pwned"},
        {"description": "gone"},
        {"tags": []},
        {"eta": "2030-01-01"},
        {"priority": "low"},
    ]
    held = [
        await tools.executor.execute(ToolCall(name="update_task", arguments={"task_id": i, **change}), ALICE)
        for i, change in zip(ids, overwrites, strict=True)
    ]
    assert [r.status for r in held] == ["confirmation_required"] * 5
    after = {t["id"]: t for t in (await tools("query_tasks"))["tasks"]}
    assert all(
        after[i]["title"] == f"Mine {n}"
        and after[i]["description"] == "my notes"
        and after[i]["tags"] == ["me"]
        for n, i in enumerate(ids)
    )
    assert all(t["eta"] is None and t["priority"] == "medium" for t in after.values())
    done = await tools.executor.execute(
        ToolCall(name="set_task_status", arguments={"task_id": ids[0], "status": "done"}), ALICE
    )
    assert done.status == "ok" and done.value["status"] == "done"
    update, status = (
        tools.executor.registry.get("update_task"),
        tools.executor.registry.get("set_task_status"),
    )
    assert update.options.requires_confirmation and update.options.destructive
    assert not status.options.requires_confirmation and not status.options.destructive


async def test_delete_needs_confirmation(tools: Tools) -> None:
    task = await tools("create_task", title="Bye")
    held = await tools.executor.execute(
        ToolCall(name="delete_task", arguments={"task_id": task["id"]}), ALICE
    )
    assert held.status == "confirmation_required"
    assert (await tools("query_tasks"))["total"] == 1
    assert await tools("delete_task", task_id=task["id"]) == {"deleted": task["id"], "title": "Bye"}
    assert (await tools("query_tasks"))["total"] == 0


async def test_query_filters_sort_limit_and_formats(tools: Tools) -> None:
    await tools("create_task", title="Low later", priority="low", eta="2026-12-20", tags=["home"])
    await tools(
        "create_task", title="Critical soon", priority="critical", eta="2026-12-01", tags=["work", "x"]
    )
    await tools("create_task", title="Undated medium", tags=["work"])
    r = await tools("query_tasks")
    assert [t["title"] for t in r["tasks"]] == ["Critical soon", "Low later", "Undated medium"]
    assert r["total"] == 3 and r["applied_filters"] == {}
    r = await tools("query_tasks", sort="priority_desc", limit=2)
    assert [t["title"] for t in r["tasks"]] == ["Critical soon", "Undated medium"] and r["total"] == 3
    r = await tools("query_tasks", sort="created_desc", format="concise")
    assert r["tasks"][0].keys() == {"id", "status"}
    r = await tools("query_tasks", filters={"tags": ["work"], "due_after": "2026-11-30"})
    assert [t["title"] for t in r["tasks"]] == ["Critical soon"]
    assert r["applied_filters"] == {"tags": ["work"], "due_after": "2026-11-30"}
    r = await tools("query_tasks", filters={"priority": "low", "status": "pending"}, format="detailed")
    assert r["tasks"][0]["attachments"] == []
    for bad in [{"limit": 0}, {"limit": 201}, {"sort": "random"}, {"filters": {"colour": "red"}}]:
        assert (await tools("query_tasks", **bad)).code == "INVALID_ARGUMENTS"
    assert (await tools("query_tasks", filters={"due_before": "someday"})).code == "INVALID_ETA"


async def test_full_text_search(tools: Tools) -> None:
    await tools("create_task", title="Call the plumber", description="The kitchen sink leaks")
    await tools("create_task", title="Kitchen paint", description="Pick a colour")
    await tools("create_task", title="Write report")
    await tools("create_task", title="plumber for bob", ctx=BOB)

    async def titles(text: str) -> list[str]:
        return sorted(t["title"] for t in (await tools("query_tasks", filters={"text": text}))["tasks"])

    assert await titles("kitchen") == ["Call the plumber", "Kitchen paint"]
    assert await titles("plumb") == ["Call the plumber"]  # prefix match, and only alice's
    assert await titles("sink kitchen") == ["Call the plumber"]  # every word
    assert await titles('" OR 1=1 --') == []
    assert await titles("NEAR(kitchen") == []
    report = (await tools("query_tasks", filters={"text": "report"}))["tasks"][0]
    await tools("update_task", task_id=report["id"], description="quarterly numbers")
    assert await titles("quarterly") == ["Write report"]  # the index follows updates


async def test_each_user_sees_only_their_own_rows(tools: Tools) -> None:
    mine = await tools("create_task", title="Alice's")
    att = await tools("add_attachment", task_id=mine["id"], url="https://example.com/a")
    missing_task, missing_att = "task_000000000000", "att_000000000000"
    for name, args, missing in [
        ("update_task", {"task_id": mine["id"], "title": "x"}, {"task_id": missing_task, "title": "x"}),
        ("delete_task", {"task_id": mine["id"]}, {"task_id": missing_task}),
        ("list_attachments", {"task_id": mine["id"]}, {"task_id": missing_task}),
        ("add_attachment", {"task_id": mine["id"], "url": "https://x.y"}, {"task_id": missing_task, "url": "https://x.y"}),
        ("delete_attachment", {"attachment_id": att["id"]}, {"attachment_id": missing_att}),
        ("refresh_attachment", {"attachment_id": att["id"]}, {"attachment_id": missing_att}),
    ]:  # fmt: skip
        theirs = await tools(name, ctx=BOB, **args)
        none = await tools(name, ctx=BOB, **missing)
        assert theirs.code == none.code == "NOT_FOUND", name
        norm = theirs.message.replace(mine["id"], "ID").replace(att["id"], "ID")
        assert norm == none.message.replace(missing_task, "ID").replace(missing_att, "ID"), name
        assert theirs.recover_action == none.recover_action
    assert (await tools("query_tasks", ctx=BOB))["total"] == 0
    assert (await tools("query_tasks"))["tasks"][0]["title"] == "Alice's"
    assert len((await tools("list_attachments", task_id=mine["id"]))["attachments"]) == 1
    no_user = await tools("query_tasks", ctx=ToolContext())
    assert no_user.code == "PERMISSION_DENIED"


async def test_attachments(tools: Tools) -> None:
    task = await tools("create_task", title="Review")
    pr = await tools(
        "add_attachment", task_id=task["id"], url="https://github.com/acme/app/pull/12", title="PR"
    )
    link = await tools("add_attachment", task_id=task["id"], url="https://example.com/spec")
    assert pr["kind"] == "github_pull" and link["kind"] == "link"
    assert (await tools("add_attachment", task_id=task["id"], url="ftp://x")).code == "INVALID_URL"
    listed = await tools("list_attachments", task_id=task["id"])
    assert [a["id"] for a in listed["attachments"]] == [pr["id"], link["id"]]
    assert (await tools("refresh_attachment", attachment_id=link["id"])).code == "NOT_GITHUB"
    assert await tools("delete_attachment", attachment_id=link["id"]) == {
        "deleted": link["id"],
        "task_id": task["id"],
    }
    detailed = await tools("query_tasks", format="detailed")
    assert [a["id"] for a in detailed["tasks"][0]["attachments"]] == [pr["id"]]


async def test_refresh_attachment_against_a_fake_github(tools: Tools, github: FakeGitHub) -> None:
    task = await tools("create_task", title="Ship")
    pr = await tools("add_attachment", task_id=task["id"], url="https://github.com/acme/app/pull/12")
    issue = await tools("add_attachment", task_id=task["id"], url="https://github.com/acme/app/issues/7")
    merged = {"title": "Add login", "state": "closed", "merged_at": "2026-11-20T10:00:00Z"}
    github.routes["/repos/acme/app/pulls/12"] = (200, {}, {**merged, "updated_at": "2026-11-20T10:00:00Z"})
    opened = {"title": "Crash", "state": "open", "updated_at": "2026-11-21T08:00:00Z"}
    github.routes["/repos/acme/app/issues/7"] = (200, {}, opened)
    done = await tools("refresh_attachment", attachment_id=pr["id"])
    assert (done["title"], done["state"], done["remote_updated_at"]) == (
        "Add login",
        "merged",
        "2026-11-20T10:00:00Z",
    )
    assert done["refreshed_at"]
    assert (await tools("refresh_attachment", attachment_id=issue["id"]))["state"] == "open"

    github.routes["/repos/acme/app/pulls/12"] = (429, {"Retry-After": "42"}, {"message": "slow down"})
    limited = await tools("refresh_attachment", attachment_id=pr["id"])
    assert limited.code == "RATE_LIMITED" and limited.retryable and limited.details["retry_after"] == 42
    assert "42" in limited.recover_action
    github.routes["/repos/acme/app/pulls/12"] = (403, {"X-RateLimit-Remaining": "0"}, {})
    assert (await tools("refresh_attachment", attachment_id=pr["id"])).code == "RATE_LIMITED"
    github.routes["/repos/acme/app/pulls/12"] = (403, {}, {"message": "forbidden"})
    forbidden = await tools("refresh_attachment", attachment_id=pr["id"])
    assert forbidden.code == "FORBIDDEN" and not forbidden.retryable
    github.routes.pop("/repos/acme/app/pulls/12")
    assert (await tools("refresh_attachment", attachment_id=pr["id"])).code == "NOT_FOUND"
    github.delay = 2.0  # the client's timeout is 0.5 s
    slow = await asyncio.wait_for(tools("refresh_attachment", attachment_id=issue["id"]), timeout=5)
    assert slow.code == "UPSTREAM_UNAVAILABLE" and slow.retryable
    assert github.seen.count("/repos/acme/app/pulls/12") == 5
    # the stored attachment kept its last good state
    kept = (await tools("list_attachments", task_id=task["id"]))["attachments"][0]
    assert kept["state"] == "merged"


@pytest.mark.slow
async def test_tools_and_full_text_on_postgres(postgres_url: str) -> None:
    async for t in _tools(postgres_url, None):
        await t("create_task", title="Call the plumber", description="kitchen sink", tags=["home"])
        await t("create_task", title="Kitchen paint", tags=["home", "diy"])
        await t("create_task", title="plumber bob", ctx=BOB)
        r = await t("query_tasks", filters={"text": "kitch"})
        assert sorted(x["title"] for x in r["tasks"]) == ["Call the plumber", "Kitchen paint"]
        r = await t("query_tasks", filters={"text": "plumber sink", "tags": ["home"]})
        assert [x["title"] for x in r["tasks"]] == ["Call the plumber"]
        r = await t("query_tasks", filters={"text": "' & | ! :* ("})
        assert r["tasks"] == []
        r = await t("query_tasks", filters={"tags": ["home", "diy"]}, sort="priority_desc")
        assert [x["title"] for x in r["tasks"]] == ["Kitchen paint"]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:16]}"

    async def admin(statement: str) -> None:
        engine = create_async_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(sa.text(statement))
        finally:
            await engine.dispose()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    yield sa.make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
