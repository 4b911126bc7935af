"""The shared time boxes behave like asyncio.timeout, with one loop timer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolrun.runtime._watchdog import Watchdog, watchdog


async def guarded(seconds: float, body: Any) -> tuple[str, Any]:
    task = asyncio.current_task()
    assert task is not None
    box = watchdog(asyncio.get_running_loop()).box(seconds, task)
    try:
        value = await body()
    except BaseException as exc:
        if box.close(exc):
            return "timeout", None
        raise
    box.close(None)
    return "done", value


async def test_expiry_becomes_a_timeout_and_the_task_stays_usable() -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    assert await guarded(0.01, hang) == ("timeout", None)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # no stray cancellation left behind


async def test_quick_bodies_finish_and_boxes_in_the_past_fire_at_the_next_suspension() -> None:
    async def quick() -> int:
        await asyncio.sleep(0)
        return 5

    assert await guarded(10, quick) == ("done", 5)
    assert await guarded(-1, quick) == ("timeout", None)


async def test_a_swallowed_expiry_is_withdrawn() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "swallowed"
        return "never"

    assert await guarded(0.01, stubborn) == ("done", "swallowed")
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)


async def test_an_outside_cancellation_is_not_a_timeout() -> None:
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(guarded(10, hang))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_outer_asyncio_timeout_wins_over_a_later_box() -> None:
    async def hang() -> None:
        await asyncio.Event().wait()

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await guarded(10, hang)


async def test_one_timer_serves_many_boxes_in_deadline_order() -> None:
    order: list[float] = []

    def body(seconds: float) -> Any:
        async def run() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                order.append(seconds)

        return run

    results = await asyncio.gather(*[guarded(s, body(s)) for s in (0.05, 0.01, 0.03, 0.02)])
    assert all(r == ("timeout", None) for r in results)
    assert order == [0.01, 0.02, 0.03, 0.05]


async def test_closed_boxes_are_compacted_away() -> None:
    dog = Watchdog(asyncio.get_running_loop())
    task = asyncio.current_task()
    assert task is not None
    for _ in range(2048):
        dog.box(60, task).close(None)
    assert len(dog) <= 512
    dog._compact()
    assert len(dog) == 0


def test_each_loop_has_its_own_watchdog() -> None:
    loops = [asyncio.new_event_loop() for _ in range(2)]
    try:
        first, second = (watchdog(loop) for loop in loops)
        assert first is not second and watchdog(loops[0]) is first
    finally:
        for loop in loops:
            loop.close()
