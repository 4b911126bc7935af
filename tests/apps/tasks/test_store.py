"""`TaskStore` directly, on SQLite and PostgreSQL: what a create writes (the task row, its deduplicated tag
rows, the full-text index), that the prebuilt statements bind each call's own values (a statement built
once at import must not keep the first call's), and that another user's task stays invisible."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolrun.apps.tasks import TaskStore
from toolrun.apps.tasks._store import TaskQuery, task_tags_table, tasks_table

from .test_tools import postgres_url  # noqa: F401  (the module's PostgreSQL database fixture)


async def _store(url: str) -> AsyncIterator[TaskStore]:
    engine: AsyncEngine = create_async_engine(url)
    store = TaskStore(engine)
    await store.create_tables()
    try:
        yield store
    finally:
        await engine.dispose()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[TaskStore]:
    async for s in _store(f"sqlite+aiosqlite:///{tmp_path}/s.db"):
        yield s


async def _check_store(store: TaskStore) -> None:
    a = await store.create(
        "alice", title="Call the plumber", description="kitchen sink", priority="high",
        eta="2026-12-01T16:00:00Z", tags=["home", "diy", "home"],
    )  # fmt: skip
    b = await store.create("alice", title="Buy paint", description=None, priority="low", eta=None, tags=[])
    c = await store.create(
        "bob", title="plumber bob", description=None, priority="critical", eta=None, tags=["x"]
    )
    assert len({a.id, b.id, c.id}) == 3 and a.tags == ["home", "diy"] and a.created_at == a.updated_at

    # Each call's own values reached its row (nothing of an earlier call's bound values kept).
    for user, task in [("alice", a), ("alice", b), ("bob", c)]:
        got = await store.get(user, task.id)
        assert got is not None and got.to_dict() == task.to_dict()
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(tasks_table).order_by(tasks_table.c.title))).mappings().all()
        tt = task_tags_table
        tag_rows = [tuple(r) for r in await conn.execute(sa.select(tt.c.task_id, tt.c.tag, tt.c.user_id))]
    by_title = {r["title"]: r for r in rows}
    assert by_title["Call the plumber"]["priority_rank"] == 2 and by_title["Buy paint"]["priority_rank"] == 0
    assert by_title["plumber bob"]["user_id"] == "bob" and by_title["Buy paint"]["description"] is None
    assert json.loads(by_title["Call the plumber"]["tags"]) == ["home", "diy"]
    assert sorted(tag_rows) == sorted([(a.id, "diy", "alice"), (a.id, "home", "alice"), (c.id, "x", "bob")])

    # Another user's task is as unknown as a missing one, for reads and for writes.
    assert await store.get("bob", a.id) is None
    assert await store.update("bob", a.id, {"title": "taken"}) is None
    assert await store.add_attachment("bob", a.id, url="https://example.com", title=None, kind="link") is None
    att = await store.add_attachment("alice", a.id, url="https://example.com/a", title="A", kind="link")
    assert att is not None and await store.list_attachments("alice", a.id) == [att]
    full = await store.get("alice", a.id, attachments=True)
    assert full is not None and full.attachments == [att]

    # The full-text index saw the inserts.
    found, total = await store.query("alice", TaskQuery(text="plumb"))
    assert [t.id for t in found] == [a.id] and total == 1
    found, _ = await store.query("alice", TaskQuery(tags=["home", "diy"]))
    assert [t.id for t in found] == [a.id]

    deleted = await store.delete("alice", a.id)
    assert deleted is not None and deleted.id == a.id and await store.get("alice", a.id) is None
    assert (await store.query("alice", TaskQuery(text="plumb")))[1] == 0


async def test_store_writes_and_reads_on_sqlite(sqlite_store: TaskStore) -> None:
    await _check_store(sqlite_store)


@pytest.mark.slow
async def test_store_writes_and_reads_on_postgres(postgres_url: str) -> None:  # noqa: F811
    async for store in _store(postgres_url):
        await _check_store(store)
