"""Real tools, written the way users write them, against local servers (127.0.0.1 only).

Each tool takes `seconds`: how long its real work takes (a server that answers late, `pg_sleep`, a child
process that sleeps, a SQLite query that pauses per row). `SLOW` is well inside every tool's `LIMIT`;
`HANG` (or `OVERRUN` for work that runs on in a thread the executor cannot stop) is far past it.
Most tools also cancel themselves on purpose along the way, as their libraries do: httpx's own read
timeout, `asyncio.timeout`, anyio's `move_on_after` and task groups, a refused connection retried by the
transport. None of that is the executor's business: the tool must still return its result.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import asyncpg
import httpx

from toolrun import Tool, tool
from toolrun.runtime import ProcessIsolation

from ._isolated_io import get_blocking
from ._localhttp import free_port

SSL = ssl.create_default_context()
"""One TLS context for every client (httpx loads the CA bundle per client otherwise: 0.3 s of CPU)."""

LIMIT = 6.0
"""Every real tool's `timeout` (seconds): room for a loaded 2-core machine running 22 of them at once."""
SLOW = 2.0
"""The slow path: real work of this many seconds, well inside `LIMIT`."""
HANG = 30.0
"""The timeout path of work the executor can stop (a coroutine, a child process, a worker process)."""
OVERRUN = LIMIT + 1.0
"""The timeout path of work in a thread, which runs on after the `TIMEOUT` (kept short: it holds a thread)."""
UNDO = 3.0
"""How long the compensating call of `transfer` takes after a cancellation (longer than `cancel_grace`)."""


@dataclass(kw_only=True)
class Env:
    """Where the real tools find their servers, and what they leave behind for the tests to check."""

    http: str
    """Base URL of the local HTTP server."""
    postgres: str
    """asyncpg DSN of this helper's own PostgreSQL database."""
    workdir: Path
    """A folder for SQLite files and the sync tool's files."""
    isolation: ProcessIsolation
    """Worker processes for the killable sync tool."""
    app_name: str = "toolrun-realtools"
    """PostgreSQL `application_name` of the tools' connections (to find their backends)."""
    children: list[int] = field(default_factory=list)
    """Process ids of the child processes `run_child` started."""


def real_tools(env: Env) -> list[Tool]:
    """The real tools over `env` (a fresh set per door: tool objects are cheap)."""
    host, port = "127.0.0.1", int(env.http.rsplit(":", 1)[1])

    @tool(timeout=LIMIT, read_only=True)
    async def fetch_report(seconds: float) -> dict[str, Any]:
        """Fetch a report from the reporting API (retries a dead mirror, then the main server)."""
        transport = httpx.AsyncHTTPTransport(retries=1, verify=SSL)
        async with httpx.AsyncClient(
            transport=transport, timeout=httpx.Timeout(10.0, connect=2.0), base_url=env.http, verify=SSL
        ) as client:
            try:  # the mirror is down: the transport retries the connection, then gives up
                await client.get(f"http://127.0.0.1:{free_port()}/slow")
                refused = False
            except httpx.ConnectError:
                refused = True
            try:  # a quick probe under httpx's own short read timeout
                await client.get("/slow", params={"s": 5}, timeout=0.2)
                probed = True
            except httpx.ReadTimeout:
                probed = False
            first = (await client.get("/slow", params={"s": seconds})).json()
            ports = {first["port"]}
            for _ in range(2):  # the pool keeps the connection: same client port each time
                ports.add((await client.get("/slow", params={"s": 0})).json()["port"])
        return {"slept": first["slept"], "connections": len(ports), "refused": refused, "probed": probed}

    @tool(timeout=LIMIT)
    async def fetch_with_fallback(seconds: float) -> str:
        """Ask the primary service with a short asyncio.timeout, then fall back to the slow one."""
        async with httpx.AsyncClient(base_url=env.http, timeout=30.0, verify=SSL) as client:
            try:
                async with asyncio.timeout(0.3):
                    await client.get("/slow", params={"s": 10})
                return "primary"
            except TimeoutError:
                pass
            r = await client.get("/slow", params={"s": seconds})
            r.raise_for_status()
            return f"fallback after {r.json()['slept']}"

    @tool(timeout=LIMIT)
    async def fetch_all(seconds: float) -> dict[str, Any]:
        """Fetch three pages concurrently (anyio task group); an optional extra gets 0.2 s at most."""
        got: list[float] = []
        async with httpx.AsyncClient(base_url=env.http, timeout=30.0, verify=SSL) as client:

            async def one(s: float) -> None:
                got.append((await client.get("/slow", params={"s": s})).json()["slept"])

            with anyio.move_on_after(0.2) as extra:
                await one(5)
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(one, seconds)
        return {"pages": len(got), "extra_skipped": extra.cancelled_caught}

    @tool(timeout=LIMIT)
    async def read_in_thread(seconds: float) -> float:
        """Read a page with a blocking client in a worker thread (asyncio.to_thread)."""
        page = await asyncio.to_thread(get_blocking, host, port, f"/slow?s={seconds}", seconds + 5)
        return float(page["slept"])  # type: ignore[arg-type]

    @tool(timeout=LIMIT)
    def export_page(seconds: float) -> float:
        """Download a page over a plain socket and store it in a file (a sync tool: blocking I/O)."""
        page = get_blocking(host, port, f"/slow?s={seconds}", seconds + 5)
        target = env.workdir / f"export-{time.monotonic_ns()}.json"
        target.write_text(json.dumps(page))
        return float(json.loads(target.read_text())["slept"])

    @tool(timeout=LIMIT)
    async def read_isolated(seconds: float) -> float:
        """Read a page with a blocking client in a worker process (killed when the call times out)."""
        page = await env.isolation.run(get_blocking, host, port, f"/slow?s={seconds}", seconds + 5)
        return float(page["slept"])  # type: ignore[arg-type]

    @tool(timeout=LIMIT)
    async def run_child(seconds: float) -> str:
        """Run a child process and return what it prints (killed if the call is cancelled)."""
        script = "import sys, time; time.sleep(float(sys.argv[1])); print('slept', sys.argv[1])"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, str(seconds), stdout=asyncio.subprocess.PIPE
        )
        env.children.append(proc.pid)
        try:
            out, _ = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return out.decode().strip()

    @tool(timeout=LIMIT)
    async def query_postgres(seconds: float) -> str:
        """Run a slow query on PostgreSQL (asyncpg)."""
        conn = await asyncpg.connect(env.postgres, server_settings={"application_name": env.app_name})
        try:
            await conn.fetchval("SELECT pg_sleep($1)", seconds)
            return str(await conn.fetchval("SELECT 'slept ' || $1::text", str(seconds)))
        finally:
            await conn.close()

    @tool(timeout=LIMIT)
    async def query_sqlite(seconds: float) -> int:
        """Count rows of a slow SQLite query (aiosqlite); interrupts the query if cancelled."""
        rows = int(seconds * 50)
        async with aiosqlite.connect(env.workdir / "tools.sqlite") as db:
            await db.create_function("pause", 1, lambda ms: time.sleep(ms / 1000) or 1)
            try:
                cursor = await db.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                    "SELECT count(pause(20)) FROM n",
                    (rows,),
                )
                row = await cursor.fetchone()
            except asyncio.CancelledError:
                await db.interrupt()  # the query runs in aiosqlite's thread: stop it there too
                raise
            except sqlite3.OperationalError:  # pragma: no cover - only after an interrupt
                raise
        return int(row[0]) if row else 0

    @tool(timeout=LIMIT)
    async def fan_out(seconds: float) -> list[float]:
        """Start three requests as tasks of its own and gather them."""
        async with httpx.AsyncClient(base_url=env.http, timeout=30.0, verify=SSL) as client:

            async def one(s: float) -> float:
                return float((await client.get("/slow", params={"s": s})).json()["slept"])

            tasks = [asyncio.create_task(one(seconds)) for _ in range(3)]
            return list(await asyncio.gather(*tasks))

    @tool(timeout=LIMIT, idempotent=True)
    async def transfer(seconds: float) -> str:
        """Move money (with an idempotency key); if cancelled midway, call the compensating endpoint first."""
        async with httpx.AsyncClient(base_url=env.http, timeout=30.0, verify=SSL) as client:
            try:
                await client.get("/slow", params={"s": seconds})
            except asyncio.CancelledError:
                await client.post("/undo", params={"s": UNDO})  # compensate before giving up
                raise
        return "transferred"

    return [
        fetch_report,
        fetch_with_fallback,
        fetch_all,
        read_in_thread,
        export_page,
        read_isolated,
        run_child,
        query_postgres,
        query_sqlite,
        fan_out,
        transfer,
    ]


def children_alive(pids: list[int]) -> list[int]:
    """The child processes of `run_child` that still exist (each must be killed and reaped)."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive
