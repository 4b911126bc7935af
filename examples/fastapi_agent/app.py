"""`create_app()`: the FastAPI app with `/agent/chat` (JSON) and `/agent/stream` (server-sent events).

Who is calling comes from the `X-User-Id` header (a stand-in for your real authentication).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Header
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from fastapi_agent.agent import build_agent, default_model
from fastapi_agent.tools import SeedToolRegistry, default_tools
from toolrun import ToolExecutor
from toolrun.models import Model


class ChatRequest(BaseModel):
    message: str = Field(min_length=1, max_length=4000)


class ChatResponse(BaseModel):
    answer: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]


def create_app(
    *, model: Model | None = None, tools: SeedToolRegistry | None = None, executor: ToolExecutor | None = None
) -> FastAPI:
    """The app: one graph, one executor (pass yours to share stores, audit sinks, rate limits)."""
    tools = tools or default_tools()
    executor = executor or ToolExecutor(tools.registry)
    graph = build_agent(model or default_model(), tools.registry, executor)
    app = FastAPI(title="toolrun FastAPI agent")

    def config(user_id: str | None) -> dict[str, Any]:
        user = user_id or "anonymous"
        return {
            "configurable": {"thread_id": uuid.uuid4().hex, "user_id": user, "user_context": {"plan": "free"}}
        }

    @app.post("/agent/chat", response_model=ChatResponse)
    async def chat(body: ChatRequest, x_user_id: str | None = Header(default=None)) -> ChatResponse:
        state = await graph.ainvoke({"message": body.message}, config(x_user_id))
        return ChatResponse(
            answer=state["answer"],
            tool_calls=state.get("tool_calls") or [],
            tool_results=state.get("tool_results") or [],
        )

    @app.post("/agent/stream")
    async def stream(body: ChatRequest, x_user_id: str | None = Header(default=None)) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            async for update in graph.astream(
                {"message": body.message}, config(x_user_id), stream_mode="updates"
            ):
                for node, values in update.items():
                    values = values or {}
                    if node == "select_tool":
                        yield _sse("plan", {"tool_calls": values.get("tool_calls", [])})
                    elif node == "run_tools":
                        for result in values.get("tool_results", []):
                            yield _sse("tool_result", result)
                    elif node == "answer":
                        yield _sse("answer", {"text": values.get("answer", "")})
            yield _sse("done", {})

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
