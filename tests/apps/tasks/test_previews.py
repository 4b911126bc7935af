"""Previews of the task tools, read from the task store (SQLite through the migrations): the person sees
the task's title, due date and attachments instead of an id, only for their own rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.apps.tasks import TaskStore, task_tools
from toolrun.apps.tasks._previews import describe_date, task_previews
from toolrun.server.migrate import upgrade

ALICE = ToolContext(user_id="alice")
BOB = ToolContext(user_id="bob")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[TaskStore]:
    url = f"sqlite+aiosqlite:///{tmp_path}/p.db"
    await upgrade(url)
    engine = create_async_engine(url)
    yield TaskStore(engine)
    await engine.dispose()


async def held_preview(executor: ToolExecutor, name: str, ctx: ToolContext, **arguments: object) -> str:
    result = await executor.execute(ToolCall(name=name, arguments=arguments), ctx)
    assert result.status == "confirmation_required", result
    record = await executor.confirmation.store.get(result.confirmation_id or "")
    assert record is not None and record.preview is not None
    return record.preview


async def test_delete_task_shows_the_title_due_date_and_attachments(store: TaskStore) -> None:
    executor = ToolExecutor(ToolRegistry(task_tools(store)))
    task = await store.create("alice", title="Renew passport", description=None, priority="high",
                              eta="2026-12-01T00:00:00Z", tags=[])  # fmt: skip
    for n in (1, 2):
        await store.add_attachment("alice", task.id, url=f"https://example.com/{n}", title=None, kind="link")
    preview = await held_preview(executor, "delete_task", ALICE, task_id=task.id)
    assert preview == "Delete the task 'Renew passport' (due 1 Dec 2026, 2 attachments), permanently."
    # Bob holding a call with Alice's id learns nothing of her task
    theirs = await held_preview(executor, "delete_task", BOB, task_id=task.id)
    assert "Renew passport" not in theirs and "does not exist" in theirs
    await executor.aclose()


async def test_delete_attachment_names_it_and_its_task(store: TaskStore) -> None:
    executor = ToolExecutor(ToolRegistry(task_tools(store)))
    task = await store.create(
        "alice", title="Review PR", description=None, priority="medium", eta=None, tags=[]
    )
    att = await store.add_attachment(
        "alice", task.id, url="https://github.com/o/r/pull/12", title="Fix login", kind="github_pr"
    )
    assert att is not None
    preview = await held_preview(executor, "delete_attachment", ALICE, attachment_id=att.id)
    assert preview == (
        "Remove the attachment 'Fix login' (https://github.com/o/r/pull/12) from the task 'Review PR', "
        "permanently."
    )
    await executor.aclose()


async def test_update_task_says_what_would_change(store: TaskStore) -> None:
    task = await store.create("alice", title="Renew passport", description="old notes", priority="low",
                              eta="2026-12-01T17:30:00Z", tags=["home"])  # fmt: skip
    preview = task_previews(store)["update_task"]
    text = await preview(
        {"task_id": task.id, "title": "Renew ID", "eta": "2026-12-05T00:00:00Z", "tags": ["admin"],
         "status": "done", "description": "new"},
        ALICE,
    )  # fmt: skip
    assert text == (
        "Change the task 'Renew passport' (due 1 Dec 2026 17:30 UTC): title 'Renew passport' → 'Renew ID'; "
        "status pending → done; due 1 Dec 2026 17:30 UTC → 5 Dec 2026; tags ['home'] → ['admin'] (replaced); "
        "description replaced (9 characters → 3 characters)."
    )
    # wired on the tool itself, for whenever a call of it is held
    [update] = [t for t in task_tools(store) if t.name == "update_task"]
    assert update.options.preview is not None


async def test_a_preview_that_cannot_read_the_store_falls_back_to_the_summary(tmp_path: Path) -> None:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/empty.db")  # no tables: every read fails
    executor = ToolExecutor(ToolRegistry(task_tools(TaskStore(engine))))
    preview = await held_preview(executor, "delete_task", ALICE, task_id="task_1")
    assert preview.startswith("(The preview of this action could not be made, error id err_")
    assert 'delete_task(task_id="task_1")' in preview
    await executor.aclose()
    await engine.dispose()


def test_dates_read_as_people_write_them() -> None:
    assert describe_date("2026-12-01T00:00:00Z") == "1 Dec 2026"
    assert describe_date("0999-01-09T08:05:00Z") == "9 Jan 999 08:05 UTC"
    assert describe_date(None) == "no due date"


async def test_a_tool_with_its_own_preview_keeps_it(store: TaskStore) -> None:
    from toolrun.apps.tasks._previews import with_previews

    @tool(destructive=True, preview=lambda a, c: "mine")
    async def delete_task(task_id: str) -> str:
        """Delete."""
        return task_id

    [kept] = with_previews([delete_task], store)
    assert kept.options.preview is not None and kept.options.preview({}, ALICE) == "mine"
