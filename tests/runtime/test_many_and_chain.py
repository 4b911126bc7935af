"""execute_many (order, concurrency bound, sequential tools) and chain (references between steps)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolrun import ErrorCode, ToolContext, tool
from toolrun.runtime._chain import ChainStep

from .conftest import call


class Gauge:
    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.log: list[str] = []


def concurrency_tools(g: Gauge) -> list[Any]:
    @tool
    async def work(n: int) -> int:
        """Work a little."""
        g.now += 1
        g.peak = max(g.peak, g.now)
        g.log.append(f"start {n}")
        for _ in range(3):
            await asyncio.sleep(0)
        g.log.append(f"end {n}")
        g.now -= 1
        return n

    @tool(sequential=True)
    async def barrier(n: int) -> int:
        """Must run alone."""
        assert g.now == 0, "a sequential tool started while others ran"
        g.log.append(f"barrier {n}")
        await asyncio.sleep(0)
        assert g.now == 0
        return n

    return [work, barrier]


async def test_results_come_back_in_call_order(make_executor: Any) -> None:
    g = Gauge()
    ex = make_executor(*concurrency_tools(g))
    calls = [call("work", {"n": i}) for i in range(10)] + [call("nope"), call("work", {"n": "x"})]
    results = await ex.execute_many(calls)
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert [r.value for r in results[:10]] == list(range(10)) and g.peak == 10
    assert results[10].error is not None and results[10].error.code == ErrorCode.NOT_FOUND
    assert results[11].error is not None and results[11].error.code == ErrorCode.INVALID_ARGUMENTS


async def test_max_concurrency_bounds_the_calls_in_flight(make_executor: Any) -> None:
    g = Gauge()
    ex = make_executor(*concurrency_tools(g))
    results = await ex.execute_many([call("work", {"n": i}) for i in range(12)], max_concurrency=3)
    assert [r.value for r in results] == list(range(12)) and g.peak == 3


async def test_sequential_tools_run_alone(make_executor: Any) -> None:
    g = Gauge()
    ex = make_executor(*concurrency_tools(g))
    calls = [
        call("work", {"n": 1}),
        call("work", {"n": 2}),
        call("barrier", {"n": 3}),
        call("work", {"n": 4}),
        call("barrier", {"n": 5}),
        call("barrier", {"n": 6}),
        call("work", {"n": 7}),
    ]
    results = await ex.execute_many(calls, ToolContext())
    assert [r.value for r in results] == [1, 2, 3, 4, 5, 6, 7]
    b3 = g.log.index("barrier 3")
    assert {"end 1", "end 2"} <= set(g.log[:b3]) and "start 4" in g.log[b3:]
    assert g.log.index("end 4") < g.log.index("barrier 5") < g.log.index("barrier 6") < g.log.index("start 7")
    assert await ex.execute_many([]) == []


async def test_cancelling_execute_many_cancels_its_calls(make_executor: Any) -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> None:
        """Hang."""
        started.set()
        await asyncio.Event().wait()

    ex = make_executor(hang)
    task = asyncio.ensure_future(ex.execute_many([call("hang"), call("hang")]))
    await started.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert task.cancelled()


# ---------------------------------------------------------------------------------------------------------
# chain


def chain_tools(log: list[Any]) -> list[Any]:
    @tool
    async def search(query: str) -> dict[str, Any]:
        """Search."""
        log.append(("search", query))
        return {"items": [{"id": "t1", "title": "first"}, {"id": "t2", "title": "second"}], "total": 2}

    @tool
    async def get_task(task_id: str, note: str = "") -> dict[str, Any]:
        """Get a task."""
        log.append(("get_task", task_id, note))
        return {"id": task_id, "tags": ["a", "b"]}

    @tool
    async def count(values: list[Any], label: str = "") -> int:
        """Count."""
        log.append(("count", values, label))
        return len(values)

    return [search, get_task, count]


async def test_chain_resolves_references_to_earlier_results(make_executor: Any) -> None:
    log: list[Any] = []
    ex = make_executor(*chain_tools(log))
    results = await ex.chain(
        [
            {"id": "find", "tool": "search", "arguments": {"query": "invoice"}},
            ChainStep(id="open", tool="get_task", arguments={"task_id": "$find.items.-1.id", "note": "$$5"}),
            {
                "id": "n",
                "tool": "count",
                "arguments": {"values": ["$open.tags", "$find.total", "x"], "label": "$open.id"},
            },
            {"id": "all", "tool": "count", "arguments": {"values": "$find.items"}},
        ]
    )
    assert [r.status for r in results] == ["ok"] * 4
    assert [r.call_id for r in results] == ["find", "open", "n", "all"]
    assert log[1] == ("get_task", "t2", "$5")
    assert log[2] == ("count", [["a", "b"], 2, "x"], "t2")
    assert results[3].value == 2


async def test_chain_stops_at_the_first_failure_or_bad_reference(make_executor: Any) -> None:
    log: list[Any] = []
    ex = make_executor(*chain_tools(log))
    results = await ex.chain(
        [
            {"id": "find", "tool": "search", "arguments": {"query": "x"}},
            {"id": "open", "tool": "get_task", "arguments": {"task_id": "$find.items.5.id"}},
            {"id": "never", "tool": "count", "arguments": {"values": []}},
        ]
    )
    assert len(results) == 2 and results[1].error is not None
    assert results[1].error.code == ErrorCode.INVALID_ARGUMENTS and "out of range" in results[1].error.message
    for bad in ("$find.nothing", "$find.total.deeper"):
        results = await ex.chain(
            [
                {"id": "find", "tool": "search", "arguments": {"query": "x"}},
                {"id": "open", "tool": "get_task", "arguments": {"task_id": bad}},
                {"id": "later", "tool": "search", "arguments": {"query": "x"}},
            ]
        )
        assert len(results) == 2 and results[1].error is not None, bad
    results = await ex.chain(
        [{"id": "a", "tool": "get_task", "arguments": {"task_id": 5}}, {"id": "b", "tool": "x"}]
    )
    assert len(results) == 1 and results[0].error is not None


async def test_a_bad_chain_runs_nothing(make_executor: Any) -> None:
    """The whole chain is checked before step 0 runs: a duplicate id, a bad id, a malformed step or a
    reference to a later (or unknown) step anywhere in it means no step runs at all."""
    log: list[Any] = []
    ex = make_executor(*chain_tools(log))
    first = {"id": "find", "tool": "search", "arguments": {"query": "x"}}
    for bad_tail, what in (
        ([{"id": "find", "tool": "search", "arguments": {"query": "y"}}], "used twice"),
        (
            [{"id": "open", "tool": "get_task", "arguments": {"task_id": "x"}}, {"id": "b c", "tool": "x"}],
            "id",
        ),
        ([{"id": "open", "tool": "get_task"}, "not a step"], "malformed"),
        (
            [
                {"id": "open", "tool": "get_task", "arguments": {"task_id": "$later.id"}},
                {"id": "later", "tool": "x"},
            ],
            "no earlier step 'later'",
        ),
        (
            [{"id": "open", "tool": "get_task", "arguments": {"task_id": {"deep": ["$nowhere"]}}}],
            "no earlier step 'nowhere'",
        ),
        ([{"id": "open", "tool": "get_task", "arguments": {"task_id": "$open"}}], "no earlier step 'open'"),
    ):
        results = await ex.chain([first, *bad_tail])  # type: ignore[list-item]
        assert len(results) == 1, what
        error = results[0].error
        assert error is not None and error.code == ErrorCode.INVALID_ARGUMENTS and what in error.message, what
        assert log == [], what


async def test_chain_refuses_malformed_steps(make_executor: Any) -> None:
    ex = make_executor(*chain_tools([]))
    for steps in (
        [{"tool": "search"}],
        ["not a step"],
        [{"id": "a.b", "tool": "search", "arguments": {"query": "x"}}],
        [{"id": "a", "tool": "search", "arguments": {"query": "x"}}, {"id": "a", "tool": "search"}],
        [{"id": "a", "tool": "search", "arguments": ["x"]}],
    ):
        results = await ex.chain(steps)  # type: ignore[arg-type]
        assert results[-1].error is not None and results[-1].error.code == ErrorCode.INVALID_ARGUMENTS, steps
    deep: Any = "$x"
    for _ in range(100):
        deep = [deep]
    results = await ex.chain([{"id": "a", "tool": "count", "arguments": {"values": deep}}])
    assert results[0].error is not None and "deeply" in results[0].error.message


async def test_a_chain_step_needing_confirmation_stops_the_chain(make_executor: Any) -> None:
    @tool(destructive=True)
    async def delete(task_id: str) -> str:
        """Delete."""
        return task_id

    ex = make_executor(*chain_tools([]), delete)
    results = await ex.chain(
        [
            {"id": "find", "tool": "search", "arguments": {"query": "x"}},
            {"id": "del", "tool": "delete", "arguments": {"task_id": "$find.items.0.id"}},
            {"id": "after", "tool": "search", "arguments": {"query": "y"}},
        ],
        ToolContext(user_id="u1"),
    )
    assert [r.status for r in results] == ["ok", "confirmation_required"]
    assert results[1].message is not None and 'task_id="t1"' in results[1].message


async def test_execute_many_refuses_a_nonsense_limit(make_executor: Any) -> None:
    ex = make_executor(*concurrency_tools(Gauge()))
    with pytest.raises(ValueError):
        await ex.execute_many([call("work", {"n": 1})], max_concurrency=0)
