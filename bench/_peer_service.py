"""The peer stacks of bench/service.py, each as its documentation deploys it: a FastAPI route, the agent
framework's own model client on the scripted model over HTTP (bench/_scripted_llm.py), the same task tools on
the same SQL store (toolrun's `TaskStore`: same schema, same index), the conversation stored per turn.

- `agents`: OpenAI Agents SDK, `Runner.run(agent, message, context=...)`, the model as
  `OpenAIChatCompletionsModel(model=..., openai_client=AsyncOpenAI(base_url=...))`, tracing off; the history
  stored as `result.to_input_list()` JSON.
- `pydantic_ai`: Pydantic AI, `agent.run(message, deps=...)`, the model as
  `OpenAIChatModel(..., provider=OpenAIProvider(base_url=...))`; the history as `all_messages_json()`.
- `floor`: the turn by hand: two `httpx` posts of a hand-built body, `json` both ways, one `TaskStore.create`,
  one history insert. What a turn cannot cost less than on this stack (FastAPI, SQLAlchemy, httpx).

Each peer gets the toolrun service's system prompt and three task tools (create, update, query).
Run as:

    python bench/_peer_service.py KIND PORT DATABASE_URL TOKENS_JSON MODEL_BASE_URL
"""

import json
import os
import secrets
import sys
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from toolrun.apps.tasks import TaskQuery, TaskStore
from toolrun.server._app import INSTRUCTIONS

SYSTEM = INSTRUCTIONS.format(today="2026-01-01")

history = sa.Table(
    "peer_conversations",
    sa.MetaData(),
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("messages", sa.Text(), nullable=False),
)


class ChatIn(BaseModel):
    message: str
    conversation_id: str | None = None


@dataclass
class Deps:
    user_id: str
    store: TaskStore


async def create_task_impl(deps: Deps, title: str, priority: str = "medium") -> dict[str, Any]:
    task = await deps.store.create(
        deps.user_id, title=title, description=None, priority=priority, eta=None, tags=[]
    )
    return task.to_dict()


async def update_task_impl(deps: Deps, task_id: str, status: str | None = None) -> dict[str, Any]:
    task = await deps.store.update(deps.user_id, task_id, {"status": status} if status else {})
    return {"error": "NOT_FOUND"} if task is None else task.to_dict()


async def query_tasks_impl(deps: Deps, text: str | None = None, limit: int = 50) -> dict[str, Any]:
    tasks, total = await deps.store.query(deps.user_id, TaskQuery(text=text, limit=limit))
    return {"tasks": [t.to_dict() for t in tasks], "total": total}


def make_runner(kind: str, model_url: str) -> Any:
    """`async (deps, message) -> (output, history_json)` for one framework."""
    if kind == "agents":
        from agents import (
            Agent,
            OpenAIChatCompletionsModel,
            RunContextWrapper,
            Runner,
            function_tool,
            set_tracing_disabled,
        )
        from openai import AsyncOpenAI

        set_tracing_disabled(True)

        @function_tool
        async def create_task(
            ctx: RunContextWrapper[Deps], title: str, priority: str = "medium"
        ) -> dict[str, Any]:
            """Create a task for the user."""
            return await create_task_impl(ctx.context, title, priority)

        @function_tool
        async def update_task(
            ctx: RunContextWrapper[Deps], task_id: str, status: str | None = None
        ) -> dict[str, Any]:
            """Change a task's status."""
            return await update_task_impl(ctx.context, task_id, status)

        @function_tool
        async def query_tasks(
            ctx: RunContextWrapper[Deps], text: str | None = None, limit: int = 50
        ) -> dict[str, Any]:
            """List or search the user's tasks."""
            return await query_tasks_impl(ctx.context, text, limit)

        client = AsyncOpenAI(base_url=model_url, api_key="not-needed")
        agent = Agent[Deps](
            name="tasks",
            instructions=SYSTEM,
            model=OpenAIChatCompletionsModel(model="scripted", openai_client=client),
            tools=[create_task, update_task, query_tasks],
        )

        async def run_agents(deps: Deps, message: str, past: list[Any]) -> tuple[str, str]:
            result = await Runner.run(agent, [*past, {"role": "user", "content": message}], context=deps)
            return str(result.final_output), json.dumps(result.to_input_list())

        return run_agents

    if kind == "pydantic_ai":
        from pydantic_ai import Agent as PAgent
        from pydantic_ai import RunContext
        from pydantic_ai.messages import ModelMessagesTypeAdapter
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        pagent = PAgent(
            OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=model_url, api_key="not-needed")),
            deps_type=Deps,
            instructions=SYSTEM,
        )

        @pagent.tool
        async def create_task(ctx: RunContext[Deps], title: str, priority: str = "medium") -> dict[str, Any]:
            """Create a task for the user."""
            return await create_task_impl(ctx.deps, title, priority)

        @pagent.tool
        async def update_task(
            ctx: RunContext[Deps], task_id: str, status: str | None = None
        ) -> dict[str, Any]:
            """Change a task's status."""
            return await update_task_impl(ctx.deps, task_id, status)

        @pagent.tool
        async def query_tasks(
            ctx: RunContext[Deps], text: str | None = None, limit: int = 50
        ) -> dict[str, Any]:
            """List or search the user's tasks."""
            return await query_tasks_impl(ctx.deps, text, limit)

        async def run_pydantic_ai(deps: Deps, message: str, past: list[Any]) -> tuple[str, str]:
            history_in = ModelMessagesTypeAdapter.validate_python(past) if past else None
            result = await pagent.run(message, message_history=history_in, deps=deps)
            return str(result.output), result.all_messages_json().decode()

        return run_pydantic_ai

    if kind == "floor":
        import httpx

        http = httpx.AsyncClient(
            base_url=model_url,
            headers={"authorization": "Bearer not-needed"},
            timeout=60,
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "create_task",
                    "description": "Create a task for the user.",
                    "parameters": {
                        "type": "object",
                        "properties": {"title": {"type": "string"}, "priority": {"type": "string"}},
                        "required": ["title"],
                    },
                },
            }
        ]

        async def run_floor(deps: Deps, message: str, past: list[Any]) -> tuple[str, str]:
            messages: list[Any] = [
                {"role": "system", "content": SYSTEM},
                *past,
                {"role": "user", "content": message},
            ]
            r = await http.post(
                "/chat/completions", json={"model": "scripted", "messages": messages, "tools": tools}
            )
            reply = r.json()["choices"][0]["message"]
            messages.append(reply)
            for call in reply.get("tool_calls") or ():
                args = json.loads(call["function"]["arguments"])
                out = await create_task_impl(deps, **args)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(out)})
            r = await http.post(
                "/chat/completions", json={"model": "scripted", "messages": messages, "tools": tools}
            )
            reply = r.json()["choices"][0]["message"]
            messages.append(reply)
            return str(reply.get("content") or ""), json.dumps(messages[1:])

        return run_floor
    raise SystemExit(f"unknown peer {kind!r}")


def create_app(kind: str, database_url: str, tokens: dict[str, str], model_url: str) -> FastAPI:
    # The usual setup: SQLAlchemy's async engine on aiosqlite, WAL journal.
    engine = create_async_engine(database_url)

    @event.listens_for(engine.sync_engine, "connect")
    def _wal(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    store = TaskStore(engine)
    run = make_runner(kind, model_url)
    app = FastAPI()

    @app.on_event("startup")
    async def startup() -> None:
        async with engine.begin() as conn:
            await conn.run_sync(history.metadata.create_all)

    @app.post("/chat")
    async def chat(body: ChatIn, authorization: str = Header()) -> dict[str, Any]:
        user = tokens.get(authorization.removeprefix("Bearer "))
        if user is None:
            raise HTTPException(401)
        cid = body.conversation_id
        past: list[Any] = []
        if cid is not None:
            async with engine.connect() as conn:
                row = (
                    await conn.execute(
                        sa.select(history.c.messages).where(history.c.id == cid, history.c.user_id == user)
                    )
                ).first()
            if row is None:
                raise HTTPException(404)
            past = json.loads(row[0])
        output, stored = await run(Deps(user_id=user, store=store), body.message, past)
        async with engine.begin() as conn:
            if cid is None:
                cid = "conv_" + secrets.token_hex(10)
                await conn.execute(history.insert().values(id=cid, user_id=user, messages=stored))
            else:
                await conn.execute(history.update().where(history.c.id == cid).values(messages=stored))
        return {"conversation_id": cid, "output": output}

    return app


if __name__ == "__main__":
    kind, port, url, tokens_json, model_url = (
        sys.argv[1],
        int(sys.argv[2]),
        sys.argv[3],
        sys.argv[4],
        sys.argv[5],
    )
    if hasattr(os, "sched_setaffinity") and os.environ.get("BENCH_SERVER_CPU"):
        os.sched_setaffinity(0, {int(os.environ["BENCH_SERVER_CPU"])})
    with open(tokens_json) as f:
        tokens = json.load(f)
    uvicorn.run(
        create_app(kind, url, tokens, model_url),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=75,
    )
