"""Subprocesses the tests start (servers, clients): stopping one the same way everywhere."""

from __future__ import annotations

import subprocess


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
