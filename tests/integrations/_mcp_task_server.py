"""An MCP stdio server whose background tools run as durable MCP tasks: `python _mcp_task_server.py URL DIR`.

The tools crash the process (SIGKILL, from inside the call) the first time they run, once the test has
written `<DIR>/go`; each start is a line in `<DIR>/<tool>.starts`, each completed effect a line in
`<DIR>/<tool>.effects` keyed by `ctx.idempotency_key`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.integrations.dbos import DurableAgent, DurableTasks, JobStore, dbos_config
from toolrun.mcp import create_server, serve_stdio
from toolrun.models import ScriptedModel

URL, DIR = sys.argv[1], Path(sys.argv[2])


async def _work(name: str, ctx: ToolContext) -> dict[str, str]:
    while not (DIR / "go").exists():
        await asyncio.sleep(0.01)
    with (DIR / f"{name}.starts").open("a") as f:
        f.write(f"{os.getpid()}\n")
    if not (DIR / f"{name}.crashed").exists():
        (DIR / f"{name}.crashed").write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)  # killed mid-call
    with (DIR / f"{name}.effects").open("a") as f:
        f.write(f"{ctx.idempotency_key}\n")
    return {"done": name}


@tool(background=True, idempotent=True, timeout=30)
async def reindex(name: str, *, ctx: ToolContext) -> dict[str, str]:
    """Rebuild the search index (safe to repeat)."""
    return await _work("reindex", ctx)


@tool(background=True, timeout=30)
async def send_invoice(name: str, *, ctx: ToolContext) -> dict[str, str]:
    """Send an invoice (not safe to repeat)."""
    return await _work("send_invoice", ctx)


async def main() -> None:
    registry = ToolRegistry([reindex, send_invoice])
    agent = DurableAgent(ScriptedModel([]), registry, name="mcp_tasks", jobs=JobStore(URL))
    from dbos import DBOS

    DBOS(config=dbos_config(URL, polling_interval=0.05))
    DBOS.launch()
    server = create_server(
        registry,
        executor=ToolExecutor(registry),
        principal="alice",
        tasks=DurableTasks(agent, poll_interval=0.05),
    )
    try:
        await serve_stdio(server)
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    asyncio.run(main())
