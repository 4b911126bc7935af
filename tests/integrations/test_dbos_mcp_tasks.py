"""MCP tasks kept as durable jobs (`DurableTasks`): the official client over stdio, a server killed in the
middle of a task's call, and the task finished by the restarted server (DBOS recovery)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from dbos import DBOS
from mcp.shared.exceptions import MCPError

from mcp import Client, StdioServerParameters
from processes import scratch_postgres
from toolrun import ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.integrations.dbos import DurableAgent, DurableTasks, JobStore, dbos_config
from toolrun.mcp import create_server

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))
from tasks_helpers import call, cancel, declaring, get, until_final

HERE = Path(__file__).parent
pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=["sqlite", "postgresql"])
async def dbos_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """DBOS launched on a SQLite file, or on a scratch PostgreSQL database through psycopg 3 (the driver
    the `dbos` extra installs)."""
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path}/dbos.sqlite"
        else:
            url = stack.enter_context(scratch_postgres("hpg_tasks"))
        DBOS(config=dbos_config(url, polling_interval=0.02))
        DBOS.launch()
        try:
            yield url
        finally:
            DBOS.destroy()


async def test_a_task_is_a_durable_job_that_only_its_user_sees(dbos_sqlite: str) -> None:
    gate = asyncio.Event()
    cancelled: list[str] = []

    @tool(background=True, timeout=30)
    async def crunch(n: int, *, ctx: ToolContext) -> dict[str, int]:
        """Crunch numbers for a long time."""
        await ctx.report_progress(1, total=2, message="halfway")
        try:
            await gate.wait()
        except asyncio.CancelledError:
            cancelled.append(str(n))
            raise
        return {"sum": n * 2}

    registry = ToolRegistry([crunch])
    jobs = JobStore(dbos_sqlite)
    agent = DurableAgent("test", registry, name="mcp_durable_a", jobs=jobs)
    tasks = DurableTasks(agent, poll_interval=0.02)
    server = create_server(registry, executor=ToolExecutor(registry), principal="alice", tasks=tasks)
    async with Client(server, extensions=declaring()) as client:
        created = await call(client, "crunch", {"n": 21})
        recorded = await jobs.get(created["taskId"], "alice")  # durably created before the answer
        doomed = await call(client, "crunch", {"n": 1})
        while (await get(client, created["taskId"])).get("statusMessage") != "halfway (1/2)":
            await asyncio.sleep(0.02)
        await cancel(client, doomed["taskId"])
        stopped = await until_final(client, doomed["taskId"])
        handle = await DBOS.retrieve_workflow_async(doomed["taskId"])
        ended = await handle.get_result()  # the job's workflow ends once its tool has been cancelled
        gate.set()
        done = await until_final(client, created["taskId"])
    assert created["resultType"] == "task" and created["taskId"].startswith("job_")
    assert created["ttlMs"] is None and created["pollIntervalMs"] == 20
    assert recorded is not None and recorded["tool"] == "crunch" and recorded["conversation_id"] is None
    assert await jobs.get(created["taskId"], "mallory") is None
    assert done["status"] == "completed" and done["result"]["structuredContent"] == {"sum": 42}
    assert stopped["status"] == "cancelled" and cancelled == ["1"]
    assert ended["error"]["details"] == {"cancelled": True}
    status = await DBOS.get_workflow_status_async(created["taskId"])
    assert status is not None and status.status == "SUCCESS"  # the job was a workflow
    jobs.close()


def _server(url: str, folder: Path) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return StdioServerParameters(
        command=sys.executable, args=[str(HERE / "_mcp_task_server.py"), url, str(folder)], env=env
    )


async def _start_and_crash(params: StdioServerParameters, folder: Path, tool_name: str) -> str:
    """Start the task, let the tool run and kill its process mid-call; the task id."""
    task_id = ""
    with contextlib.suppress(Exception, BaseExceptionGroup):
        async with Client(params, extensions=declaring()) as client:
            created = await call(client, tool_name, {"name": "x"})
            task_id = created["taskId"]
            (folder / "go").write_text("1")
            async with asyncio.timeout(30):
                while not (folder / f"{tool_name}.crashed").exists():
                    await asyncio.sleep(0.02)
                while True:  # until the dead server's pipe closes
                    await get(client, task_id)
                    await asyncio.sleep(0.05)
    return task_id


@pytest.mark.slow
@pytest.mark.parametrize("tool_name", ["reindex", "send_invoice"])
async def test_a_server_killed_mid_task_finishes_it_after_restart(tmp_path: Path, tool_name: str) -> None:
    url = f"sqlite:///{tmp_path}/dbos.sqlite"
    params = _server(url, tmp_path)
    task_id = await _start_and_crash(params, tmp_path, tool_name)
    assert task_id.startswith("job_")
    starts = (tmp_path / f"{tool_name}.starts").read_text().split()
    assert len(starts) == 1
    async with Client(params, extensions=declaring()) as client:  # the restarted server recovers the job
        done = await until_final(client, task_id)
        with pytest.raises(MCPError) as unknown:
            await get(client, "job_" + "0" * 32)
    assert unknown.value.code == types.INVALID_PARAMS
    assert done["status"] == "completed"
    result: dict[str, Any] = done["result"]
    effects = (
        (tmp_path / f"{tool_name}.effects").read_text().split()
        if (tmp_path / f"{tool_name}.effects").exists()
        else []
    )
    if tool_name == "reindex":  # idempotent: run again, with the same idempotency key
        assert not result["isError"] and result["structuredContent"] == {"done": "reindex"}
        assert len((tmp_path / f"{tool_name}.starts").read_text().split()) == 2
        assert len(effects) == 1
    else:  # not idempotent: not run again; reported as interrupted
        assert result["isError"] and "TIMEOUT" in result["content"][0]["text"]
        assert "may or may not" in result["content"][0]["text"]
        assert len((tmp_path / f"{tool_name}.starts").read_text().split()) == 1
        assert effects == []
