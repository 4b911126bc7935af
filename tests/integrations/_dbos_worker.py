"""A worker process for the DurableAgent crash tests: `python _dbos_worker.py ARGS`.

It runs (or recovers) durable runs whose model and tools count what they do in a database table
(`crash_events`: one row per thing done, keyed by the run's key), and pauses at the crash points when
`--crash` is given: each pause first writes `<markers>/<key>.<point>` so the test kills it on observable
state. Scenarios, by the key's last part:

- `model`: the second model request hangs after it was sent (kill during a model request);
- `tool`: a slow non-idempotent tool hangs mid-call (kill during a tool; it must not run again);
- `idem`: a slow idempotent tool hangs mid-call (it runs again, its effect keyed by `ctx.idempotency_key`);
- `between`: the second model request hangs before it is sent, after the tool's step was recorded;
- `approval`: a destructive tool waits for its approval (kill while the workflow waits).

Each run's final state goes to `<out>/<key>.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

EVENTS = sa.Table(
    "crash_events",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_key", sa.String(200), nullable=False, index=True),
    sa.Column("what", sa.String(200), nullable=False),
)
EFFECTS = sa.Table(
    "crash_effects",
    sa.MetaData(),
    sa.Column("idempotency_key", sa.String(200), primary_key=True),
    sa.Column("run_key", sa.String(200), nullable=False),
)

SCENARIOS = ("model", "tool", "idem", "between", "approval")


async def create_tables(engine: AsyncEngine) -> None:
    async with engine.begin() as db:
        await db.run_sync(EVENTS.metadata.create_all)
        await db.run_sync(EFFECTS.metadata.create_all)


async def counts(engine: AsyncEngine, run_key: str) -> dict[str, int]:
    """How many times each thing was done in the run `run_key` (and `effects`: unique effect rows)."""
    async with engine.connect() as db:
        rows = (
            await db.execute(
                sa.select(EVENTS.c.what, sa.func.count())
                .where(EVENTS.c.run_key == run_key)
                .group_by(EVENTS.c.what)
            )
        ).all()
        effects = (
            await db.execute(sa.select(sa.func.count()).where(EFFECTS.c.run_key == run_key))
        ).scalar_one()
    return {**{str(what): int(n) for what, n in rows}, "effects": effects}


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--system-db", required=True)
    parser.add_argument("--counters-db", required=True)
    parser.add_argument("--executor", required=True)
    parser.add_argument("--markers", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", nargs="+", required=True, help="run keys, ending in a scenario name")
    parser.add_argument("--start", action="store_true", help="start the runs (else: wait for them)")
    parser.add_argument("--crash", action="store_true", help="hang at the crash points")
    parser.add_argument("--approve", action="store_true", help="approve pending confirmations")
    parser.add_argument("--approve-after", type=Path, default=None, help="approve only once this file exists")
    parser.add_argument("--lease", type=float, default=None, help="take over dead executors' runs")
    args = parser.parse_args(argv)

    from dbos import DBOS

    from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry, tool
    from toolrun.integrations.dbos import DurableAgent, ExecutorLease, dbos_config
    from toolrun.models import AssistantMessage, FinalResponse, ModelRequest, ModelResponse, UserMessage
    from toolrun.store.sql import SQLConfirmationStore

    engine = create_async_engine(args.counters_db)
    await create_tables(engine)

    async def record(run_key: str, what: str) -> None:
        async with engine.begin() as db:
            await db.execute(sa.insert(EVENTS).values(run_key=run_key, what=what))

    async def hang(run_key: str, point: str) -> None:
        (args.markers / f"{run_key}.{point}").write_text(str(os.getpid()))
        await asyncio.Event().wait()  # until SIGKILL

    registry = ToolRegistry()

    @registry.register
    @tool
    async def add_row(key: str) -> str:
        """Add a row."""
        await record(key, "effect:add_row")
        return "added"

    @registry.register
    @tool(timeout=120)
    async def slow_write(key: str) -> str:
        """Write slowly; not idempotent."""
        await record(key, "tool:slow_write:start")
        if args.crash:
            await hang(key, "tool")
        await record(key, "effect:slow_write")
        return "written"

    @registry.register
    @tool(idempotent=True, timeout=120)
    async def slow_put(key: str, *, ctx: ToolContext) -> str:
        """Put slowly, keyed: idempotent."""
        await record(key, "tool:slow_put:start")
        async with engine.begin() as db:  # the effect, keyed: a repeat of the same call adds nothing
            exists = (
                await db.execute(
                    sa.select(EFFECTS.c.idempotency_key).where(
                        EFFECTS.c.idempotency_key == ctx.idempotency_key
                    )
                )
            ).first()
            if exists is None:
                await db.execute(sa.insert(EFFECTS).values(idempotency_key=ctx.idempotency_key, run_key=key))
        if args.crash:
            await hang(key, "idem")
        return "put"

    @registry.register
    @tool(destructive=True)
    async def remove_row(key: str) -> str:
        """Remove a row (needs approval)."""
        await record(key, "effect:remove_row")
        return "removed"

    first_tool = {
        "model": "add_row",
        "tool": "slow_write",
        "idem": "slow_put",
        "between": "add_row",
        "approval": "remove_row",
    }

    class CountingModel:
        """Deterministic: turn 0 calls the scenario's tool, turn 1 answers; counts each request."""

        name = "counting"

        async def request(self, request: ModelRequest) -> ModelResponse:
            key = next(m.content for m in request.messages if isinstance(m, UserMessage))
            scenario = key.rsplit(":", 1)[1]
            turn = sum(isinstance(m, AssistantMessage) for m in request.messages)
            await record(key, f"model:{turn}:begin")
            if args.crash and turn == 1 and scenario == "between":
                await hang(key, "between")
            await record(key, f"model:{turn}:sent")
            if args.crash and turn == 1 and scenario == "model":
                await hang(key, "model")
            if turn == 0:
                call = ToolCall(id=f"call_{scenario}", name=first_tool[scenario], arguments={"key": key})
                response = ModelResponse.from_tool_calls(call)
            else:
                response = ModelResponse.from_text(f"done {scenario}")
            await record(key, f"model:{turn}:done")
            return response

        async def stream(self, request: ModelRequest) -> Any:
            yield FinalResponse(response=await self.request(request))

    config = dbos_config(args.system_db, executor_id=args.executor, polling_interval=0.05)
    DBOS(config=config)
    # Approvals outlive the process: the confirmation store is in the database, the hash key shared.
    confirmations = SQLConfirmationStore(engine, table_prefix="crash_")
    await confirmations.create_tables()
    executor = ToolExecutor(
        registry, confirmations=confirmations, hash_key=b"crash-test-shared-key-0123456789"
    )
    agent = DurableAgent(CountingModel(), executor=executor, name="crash_test", max_steps=4)
    DBOS.launch()
    lease = None
    if args.lease is not None:
        lease = ExecutorLease(args.system_db, executor_id=args.executor, seconds=args.lease)
        lease.start()
    user = ToolContext(user_id="u1")

    async def follow(key: str) -> None:
        run_id = "run-" + key.replace(":", "-")
        if args.start:
            await agent.start(key, run_id=run_id, context=user)
        else:
            while await DBOS.get_workflow_status_async(run_id) is None:
                await asyncio.sleep(0.1)
        seq = 0
        while True:
            run = await agent.wait(run_id, after=seq)
            seq += 1
            if run.status != "awaiting_confirmation":
                (args.out / f"{key}.json").write_text(json.dumps(run.to_dict()))
                return
            if not args.approve:
                await hang(key, "approval")
            while args.approve_after is not None and not args.approve_after.exists():
                await asyncio.sleep(0.05)
            seq = await agent.decide(run_id, {run.pending[0].confirmation_id: True}, context=user)

    async with asyncio.timeout(90):
        await asyncio.gather(*(follow(key) for key in args.runs))
    if lease is not None:
        lease.stop()
    await engine.dispose()
    DBOS.destroy()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
