"""The seed's FastAPI agent ("Agent Tools and LLM-Based Tool Selection"): each acceptance criterion pinned
by a test that names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from fastapi_agent import SeedToolRegistry, create_app, default_model, default_tools
from fastapi_agent.agent import GREETING

from toolrun import ToolAlreadyExistsError, ToolExecutor
from toolrun.models import FunctionModel
from toolrun.runtime import InMemoryAuditSink

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app())


def chat(client: TestClient, message: str, user: str = "alice") -> dict[str, Any]:
    response = client.post("/agent/chat", json={"message": message}, headers={"X-User-Id": user})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_criterion_agent_chat_endpoint_answers_from_the_tool_results(client: TestClient) -> None:
    """POST /agent/chat: the planner picks a tool, toolrun runs it, the answer is written from the result."""
    body = chat(client, "What's the weather in Paris?")
    assert body["tool_calls"][0]["tool"] == "get_weather"
    assert body["tool_results"][0]["ok"] is True
    assert body["answer"] == "The weather in Paris is sunny, 21 °C."


def test_criterion_agent_stream_endpoint_streams_plan_results_answer(client: TestClient) -> None:
    """POST /agent/stream: server-sent events plan → tool_result → answer → done, same answer as chat."""
    with client.stream("POST", "/agent/stream", json={"message": "What is 6 * 7?"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse(response.read().decode())
    assert [e for e, _ in events] == ["plan", "tool_result", "answer", "done"]
    assert events[0][1]["tool_calls"][0]["tool"] == "calculate"
    assert events[1][1]["ok"] is True
    assert events[2][1]["text"] == "The result is 42." == chat(client, "What is 6 * 7?")["answer"]


def test_criterion_tools_use_the_args_user_context_contract(client: TestClient) -> None:
    """Tools are registered with the seed's `(args, user_context)` contract; user_context carries the
    caller from the request."""
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []
    tools = SeedToolRegistry()

    def echo(args: dict[str, Any], user_context: dict[str, Any]) -> str:
        seen.append((args, user_context))
        return "ok"

    tools.register("echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}}, echo)
    model = FunctionModel(
        lambda m, t: (
            "Echoed."
            if m[-1].content.startswith("The tools ran")
            else '{"tool_calls": [{"tool": "echo", "args": {"text": "hi"}}]}'
        )
    )
    assert (
        chat(TestClient(create_app(model=model, tools=tools)), "echo hi", user="bob")["answer"] == "Echoed."
    )
    [(args, user_context)] = seen
    assert args == {"text": "hi"}
    assert user_context["user_id"] == "bob" and user_context["plan"] == "free"
    assert chat(client, "who am i?", user="carol")["answer"] == "You are carol on the free plan."


def test_criterion_a_duplicate_tool_name_is_an_error() -> None:
    """Registering a second tool under a taken name raises (the seed silently replaced the first)."""
    tools = default_tools()
    with pytest.raises(ToolAlreadyExistsError):
        tools.register("get_weather", "Another.", {"type": "object"}, lambda a, c: None)
    assert tools.registry.names() == ["get_weather", "calculate", "whoami"]


def test_criterion_the_planner_chooses_a_tool_or_none(client: TestClient) -> None:
    """The planner chooses the tool that fits, or none: then no tool runs and the agent still answers."""
    assert chat(client, "What's the weather in London?")["tool_calls"][0]["tool"] == "get_weather"
    assert chat(client, "Compute 2 + 3")["tool_calls"][0]["tool"] == "calculate"
    body = chat(client, "Hi there")
    assert body["tool_calls"] == [] and body["tool_results"] == []
    assert body["answer"] == GREETING


def test_criterion_served_through_toolruns_executor() -> None:
    """Every call goes through toolrun's executor: arguments are validated before the handler runs, tool
    errors become answers (not 500s), and each call is audited."""
    sink = InMemoryAuditSink()
    tools = default_tools()
    bad_plan = '{"tool_calls": [{"tool": "get_weather", "args": {"city": 42}}]}'
    model = FunctionModel(
        lambda m, t: "I could not." if m[-1].content.startswith("The tools ran") else bad_plan
    )
    client = TestClient(
        create_app(model=model, tools=tools, executor=ToolExecutor(tools.registry, audit=sink))
    )
    body = chat(client, "weather?")
    assert body["tool_results"][0]["code"] == "INVALID_ARGUMENTS"
    assert [r.outcome for r in sink.records] == ["error"] and sink.records[0].principal == "alice"
    body = chat(TestClient(create_app()), "What's the weather in Atlantis?")
    assert body["tool_results"][0]["code"] == "UNKNOWN_CITY"
    assert body["answer"].startswith("Sorry, get_weather did not work")


def test_criterion_runs_with_a_scripted_model_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scripted model by default; TOOLRUN_MODEL names a real one."""
    monkeypatch.delenv("TOOLRUN_MODEL", raising=False)
    assert default_model().name == "fastapi-agent-scripted"
    monkeypatch.setenv("TOOLRUN_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    assert type(default_model()).__name__ == "OpenAIModel"


def test_the_package_imports_as_shipped() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OPENAI_", "ANTHROPIC_"))}
    code = (
        f"import sys; sys.path.insert(0, {str(EXAMPLES)!r}); "
        "from fastapi_agent import create_app; print(sorted(r.path for r in create_app().routes "
        "if r.path.startswith('/agent')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['/agent/chat', '/agent/stream']"
