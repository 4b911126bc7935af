"""`DurableTasks`: MCP tasks kept as a `DurableAgent`'s background jobs (DBOS workflows + `JobStore` rows).

Give it to `toolrun.mcp.create_server(..., tasks=DurableTasks(agent))`: a `@tool(background=True)` tool
called as an MCP task starts the same job workflow a durable run starts (`toolrun.job`), so the task
survives a restart of the server process (DBOS recovers the workflow; an interrupted call runs again only
when its tool is idempotent, else it is reported as interrupted), and `tasks/get` reads the job's row from
any process sharing the database. The job runs through the agent's executor (give the MCP server the
same executor) with the caller's user id and roles; it is not part of any conversation.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dbos import DBOS, SetWorkflowID

from toolrun.integrations._dbos_job_workflow import job_payload, job_workflow
from toolrun.integrations._dbos_jobs import JobLimitError, JobStore
from toolrun.runtime import ToolExecutor
from toolrun.tools import ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.integrations.dbos import DurableAgent

__all__ = ["DurableTasks"]


class DurableTasks:
    """MCP tasks (the Tasks extension) as durable background jobs of `agent` (which needs a `JobStore`).

    Args:
        agent: The `DurableAgent` whose job workflow runs the calls (created before `DBOS.launch()`).
        poll_interval: Seconds between polls suggested to clients (`pollIntervalMs`).

    Tasks are kept as long as the job table keeps them (`ttlMs: null`); a user has at most the store's
    `max_running_per_user` running, MCP tasks and chat jobs together.
    """

    ttl: float | None = None

    def __init__(self, agent: DurableAgent, *, poll_interval: float = 1.0) -> None:
        if agent.jobs is None:
            raise ValueError("DurableTasks needs a DurableAgent with a job store (DurableAgent(jobs=...)).")
        if poll_interval <= 0:
            raise ValueError("poll_interval must be positive.")
        self.agent = agent
        self.jobs: JobStore = agent.jobs
        self.poll_interval = poll_interval
        self.max_running_per_user = self.jobs.max_running_per_user

    async def start(
        self, call: ToolCall, context: ToolContext[Any], executor: ToolExecutor
    ) -> Mapping[str, Any] | None:
        """Record the job (the task exists before the answer is sent) and start its workflow."""
        job_id = "job_" + secrets.token_hex(16)
        user = context.user_id or ""
        try:
            await self.jobs.create(job_id, user_id=user, tool=call.name, conversation_id=None, run_id=None)
        except JobLimitError:
            return None
        payload = job_payload(self.agent.name, job_id, call, context.evolve(conversation_id=None), None)
        with SetWorkflowID(job_id):
            await DBOS.start_workflow_async(job_workflow(), payload)
        return await self.jobs.get(job_id, user)

    async def get(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        return await self.jobs.get(task_id, user_id)

    async def cancel(self, task_id: str, user_id: str) -> Mapping[str, Any] | None:
        return await self.jobs.cancel(task_id, user_id)

    async def list_tasks(self, user_id: str) -> list[Mapping[str, Any]]:
        return list(await self.jobs.list_jobs(user_id))
