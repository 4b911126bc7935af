"""The peer stack of bench/service.py: what a team would otherwise build — a FastAPI route running a
Pydantic AI agent with the same task tools (same SQL store, same schema, same full-text index) and a
scripted `FunctionModel` that follows the same grammar as toolrun's demo model. History is kept per
conversation as Pydantic AI's own message JSON in one table. Run as:

    python bench/_peer_service.py PORT DATABASE_URL TOKENS_JSON
"""

from __future__ import annotations

import json
import secrets
import sys
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRequest, ModelResponse, RunContext, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.messages import ModelMessagesTypeAdapter, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from toolrun.apps.tasks import TaskQuery, TaskStore, parse_command
from toolrun.apps.tasks._demo import demo_reply

history = sa.Table(
    "peer_conversations",
    sa.MetaData(),
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("messages", sa.Text(), nullable=False),
)


@dataclass
class Deps:
    user_id: str
    store: TaskStore


def script(messages: list[Any], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    returns = (
        [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    )
    if returns:
        text = "\n".join(demo_reply(p.tool_name, json.dumps(p.content), False) for p in returns)
        return ModelResponse(parts=[TextPart(text)])
    prompt = next(p.content for p in reversed(last.parts) if isinstance(p, UserPromptPart))
    command = parse_command(str(prompt))
    if isinstance(command, str):
        return ModelResponse(parts=[TextPart(command)])
    return ModelResponse(
        parts=[
            ToolCallPart(tool_name=command.name, args=dict(command.arguments or {}), tool_call_id=command.id)
        ]
    )


agent = Agent(FunctionModel(script), deps_type=Deps)


@agent.tool
async def create_task(
    ctx: RunContext[Deps],
    title: str,
    description: str | None = None,
    priority: str = "medium",
    eta: str | None = None,
    tags: list[str] | None = None,
) -> dict[str, Any]:
    """Create a task for the user."""
    task = await ctx.deps.store.create(
        ctx.deps.user_id, title=title, description=description, priority=priority, eta=eta, tags=tags or []
    )
    return task.to_dict()


@agent.tool
async def update_task(ctx: RunContext[Deps], task_id: str, status: str | None = None) -> dict[str, Any]:
    """Change a task."""
    task = await ctx.deps.store.update(ctx.deps.user_id, task_id, {"status": status} if status else {})
    if task is None:
        return {"error": "NOT_FOUND"}
    return task.to_dict()


@agent.tool
async def query_tasks(
    ctx: RunContext[Deps], filters: dict[str, Any] | None = None, limit: int = 50, sort: str = "eta_asc"
) -> dict[str, Any]:
    """List or search the user's tasks."""
    f = filters or {}
    query = TaskQuery(status=f.get("status"), text=f.get("text"), limit=limit, sort=sort)  # type: ignore[arg-type]
    tasks, total = await ctx.deps.store.query(ctx.deps.user_id, query)
    return {"tasks": [t.to_dict() for t in tasks], "total": total, "applied_filters": f}


class ChatIn(BaseModel):
    message: str
    conversation_id: str | None = None


def create_app(database_url: str, tokens: dict[str, str]) -> FastAPI:
    # The usual setup: SQLAlchemy's async engine on aiosqlite, WAL journal.
    engine = create_async_engine(database_url)

    @event.listens_for(engine.sync_engine, "connect")
    def _wal(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    store = TaskStore(engine)
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
        async with engine.connect() as conn:
            if cid is not None:
                row = (
                    await conn.execute(
                        sa.select(history.c.messages).where(history.c.id == cid, history.c.user_id == user)
                    )
                ).first()
                if row is None:
                    raise HTTPException(404)
                past = ModelMessagesTypeAdapter.validate_json(row[0])
        result = await agent.run(body.message, message_history=past, deps=Deps(user_id=user, store=store))
        stored = result.all_messages_json().decode()
        async with engine.begin() as conn:
            if cid is None:
                cid = "conv_" + secrets.token_hex(10)
                await conn.execute(history.insert().values(id=cid, user_id=user, messages=stored))
            else:
                await conn.execute(history.update().where(history.c.id == cid).values(messages=stored))
        return {"conversation_id": cid, "output": result.output, "messages": json.loads(stored)}

    return app


if __name__ == "__main__":
    port, url, tokens_json = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    with open(tokens_json) as f:
        tokens = json.load(f)
    uvicorn.run(
        create_app(url, tokens),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=75,
    )
