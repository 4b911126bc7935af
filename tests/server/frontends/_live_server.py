"""A real uvicorn serving `create_app(settings)` with the demo model on 127.0.0.1 (a free port).

Run as a script by the `live_server` fixture: migrates a fresh SQLite database, adds users `alice` and
`bob`, binds port 0, prints one JSON line `{"port", "alice", "bob"}` (their tokens), then serves until
killed. With a second argument `rich`, it also serves the tools of `_rich.py` (a chart with progress and an
image, a generator tool), called by `chart <metric>` and `scan <n>`; with `page`, the model and tool of
`_page_model.py` (Markdown answers, a slow answer and a slow tool to stop).
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


async def main(directory: Path, mode: str = "") -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{directory}/toolrun.db",
        data_dir=directory / "data",
        model="demo",
        token_cache_seconds=0,
    )
    await upgrade(settings.database_url)
    sys.path.insert(0, str(Path(__file__).parent))
    if mode == "rich":
        from _rich import RICH_TOOLS, rich_model

        app = create_app(settings, model=rich_model(), extra_tools=RICH_TOOLS)
    elif mode == "page":
        from _page_model import PAGE_TOOLS, page_model

        app = create_app(settings, model=page_model(), extra_tools=PAGE_TOOLS)
    else:
        app = create_app(settings)
    users = app.state.toolrun.users
    _, alice = await users.add("alice")
    _, bob = await users.add("bob")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # listening before the port is told: a client that comes before the lifespan waits
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(json.dumps({"port": port, "alice": alice, "bob": bob}), flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""))
