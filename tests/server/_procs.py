"""Real servers for tests: `toolrun serve` in a subprocess, or uvicorn in this event loop, on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

_RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


class ServeProcess:
    """`toolrun serve --port 0` in a subprocess; `url` once it listens; its stderr lines (JSON logs) kept."""

    def __init__(
        self,
        env: dict[str, str],
        *,
        extra_args: tuple[str, ...] = (),
        launcher: tuple[str, ...] = (sys.executable, "-c", "from toolrun.cli import main; main()"),
        cwd: str | None = None,
    ) -> None:
        full_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [
                *launcher,
                "serve",
                "--port",
                "0",
                *extra_args,
            ],
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        self.lines: list[str] = []
        self._port: int | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if self._port is None and (m := _RUNNING.search(line)):
                self._port = int(m.group(1))
                self._ready.set()
        self._ready.set()

    async def wait_ready(self, timeout: float = 60.0) -> str:  # a loaded 2-core machine starts slowly
        deadline = time.monotonic() + timeout
        while not self._ready.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._port is None:
            self.kill()
            raise AssertionError("toolrun serve did not start:\n" + "".join(self.lines[-30:]))
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        self._reader.join(timeout=5)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.proc.stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()


@contextlib.asynccontextmanager
async def uvicorn_server(app: Any) -> AsyncIterator[str]:
    """Serve `app` with a real uvicorn on 127.0.0.1 (a free port) in this event loop; yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise AssertionError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=15)
