"""Real tools through every door: each returns its result when its work ends in time, and comes back as
`TIMEOUT` (`abandoned` only when it did not stop within the grace) when it does not.

Every door runs all cases at once, so a door costs about one time box (`LIMIT` + the grace), not one per
case. After each door: no child process is left, no PostgreSQL backend still runs the tools' queries.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from toolrun import Agent, ToolCall, ToolContext, ToolExecutor, ToolRegistry, ToolResult

from ._cases import CASES, Case, Outcome, check, groups
from ._tools import LIMIT, Env, children_alive, real_tools

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

BOUND = LIMIT + 1.0 + 4.0
"""A door must be done with every case by then: the time box, the grace, and room for a loaded machine."""


def from_result(r: ToolResult) -> Outcome:
    return Outcome(
        ok=r.status == "ok",
        text=r.render(),
        code=r.error.code if r.error is not None else None,
        value=r.value,
        details=r.error.details if r.error is not None else None,
    )


async def settle(env: Env) -> None:
    """What every door must leave behind: no child process, no query still running in PostgreSQL."""
    assert children_alive(env.children) == []
    conn = await asyncpg.connect(env.postgres)
    try:
        for _ in range(100):
            running = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'",
                env.app_name,
            )
            if running == 0:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{running} PostgreSQL backend(s) still run a cancelled tool's query")
    finally:
        await conn.close()


async def through(env: Env, door: Any) -> None:
    spare = env.isolation.workers
    if spare < 2:  # each door kills one worker (its timeout path); the session started enough for all
        await env.isolation.start(2 - spare)
    started = time.perf_counter()
    outcomes: dict[str, Outcome] = await door(CASES)
    elapsed = time.perf_counter() - started
    problems = [p for case in CASES for p in check(case, outcomes[case.id])]
    assert problems == []
    assert elapsed < BOUND
    await settle(env)


def calls(cases: list[Case]) -> list[ToolCall]:
    return [ToolCall(id=c.id, name=c.tool, arguments=json.dumps(c.arguments)) for c in cases]


# ---------------------------------------------------------------------------------------------------------


async def test_executor(env: Env) -> None:
    executor = ToolExecutor(ToolRegistry(real_tools(env)))

    async def door(cases: list[Case]) -> dict[str, Outcome]:
        results = await asyncio.gather(
            *(executor.execute(c, ToolContext(user_id="u1")) for c in calls(cases))
        )
        return {r.call_id: from_result(r) for r in results}

    try:
        await through(env, door)
    finally:
        await executor.aclose()


def turns(size: int) -> tuple[dict[str, list[Case]], Any]:
    """A model that answers the user message `group-N` with that group's calls, then with "done"."""
    from toolrun.models import FunctionModel
    from toolrun.models._messages import ToolResultMessage, UserMessage

    by_group = groups(size)

    def respond(messages: list[Any], tools: list[Any]) -> Any:
        if isinstance(messages[-1], ToolResultMessage):
            return "done"
        asked = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        return calls(by_group[asked])

    return by_group, FunctionModel(respond)


async def test_agent(env: Env) -> None:
    executor = ToolExecutor(ToolRegistry(real_tools(env)))
    by_group, model = turns(8)
    agent = Agent(model, executor=executor, max_concurrency=8)

    async def door(cases: list[Case]) -> dict[str, Outcome]:
        runs = await asyncio.gather(
            *(agent.run(name, context=ToolContext(user_id="u1")) for name in by_group)
        )
        assert [run.status for run in runs] == ["completed"] * len(runs)
        return {rec.call.id: from_result(rec.result) for run in runs for rec in run.tool_calls}

    try:
        await through(env, door)
    finally:
        await executor.aclose()


async def test_service(env: Env, tmp_path: Path) -> None:
    """The chat API (FastAPI over ASGI) with the real tools next to the task tools: three users' turns at once
    (the service's agent runs eight calls of a turn at a time)."""
    from toolrun.server import Settings, create_app
    from toolrun.server.migrate import upgrade

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{tmp_path}/toolrun.db",
        data_dir=tmp_path / "data",
        token_cache_seconds=0,
    )
    await upgrade(settings.database_url)
    by_group, model = turns(8)
    app = create_app(settings, model=model, extra_tools=real_tools(env))
    state = app.state.toolrun
    tokens = [(await state.users.add(f"user{i}"))[1] for i in range(len(by_group))]
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60) as http,
    ):

        async def turn(name: str, token: str) -> list[dict[str, Any]]:
            r = await http.post(
                "/api/v1/chat", json={"message": name}, headers={"Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["messages"][-1]["content"] == "done"
            return [m for m in body["messages"] if m["role"] == "tool"]

        async def door(cases: list[Case]) -> dict[str, Outcome]:
            answers = await asyncio.gather(*(turn(n, t) for n, t in zip(by_group, tokens, strict=True)))
            return {m["call_id"]: from_message(m) for messages in answers for m in messages}

        await through(env, door)


def from_message(m: dict[str, Any]) -> Outcome:
    """A tool message of the chat API."""
    text = m["content"]
    if not m["is_error"]:
        return Outcome(ok=True, text=text, value=text)
    return Outcome(ok=False, text=text, code=text.removeprefix("Error ").split(":", 1)[0])


async def test_mcp(env: Env) -> None:
    """toolrun's MCP server with the official client (in memory): every call at once on one session."""
    import mcp_types

    from mcp import Client
    from toolrun.mcp import create_server

    executor = ToolExecutor(ToolRegistry(real_tools(env)))
    server = create_server(executor.registry, executor=executor, principal=ToolContext(user_id="u1"))

    def outcome(r: mcp_types.CallToolResult) -> Outcome:
        text = "\n".join(b.text for b in r.content if isinstance(b, mcp_types.TextContent))
        if not r.is_error:
            value = r.structured_content
            return Outcome(ok=True, text=text, value=value.get("result", value) if value else text)
        return Outcome(ok=False, text=text, code=text.removeprefix("Error ").split(":", 1)[0])

    async def door(cases: list[Case]) -> dict[str, Outcome]:
        async with Client(server) as client:
            results = await asyncio.gather(*(client.call_tool(c.tool, c.arguments) for c in cases))
        return {c.id: outcome(r) for c, r in zip(cases, results, strict=True)}

    try:
        await through(env, door)
    finally:
        await executor.aclose()


async def test_langgraph(env: Env) -> None:
    """`ToolrunNode` in a compiled LangGraph graph: one AI message with every call."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    from toolrun.integrations.langgraph import ToolrunNode

    executor = ToolExecutor(ToolRegistry(real_tools(env)))

    def agent(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], HumanMessage):
            planned = [{"id": c.id, "name": c.tool, "args": c.arguments} for c in CASES]
            return {"messages": [AIMessage("", tool_calls=planned)]}
        return {"messages": [AIMessage("done")]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolrunNode(executor))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemorySaver())

    def outcome(m: ToolMessage) -> Outcome:
        text = str(m.content)
        code = m.artifact["code"]
        return Outcome(ok=m.status == "success", text=text, code=code, value=text)

    async def door(cases: list[Case]) -> dict[str, Outcome]:
        config: Any = {"configurable": {"thread_id": "t1", "user_id": "u1"}}
        state = await app.ainvoke({"messages": [HumanMessage("go")]}, config)
        assert state["messages"][-1].content == "done"
        return {m.tool_call_id: outcome(m) for m in state["messages"] if isinstance(m, ToolMessage)}

    try:
        await through(env, door)
    finally:
        await executor.aclose()
