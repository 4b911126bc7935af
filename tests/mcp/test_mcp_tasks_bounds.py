"""What a user may keep in toolrun's MCP task store, and how it is listed: at most `max_kept_per_user`
tasks (a new one drops that user's oldest finished task), `tasks/list` a page at a time with a checked
cursor, and expired finished tasks purged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
import task_tools
from mcp.shared.exceptions import MCPError
from tasks_helpers import call, cancel, declaring, get, list_tasks, until_final

from mcp import Client
from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.mcp import MemoryTaskStore, create_server
from toolrun.mcp._tasks_legacy import PAGE_SIZE


@pytest.fixture
async def store() -> AsyncIterator[MemoryTaskStore]:
    kept = MemoryTaskStore(poll_interval=0.01, max_running_per_user=3, max_kept_per_user=2 * PAGE_SIZE)
    yield kept
    await kept.aclose()


@pytest.fixture
def executor() -> Any:
    ex = ToolExecutor(task_tools.registry)
    yield ex
    ex.close()


async def all_pages(client: Client) -> tuple[list[list[str]], list[str]]:
    """Every `tasks/list` page's task ids, following `nextCursor`; and the cursors given."""
    pages, cursors, cursor = [], [], None
    while True:
        page = await list_tasks(client, cursor)
        pages.append([t["taskId"] for t in page["tasks"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages, cursors
        cursors.append(cursor)


@pytest.mark.slow
async def test_a_user_keeps_a_bounded_number_of_tasks_listed_page_by_page(
    store: MemoryTaskStore, executor: Any
) -> None:
    alice = create_server(task_tools.registry, executor=executor, principal="alice", tasks=store)
    bob = create_server(task_tools.registry, executor=executor, principal="bob", tasks=store)
    async with Client(bob, extensions=declaring()) as client:
        bobs = (await call(client, "build_report", {"month": "b", "seconds": 0}))["taskId"]
        await until_final(client, bobs)
    created = []
    async with Client(alice, extensions=declaring()) as client:
        for i in range(3 * PAGE_SIZE):  # three times what a user may keep
            task_id = (await call(client, "build_report", {"month": str(i), "seconds": 0}))["taskId"]
            await until_final(client, task_id)
            created.append(task_id)
        with pytest.raises(MCPError) as dropped:
            await get(client, created[0])  # the oldest finished: dropped to make room
        newest = await get(client, created[-1])
    async with Client(alice, mode="legacy") as client:
        pages, cursors = await all_pages(client)
    async with Client(bob, mode="legacy") as client:
        theirs, _ = await all_pages(client)
        with pytest.raises(MCPError) as foreign:  # alice's cursor is not bob's
            await list_tasks(client, cursors[0])
    assert dropped.value.code == types.INVALID_PARAMS
    assert newest["status"] == "completed"
    assert [len(p) for p in pages] == [PAGE_SIZE, PAGE_SIZE]
    assert [t for p in pages for t in p] == created[::-1][: 2 * PAGE_SIZE]  # the newest, newest first
    assert theirs == [[bobs]]  # another user's tasks are not what made room
    assert foreign.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize("cursor", ["garbage", "", "e30.abc", "x" * 10_000])
async def test_a_cursor_this_server_did_not_issue_is_invalid_params(
    store: MemoryTaskStore, executor: Any, cursor: str
) -> None:
    server = create_server(task_tools.registry, executor=executor, principal="alice", tasks=store)
    async with Client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as refused:
            await list_tasks(client, cursor)
        assert (await list_tasks(client)) == {"tasks": []}
    assert refused.value.code == types.INVALID_PARAMS and "cursor" in refused.value.message.lower()


async def test_an_altered_cursor_is_invalid_params(executor: Any) -> None:
    store = MemoryTaskStore(poll_interval=0.01, max_running_per_user=3, max_kept_per_user=100)
    server = create_server(task_tools.registry, executor=executor, principal="alice", tasks=store)
    async with Client(server, extensions=declaring()) as client:
        for i in range(PAGE_SIZE + 1):
            await until_final(
                client, (await call(client, "build_report", {"month": str(i), "seconds": 0}))["taskId"]
            )
    async with Client(server, mode="legacy") as client:
        cursor = (await list_tasks(client))["nextCursor"]
        with pytest.raises(MCPError) as refused:
            await list_tasks(client, cursor[:-1] + ("A" if cursor[-1] != "A" else "B"))
        last = await list_tasks(client, cursor)
    await store.aclose()
    assert refused.value.code == types.INVALID_PARAMS
    assert len(last["tasks"]) == 1 and "nextCursor" not in last


async def test_thousands_of_tasks_leave_the_store_at_its_bound() -> None:
    """A client starting tasks without end: the store holds the default 100 for it, no more (records,
    per-user index, purge queue)."""

    @tool(background=True)
    async def quick() -> int:
        """Done at once."""
        return 1

    executor = ToolExecutor(ToolRegistry([quick]))
    store = MemoryTaskStore(max_running_per_user=5)
    me = ToolContext(user_id="alice")
    for i in range(5_000):
        while await store.start(ToolCall(id=f"c{i}", name="quick", arguments={}), me, executor) is None:
            await asyncio.sleep(0)  # five running: wait for one to end
    await store.aclose()
    executor.close()
    assert len(await store.list_tasks("alice")) == 100
    assert len(store._tasks) == 100 and len(store._owners) == 100
    assert len(store._queue) <= 2 * 100 + 64 + 1


async def test_expired_finished_tasks_are_purged_and_a_late_running_one_once_it_ends(executor: Any) -> None:
    now = [1_000_000.0]
    store = MemoryTaskStore(poll_interval=0.01, ttl=60, clock=lambda: now[0])
    server = create_server(task_tools.registry, executor=executor, principal="alice", tasks=store)
    async with Client(server, extensions=declaring()) as client:
        quick = [
            (await call(client, "build_report", {"month": "q", "seconds": 0}))["taskId"] for _ in range(3)
        ]
        for task_id in quick:
            await until_final(client, task_id)
        slow = (await call(client, "build_report", {"month": "s", "seconds": 30}))["taskId"]
        now[0] += 61
        assert store.purge() == 3  # the finished ones; the running one is kept
        assert [t["id"] for t in await store.list_tasks("alice")] == [slow]
        await cancel(client, slow)  # it ends, past its ttl
        assert store.purge() == 1
        assert await store.list_tasks("alice") == []
    await store.aclose()


def test_a_store_cannot_keep_fewer_than_it_runs() -> None:
    with pytest.raises(ValueError, match="max_kept_per_user"):
        MemoryTaskStore(max_running_per_user=5, max_kept_per_user=4)
