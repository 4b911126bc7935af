"""A process with background jobs on durable runs (`python _dbos_job_worker.py URL EXECUTOR FOLDER ROLE`).

`victim`: a run starts a background job whose idempotent tool hangs (it writes `<FOLDER>/started` first),
until SIGKILL. `survivor`: runs alongside with a lease; once the victim's lease runs out it takes the dead
executor's job over (the tool runs again, keyed), and writes the finished job to `<FOLDER>/job.json`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


async def main(url: str, executor: str, folder: Path, role: str) -> None:
    from dbos import DBOS

    from toolrun import ToolCall, ToolContext, ToolRegistry, tool
    from toolrun.integrations.dbos import DurableAgent, ExecutorLease, JobStore, dbos_config
    from toolrun.models import ScriptedModel

    @tool(background=True, idempotent=True, timeout=120)
    async def slow_job(key: str) -> dict[str, str]:
        """A long job."""
        with (folder / "starts").open("a") as f:
            f.write(f"{os.getpid()}\n")
        if role == "victim":
            (folder / "started").write_text("")
            await asyncio.Event().wait()  # until SIGKILL
        return {"done": key}

    jobs = JobStore(url)
    script = [ToolCall(id="c1", name="slow_job", arguments={"key": "k1"}), "Started."]
    agent = DurableAgent(ScriptedModel(script), ToolRegistry([slow_job]), name="takeover", jobs=jobs)
    DBOS(config=dbos_config(url, executor_id=executor, polling_interval=0.1))
    DBOS.launch()
    lease = ExecutorLease(url, executor_id=executor, seconds=1.5)
    lease.start()
    if role == "victim":
        run = await agent.run("go", context=ToolContext(user_id="u1"))
        (folder / "run.json").write_text(json.dumps(run.to_dict()))
        await asyncio.Event().wait()
    (folder / "ready").write_text("")
    async with asyncio.timeout(150):
        while True:
            done = [j for j in await jobs.list_jobs("u1") if j["status"] != "running"]
            if done:
                (folder / "job.json").write_text(json.dumps(done[0]))
                break
            await asyncio.sleep(0.1)
    lease.stop()
    DBOS.destroy()
    jobs.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]))
