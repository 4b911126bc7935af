"""One side of the cross-process plan test, run in a fresh interpreter by test_plan_cross_process.py.

    python _plan_cross_process_script.py start  DB OUT
    python _plan_cross_process_script.py resume DB IN OUT

`start` runs an agent with the planning section until the destructive call pauses it (after the model
made a plan) and writes `run.to_json()` to OUT. `resume` reads the paused run from IN, approves its
confirmation, finishes the run and writes it to OUT, with the system message of the first request made in
this process appended as `"first_request_system"`. Both build everything afresh; only the SQLite
confirmation store (and the JSON) go from one to the other.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
from toolrun.agent import AgentRun
from toolrun.models import ScriptedModel
from toolrun.planning import planning_section
from toolrun.prompts import Prompt
from toolrun.store.sql import SQLConfirmationStore

HASH_KEY = b"plan-cross-process-test-key-012345"
CTX = ToolContext(user_id="u1")
SCRIPT = [
    ToolCall(
        name="planning_setup_plan",
        arguments={"objective": "Clean up", "initial_steps": ["Delete t1", "Report"]},
    ),
    [
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "in_progress"}),
        ToolCall(id="d1", name="delete_task", arguments={"task_id": "t1"}),
    ],
    [
        ToolCall(name="planning_update_step", arguments={"step_id": 1, "status": "done"}),
        ToolCall(name="planning_update_step", arguments={"step_id": 2, "status": "done"}),
    ],
    "Deleted t1.",
]


@tool(destructive=True)
def delete_task(task_id: str) -> dict[str, str]:
    """Delete a task permanently."""
    return {"deleted": task_id}


async def main(argv: list[str]) -> None:
    action, db = argv[0], argv[1]
    store = SQLConfirmationStore(f"sqlite+aiosqlite:///{db}", table_prefix="plan_xproc_")
    prompt = Prompt([planning_section("plan_act_reflect")])
    executor = ToolExecutor(
        ToolRegistry([delete_task, *prompt.tools]), confirmations=store, hash_key=HASH_KEY
    )
    model = ScriptedModel(SCRIPT)
    agent = Agent(model, prompt=prompt, executor=executor)
    try:
        await store.create_tables()
        if action == "start":
            run = await agent.run("Delete task t1 and tell me.", context=CTX)
            Path(argv[2]).write_text(run.to_json())
        elif action == "resume":
            paused = AgentRun.from_json(Path(argv[2]).read_text())
            run = await agent.resume(paused, {p.confirmation_id: True for p in paused.pending}, context=CTX)
            data = run.to_dict()
            data["first_request_system"] = model.requests[0].messages[0].to_dict()["content"]
            Path(argv[3]).write_text(json.dumps(data))
        else:
            raise SystemExit(f"unknown action {action!r}")
    finally:
        await executor.aclose()
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
