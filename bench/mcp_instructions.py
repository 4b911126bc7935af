"""Instructions per MCP `tools/call` round trip, counted by valgrind's callgrind (no timing noise).

Run one candidate per process, under callgrind with collection on, e.g.:

    PYTHONPATH=src valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \\
        python bench/mcp_instructions.py "inmem 2025" toolrun 300

The script connects the official client as `bench/mcp.py` does, makes 50 warm-up calls, zeroes the
counters (`callgrind_control -z`), makes N calls and dumps (`callgrind_control -d`): the dump (the file
ending in `.1`) holds only the N calls, client and server. Divide its `summary:` by N. Candidates:
``toolrun``, ``toolrun_json`` (HTTP), ``fastmcp``, ``sdk_lowlevel``, ``client_floor`` (2025, HTTP).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
import mcp  # noqa: F401  (the SDK first; this folder holds bench/mcp.py)

sys.path.append(str(_HERE))

import importlib.util

_spec = importlib.util.spec_from_file_location("bench_mcp", _HERE / "mcp.py")
assert _spec is not None and _spec.loader is not None
bench_mcp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_mcp)

FACTORIES = {
    "toolrun": bench_mcp.toolrun_server,
    "toolrun_json": bench_mcp.toolrun_json_server,
    "fastmcp": bench_mcp.fastmcp_server,
    "sdk_lowlevel": bench_mcp.lowlevel_server,
    "client_floor": bench_mcp.client_floor_server,
}


def callgrind_control(flag: str) -> None:
    subprocess.run(["callgrind_control", flag, str(os.getpid())], check=True, capture_output=True)


async def main(transport: str, candidate: str, n: int) -> None:
    logging.getLogger("toolrun.audit").disabled = True
    async with AsyncExitStack() as stack:
        op = await bench_mcp.maker(stack, FACTORIES[candidate], transport)()
        for _ in range(50):
            await op()
        gc.collect()
        callgrind_control("-z")
        for _ in range(n):
            await op()
        callgrind_control("-d")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
