"""CPU per model request of toolrun's OpenAI client alone, streamed, against the scripted model (issue 21).

    python bench/_scripted_llm.py 18777 &            # the model
    python bench/model_client_cpu.py http://127.0.0.1:18777/v1 50 40    # URL, concurrency, rounds
    python bench/model_client_cpu.py http://127.0.0.1:18777/v1 50 40 httpx   # a transport, not the default
    PYTHONPATH=../main/src python bench/model_client_cpu.py ...          # another checkout, to compare

Each request is what the agent sends on a chat turn's first step (one user message, one tool); the process
CPU time over `concurrency * rounds` requests, after one warm-up round, divided by their number.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from toolrun import ToolRegistry, tool
from toolrun.models import ModelRequest, OpenAIModel, UserMessage


@tool
async def create_task(title: str) -> dict[str, str]:
    """Create a task.

    Args:
        title: The task's title.
    """
    return {"id": "task_1", "title": title}


async def main(url: str, concurrency: int, rounds: int, transport: str | None) -> None:
    registry = ToolRegistry()
    registry.register(create_task)
    options: dict[str, Any] = {} if transport is None else {"transport": transport}
    model = OpenAIModel("scripted", base_url=url, api_key="not-needed", **options)
    label = getattr(model, "transport", "httpx")  # a toolrun older than the option: its httpx client
    request = ModelRequest([UserMessage(content="hello there")], registry)

    async def one() -> None:
        async for _ in model.stream(request):
            pass

    await asyncio.gather(*(one() for _ in range(concurrency)))  # warm-up: connections, caches
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        await asyncio.gather(*(one() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    n = concurrency * rounds
    print(
        f"{label}: {n} requests, {concurrency} at once: {cpu / n * 1e6:.0f} µs CPU per request, {wall:.2f} s"
    )
    await model.aclose()


if __name__ == "__main__":
    asyncio.run(
        main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    )
