"""One process of a team's app, run in a fresh interpreter by test_decide_processes.py.

    python _decide_process_script.py pause  URL RUNS          -> prints {"confirmation_id", "run_id"}
    python _decide_process_script.py decide URL RUNS CID USER -> prints {"status", "output"[, "code"]} or
                                                                {"refused"}
    python _decide_process_script.py stall  URL RUNS CID USER -> decides as `decide`, but its tool never
                                                                returns (the test kills the process)

Each builds everything afresh (registry, model, executor, the SQL stores on URL, the shared hash key), as
a worker of the app does at start-up. `pause` runs until the destructive call pauses the run (kept in the
run store) and exits; `decide` approves the confirmation by id as USER. The tool appends "<pid> <task>" to
RUNS each time it runs. `stall` holds its claim on the run for 1 s only (`CLAIM_LEASE`), so a decision
after its death takes the run over a second later.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import DecisionRefusedError
from toolrun.models import ScriptedModel
from toolrun.store.sql import create_sql_stores

HASH_KEY = b"decide-processes-test-key-012345"
SCRIPT = [ToolCall(id="d1", name="delete_task", arguments={"task_id": "t1"}), "Task t1 is gone."]


async def main(action: str, url: str, runs: Path, *rest: str) -> None:
    @tool(destructive=True)
    def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        with runs.open("a") as f:
            f.write(f"{os.getpid()} {task_id}\n")
        if action == "stall":
            time.sleep(600)  # killed here, mid-call, its result never kept
        return {"deleted": task_id}

    stores = create_sql_stores(url, table_prefix="app_")
    await stores.create_tables()
    executor = ToolExecutor(
        ToolRegistry([delete_task]), confirmations=stores.confirmations, hash_key=HASH_KEY
    )
    agent = Agent(ScriptedModel(SCRIPT), executor=executor, runs=stores.runs)
    try:
        if action == "pause":
            run = await agent.run("Delete task t1", context=ToolContext(user_id="u1"))
            out = {"status": run.status, "confirmation_id": run.pending[0].confirmation_id}
        else:
            cid, user = rest
            try:
                run = await agent.decide(cid, True, context=ToolContext(user_id=user))
                out = {"status": run.status, "output": run.output}
                if run.error_code is not None:
                    out["code"] = str(run.error_code)
            except DecisionRefusedError as refused:
                out = {"refused": str(refused.code)}
        print(json.dumps(out), flush=True)
    finally:
        await executor.aclose()
        await stores.aclose()


if __name__ == "__main__":
    if sys.argv[1] == "stall":
        import toolrun.agent._decide

        toolrun.agent._decide.CLAIM_LEASE = 1.0
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), *sys.argv[4:]))
