"""CPU per time-boxed call: the runtime's shared watchdog (`runtime/_watchdog.py`) against `asyncio.timeout`.

    python bench/experiments/watchdog_vs_timeout.py            # asyncio's loop, then uvloop if installed
    python bench/experiments/watchdog_vs_timeout.py 9 2000     # rounds, calls in flight

Two shapes, each timed as process CPU over all its calls, the two time boxes alternating round by round:
`one at a time` (a box around one `await asyncio.sleep(0)`, sequentially: the fixed cost of a box) and `in
flight` (that many calls at once, each boxed for 30 s around three 1-ms sleeps: the timer heap is deep).
Medians, and the watchdog's figure over asyncio.timeout's within the same run.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from toolrun.runtime._watchdog import watchdog


async def _with_watchdog(seconds: float, work: Callable[[], Awaitable[None]]) -> None:
    task = asyncio.current_task()
    assert task is not None
    box = watchdog(asyncio.get_running_loop()).box(seconds, task)
    try:
        await work()
    except BaseException as exc:
        box.close(exc)
        raise
    box.close(None)


async def _with_timeout(seconds: float, work: Callable[[], Awaitable[None]]) -> None:
    async with asyncio.timeout(seconds):
        await work()


async def _yield() -> None:
    await asyncio.sleep(0)


async def _sleeps() -> None:
    for _ in range(3):
        await asyncio.sleep(0.001)


async def _one_at_a_time(box: Callable[..., Awaitable[None]], n: int) -> float:
    cpu = time.process_time()
    for _ in range(n):
        await box(30.0, _yield)
    return (time.process_time() - cpu) / n * 1e6


async def _in_flight(box: Callable[..., Awaitable[None]], n: int) -> float:
    cpu = time.process_time()
    await asyncio.gather(*(box(30.0, _sleeps) for _ in range(n)))
    return (time.process_time() - cpu) / n * 1e6


async def _main(rounds: int, in_flight: int) -> None:
    boxes = {"watchdog": _with_watchdog, "asyncio.timeout": _with_timeout}
    for shape, run, n in (("one at a time", _one_at_a_time, 20_000), ("in flight", _in_flight, in_flight)):
        await run(_with_watchdog, n // 10)  # warm-up
        await run(_with_timeout, n // 10)
        figures: dict[str, list[float]] = {name: [] for name in boxes}
        for r in range(rounds):
            order = list(boxes.items()) if r % 2 == 0 else list(boxes.items())[::-1]
            for name, box in order:
                figures[name].append(await run(box, n))
        wd, at = (statistics.median(figures[name]) for name in boxes)
        print(
            f"  {shape:14} ({n} calls): watchdog {wd:6.1f} µs, asyncio.timeout {at:6.1f} µs CPU a call,"
            f" ratio {wd / at:.2f}"
        )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    in_flight = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    print(f"asyncio loop, {rounds} interleaved rounds, medians:")
    asyncio.run(_main(rounds, in_flight))
    try:
        import uvloop
    except ImportError:
        return
    print(f"uvloop, {rounds} interleaved rounds, medians:")
    uvloop.run(_main(rounds, in_flight))


if __name__ == "__main__":
    main()
