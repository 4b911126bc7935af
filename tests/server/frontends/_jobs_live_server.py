"""A live server on durable runs (`TOOLRUN_DURABLE=dbos`) with a background tool, for the job-card test.

`report N` makes the model call `build_report(n=N)`, a background tool that reports progress, then waits
for the file `<directory>/release-N` (or its cancellation). Prints `{"port", "alice", "bob"}` and serves.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn

from toolrun import ToolCall, ToolContext, tool
from toolrun.models import FunctionModel, Message, ToolResultMessage, UserMessage
from toolrun.server import Settings, create_app
from toolrun.server.migrate import upgrade


def build(directory: Path) -> Any:
    @tool(background=True, timeout=120)
    async def build_report(n: int, *, ctx: ToolContext) -> dict[str, Any]:
        """Build report number n (takes a while).

        Args:
            n: The report's number.
        """
        await ctx.report_progress(1, total=2, message="reading the ledger")
        while not (directory / f"release-{n}").exists():
            await asyncio.sleep(0.05)
        return {"report": n, "rows": 1234}

    async def script(messages: list[Message], tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return "It has started; I will tell you when it is done."
        text = next(  # the person's message, not a finished job's note that joined the conversation
            m.content
            for m in reversed(messages)
            if isinstance(m, UserMessage) and not str(m.content).startswith("[Background job")
        )
        if text.startswith("report "):
            n = int(text.split()[1])
            return ToolCall(id=f"r{n}", name="build_report", arguments=json.dumps({"n": n}))
        return "ok"

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{directory}/toolrun.db",
        data_dir=directory / "data",
        token_cache_seconds=0,
        durable="dbos",
    )
    return settings, create_app(
        settings, model=FunctionModel(script, name="jobs"), extra_tools=[build_report]
    )


async def main(directory: Path) -> None:
    await upgrade(f"sqlite+aiosqlite:///{directory}/toolrun.db")
    _, app = build(directory)
    users = app.state.toolrun.users
    _, alice = await users.add("alice")
    _, bob = await users.add("bob")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog while DBOS launches in the app's lifespan
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(json.dumps({"port": port, "alice": alice, "bob": bob}), flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
