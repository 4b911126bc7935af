"""toolrun's MCP server over Streamable HTTP with background tools, for the TypeScript SDK's task test.

Prints `{"port"}` and serves (every caller is user `alice`) until killed.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import uvicorn

from toolrun import ToolContext, ToolRegistry, tool
from toolrun.mcp import MemoryTaskStore, create_http_app, create_server


@tool(background=True, timeout=60)
async def build_report(month: str, seconds: float = 0.2, *, ctx: ToolContext) -> dict[str, Any]:
    """Build the month's report (takes a while)."""
    await ctx.report_progress(1, total=2, message="reading")
    await asyncio.sleep(seconds)
    return {"month": month, "rows": 1234}


@tool(background=True, timeout=60)
async def failing_export(target: str) -> str:
    """An export that always fails."""
    raise ValueError(f"disk full while writing {target}")


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def main() -> None:
    registry = ToolRegistry([build_report, failing_export, add])
    server = create_server(registry, principal="alice", tasks=MemoryTaskStore(poll_interval=0.05))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    app = create_http_app(server)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
