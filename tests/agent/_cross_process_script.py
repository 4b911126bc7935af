"""One side of the cross-process resume test, run in a fresh interpreter by test_resume_cross_process.py.

    python _cross_process_script.py start  DB RUNS OUT
    python _cross_process_script.py resume DB RUNS IN OUT approve|deny [KEY]

`start` runs the agent until it pauses on the destructive call and writes it signed
(`agent.dump_run(run)`) to OUT. `resume` reads a paused run from IN (`agent.load_run`, which checks the
signature), decides its confirmation and writes the final run to OUT. Both build everything afresh
(registry, model, executor, SQLite confirmation store on DB, the same hash key — or KEY, to play a
misconfigured process), as two server processes would. The tool appends "<pid> <task_id>" to RUNS each
time it runs. The process prints its pid.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun
from toolrun.models import ScriptedModel
from toolrun.store.sql import SQLConfirmationStore

HASH_KEY = b"cross-process-resume-test-key-0123"
CTX = ToolContext(user_id="u1")
SCRIPT = [ToolCall(id="d1", name="delete_task", arguments={"task_id": "t1"}), "Done with t1."]


def make_registry(runs: Path) -> ToolRegistry:
    @tool(destructive=True)
    def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        with runs.open("a") as f:
            f.write(f"{os.getpid()} {task_id}\n")
        return {"deleted": task_id}

    return ToolRegistry([delete_task])


async def main(argv: list[str]) -> None:
    action, db, runs = argv[0], argv[1], Path(argv[2])
    store = SQLConfirmationStore(f"sqlite+aiosqlite:///{db}", table_prefix="xproc_")
    registry = make_registry(runs)
    key = argv[6].encode() if action == "resume" and len(argv) > 6 else HASH_KEY
    executor = ToolExecutor(registry, confirmations=store, hash_key=key)
    agent = Agent(ScriptedModel(SCRIPT), registry, executor=executor)
    try:
        await store.create_tables()
        if action == "start":
            run = await agent.run("Delete task t1.", context=CTX)
            Path(argv[3]).write_text(agent.dump_run(run))
        elif action == "resume":
            text = Path(argv[3]).read_text()
            # A process with another key cannot check the signature: it reads the run unverified, to
            # show what the confirmation store then refuses.
            paused = agent.load_run(text) if key == HASH_KEY else AgentRun.from_json(text)
            decision = {"approve": True, "deny": False}[argv[5]]
            approvals = {p.confirmation_id: decision for p in paused.pending}
            run = await agent.resume(paused, approvals, context=CTX)
            Path(argv[4]).write_text(agent.dump_run(run))
        else:
            raise SystemExit(f"unknown action {action!r}")
    finally:
        await executor.aclose()
        await store.aclose()
    print(os.getpid())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
