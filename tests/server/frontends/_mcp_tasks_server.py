"""toolrun's MCP server over Streamable HTTP with background tools, for the TypeScript SDK's task test.

Prints `{"port"}` and serves (every caller is user `alice`) until killed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import uvicorn

from toolrun.mcp import MemoryTaskStore, create_http_app, create_server


async def main() -> None:
    sys.path.insert(0, str(Path(__file__).parents[2] / "mcp"))
    from task_tools import registry  # the MCP Tasks tests' background tools

    server = create_server(registry, principal="alice", tasks=MemoryTaskStore(poll_interval=0.05))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    app = create_http_app(server)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
