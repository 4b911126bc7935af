"""A real uvicorn serving `create_app(settings)` for the crash tests, run as a script (then SIGKILLed).

`python _crash_server.py DIR DATABASE_URL LEASE_SECONDS [PORT]` binds 127.0.0.1 on PORT (default: a free
port), prints one JSON line `{"port": ...}` and serves. The model and the tools pace each crash window
through files in DIR, so a test kills the process exactly where it means to:

- `slow ...`: the model says "Working on it." and calls `slow_step`, which touches `slow_started` and
  waits for `release` (never made: the process is killed while the run works);
- `wipe NAME`: the model calls `wipe_note` (destructive: held for the user's approval). Approved, it
  deletes `note_NAME` and touches `wipe_ran`; with `hang_in_tool` present it then never returns. With
  `hang_in_model` present, the model's next request (after the call's result) touches `model_waiting` and
  never answers.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn

from toolrun import ToolCall, tool
from toolrun.models import FunctionModel, Message, ModelResponse, ToolResultMessage, UserMessage
from toolrun.server import Settings, create_app


async def _forever() -> None:
    while True:
        await asyncio.sleep(0.05)


def build(directory: Path, database_url: str, lease_seconds: float) -> Any:
    @tool
    async def slow_step() -> str:
        """A step that takes a while."""
        (directory / "slow_started").touch()
        while not (directory / "release").exists():
            await asyncio.sleep(0.02)
        return "finished"

    @tool(destructive=True)
    async def wipe_note(name: str) -> str:
        """Delete a note for good.

        Args:
            name: The note's name.
        """
        (directory / f"note_{name}").unlink()
        (directory / "wipe_ran").touch()
        if (directory / "hang_in_tool").exists():
            await _forever()
        return f"wiped {name}"

    async def script(messages: list[Message], tools: Any) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            if last.tool_name == "wipe_note" and (directory / "hang_in_model").exists():
                (directory / "model_waiting").touch()
                await _forever()
            return f"Done: {last.content}"
        text = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        if text.startswith("slow"):
            return ModelResponse(
                text="Working on it.", tool_calls=[ToolCall(id="s1", name="slow_step", arguments="{}")]
            )
        if text.startswith("wipe "):
            return ToolCall(id="w1", name="wipe_note", arguments=json.dumps({"name": text[5:]}))
        return "ok"

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=database_url,
        data_dir=directory / "data",
        secret_key="crash-test-secret-key-0123456789",
        token_cache_seconds=0,
        lease_seconds=lease_seconds,
    )
    return create_app(settings, model=FunctionModel(script, name="crash"), extra_tools=[slow_step, wipe_note])


async def main(directory: Path, database_url: str, lease_seconds: float, port: int = 0) -> None:
    app = build(directory, database_url, lease_seconds)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart takes the killed one's port
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # listening before the port is told: a client that comes before the lifespan waits
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    print(json.dumps({"port": port}), flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), port))
