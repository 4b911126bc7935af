"""A real uvicorn serving `create_app(settings)` with the demo model on 127.0.0.1 (a free port).

Run as a script by the `live_server` fixture: migrates a fresh SQLite database, adds users `alice` and
`bob`, binds port 0, prints one JSON line `{"port", "alice", "bob"}` (their tokens), then serves until
killed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import uvicorn

from toolrun.server import Settings, create_app
from toolrun.server.migrate import upgrade


async def main(directory: Path) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{directory}/toolrun.db",
        data_dir=directory / "data",
        model="demo",
        token_cache_seconds=0,
    )
    await upgrade(settings.database_url)
    app = create_app(settings)
    users = app.state.toolrun.users
    _, alice = await users.add("alice")
    _, bob = await users.add("bob")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(json.dumps({"port": port, "alice": alice, "bob": bob}), flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
