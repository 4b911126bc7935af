"""Subprocesses the tests start (servers, clients, workers): a free port to give one, stopping it, several
started at the same instant, and a scratch PostgreSQL database for them to race on."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import sqlalchemy as sa

from servers import POSTGRES_URL as POSTGRES_ADMIN_URL


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 10 s; its pipes closed."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


@contextlib.contextmanager
def scratch_postgres(prefix: str = "test") -> Iterator[str]:
    """A new, empty PostgreSQL database (`<prefix>_<uuid>`), dropped afterwards; its URL for psycopg 3,
    the synchronous driver the `dbos` extra installs (`postgresql+psycopg://`). Swap the driver with
    `sa.make_url(url).set(drivername="postgresql+asyncpg")` for the service's own."""
    admin = sa.make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+psycopg")
    name = f"{prefix}_{uuid.uuid4().hex[:16]}"
    engine = sa.create_engine(admin, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


# Imports first (the slow part of a start), then waits for the gate file, then runs: the processes meet
# at the gate and reach the database within milliseconds of each other.
_GATED = """
import runpy, sys, time
from pathlib import Path
gate, target, *args = sys.argv[1:]
if target == "toolrun":
    import toolrun.cli
    run = toolrun.cli.main
else:
    run = lambda: runpy.run_path(target, run_name="__main__")
    import toolrun.server, toolrun.integrations.dbos  # noqa: F401  (the slow imports, before the gate)
sys.argv = [target, *args]
Path(gate + "." + str(__import__("os").getpid())).write_text("")
while not Path(gate).exists():
    time.sleep(0.002)
run()
"""


def start_together(
    commands: Sequence[Sequence[str]],
    folder: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> list[subprocess.Popen[str]]:
    """Start each command (`["toolrun", ARGS...]` for the CLI, or `[script.py, ARGS...]`) in its own
    interpreter, and let them all go at the same instant once every one has imported what it needs."""
    gate = folder / f"gate-{uuid.uuid4().hex[:8]}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _GATED, str(gate), *command],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    deadline = time.monotonic() + timeout
    while len(list(folder.glob(f"{gate.name}.*"))) < len(processes):
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            break  # one died while importing: the caller sees its exit code and stderr
        time.sleep(0.01)
    gate.write_text("")
    return processes


def outcomes(processes: Sequence[subprocess.Popen[str]], timeout: float = 240) -> list[tuple[int, str, str]]:
    """Each process's exit code, stdout and stderr, once it has exited (pipes closed)."""
    results = []
    for process in processes:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        results.append((process.returncode, out, err))
    return results
