"""Seed P3-01, the conference assistant: each acceptance criterion pinned by a test that names it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from conference_assistant import ConferenceBackend, build_graph, build_registry, default_model
from conference_assistant.graph import ASK_IDENTIFIER, FRIENDLY_FAILURE, FRIENDLY_RATE_LIMIT
from langgraph.checkpoint.memory import InMemorySaver

from toolrun import ToolAlreadyExistsError, ToolExecutor
from toolrun.models import FunctionModel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def cfg(user: str = "attendee-1") -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex, "user_id": user}}


async def ask(question: str, user: str = "attendee-1", **kwargs: Any) -> dict[str, Any]:
    app = build_graph(**kwargs)
    state: dict[str, Any] = await app.ainvoke({"question": question}, cfg(user))
    return state


# ---------------------------------------------------------------------------------------------------------
# lookup_registration


async def test_criterion_lookup_registration_needs_an_identifier_so_the_planner_asks_for_it() -> None:
    """lookup_registration needs an identifier: the planner asks for the e-mail or registration id when
    the user has not given one (needs_user_input + input_request), and no tool runs."""
    state = await ask("What is the status of my registration?")
    assert state["needs_user_input"] is True
    assert "e-mail" in state["input_request"] and "registration id" in state["input_request"]
    assert state["tool_calls"] == [] and "tool_results" not in state
    assert state["answer"] == state["input_request"]


async def test_criterion_lookup_registration_refuses_a_call_without_identifier_even_if_planned() -> None:
    """A model that plans lookup_registration without an identifier gets MISSING_IDENTIFIER, and the user
    is asked for one (the tool itself enforces the criterion, whatever the model does)."""
    plan = '{"tool_calls": [{"tool": "lookup_registration", "args": {}}]}'
    model = FunctionModel(lambda m, t: plan if not m[-1].content.startswith("The tools ran") else "?")
    state = await ask("my registration please", model=model)
    assert state["tool_results"][0]["code"] == "MISSING_IDENTIFIER"
    assert state["needs_user_input"] is True and state["answer"] == ASK_IDENTIFIER


async def test_criterion_lookup_registration_returns_private_data() -> None:
    """lookup_registration returns private data: the tool is marked private (cached per user, never
    shared) and answers with the attendee's own registration."""
    tool = build_registry().get("lookup_registration")
    assert tool.options.private and tool.options.read_only
    state = await ask("What is the status of my registration REG-1001?")
    assert state["tool_results"][0]["ok"] is True
    assert "REG-1001" in state["answer"] and "confirmed" in state["answer"]


# ---------------------------------------------------------------------------------------------------------
# send_registration_email


async def test_criterion_send_registration_email_is_rate_limited_under_the_shared_key_email_send() -> None:
    """send_registration_email is rate limited under the shared key `email_send` (shared with
    send_schedule_email), per user, and private."""
    registry = build_registry()
    for name in ("send_registration_email", "send_schedule_email"):
        options = registry.get(name).options
        assert options.private and options.rate_limit is not None and options.rate_limit.key == "email_send"
    backend = ConferenceBackend()
    executor = ToolExecutor(registry)
    graph = build_graph(backend=backend, registry=registry, executor=executor)
    answers = []
    for _ in range(4):
        state = await graph.ainvoke({"question": "Please resend my registration email, REG-1002"}, cfg())
        answers.append(state["answer"])
    assert len(backend.outbox) == 3  # the 4th was refused by the shared bucket
    assert answers[-1] == FRIENDLY_RATE_LIMIT
    # The bucket is shared: the schedule e-mail is refused too, for this user only.
    from toolrun import ToolCall, ToolContext

    refused = await executor.execute(
        ToolCall(name="send_schedule_email", arguments={"registration_id": "REG-1002"}),
        ToolContext(user_id="attendee-1", deps=backend),
    )
    assert refused.error is not None and refused.error.code == "RATE_LIMITED"
    other = await graph.ainvoke({"question": "Please resend my registration email, REG-1001"}, cfg("other"))
    assert other["tool_results"][0]["ok"] is True


# ---------------------------------------------------------------------------------------------------------
# The state and the routing


async def test_criterion_state_keys_tool_calls_tool_results_needs_user_input_input_request() -> None:
    """The state carries tool_calls, tool_results, needs_user_input and input_request."""
    state = await ask("What is the status of my registration REG-1001?")
    assert {"tool_calls", "tool_results", "needs_user_input", "input_request"} <= set(state)
    assert state["tool_calls"][0]["tool"] == "lookup_registration"
    assert state["tool_calls"][0]["args"] == {"registration_id": "REG-1001"}
    assert set(state["tool_results"][0]) >= {"tool", "status", "ok", "content", "code"}


@pytest.mark.parametrize(
    ("question", "route"),
    [
        ("What is the status of my registration REG-1001?", "execute_queries"),
        ("Which sessions are about privacy?", "execute_queries"),
        ("Please resend my registration email, REG-1002", "execute_tools"),
        ("Where is my registration?", "respond"),
        ("hello", "respond"),
    ],
)
async def test_criterion_plan_routes_to_tools_queries_or_respond(question: str, route: str) -> None:
    """plan → execute_tools (actions) / execute_queries (read-only lookups) / respond (ask or answer)."""
    app = build_graph(checkpointer=InMemorySaver())
    config = cfg()
    await app.ainvoke({"question": question}, config)
    steps = [s.next for s in [s async for s in app.aget_state_history(config)]]
    assert (route,) in steps
    others = {"execute_tools", "execute_queries"} - {route}
    assert not any(set(step) & others for step in steps)


# ---------------------------------------------------------------------------------------------------------
# Failures, logs, models


async def test_criterion_a_tool_that_raises_never_crashes_the_pipeline_user_gets_friendly_message() -> None:
    """A tool that raises (the registration database is down) never crashes the pipeline; the user gets a
    friendly message with no internal detail."""
    state = await ask(
        "What is the status of my registration REG-1001?", backend=ConferenceBackend(failing=True)
    )
    assert state["tool_results"][0]["code"] == "EXECUTION_FAILED"
    assert state["answer"] == FRIENDLY_FAILURE
    assert "db.internal" not in str(state)


async def test_criterion_a_model_failure_never_crashes_the_pipeline() -> None:
    """The model itself failing (planner or answer) still ends in a friendly answer."""

    def broken(messages: Any, tools: Any) -> str:
        raise ConnectionError("model down")

    state = await ask("What is the status of my registration REG-1001?", model=FunctionModel(broken))
    assert state["plan_error"] and state["answer"].startswith("Sorry")


async def test_criterion_no_argument_values_in_logs(caplog: pytest.LogCaptureFixture) -> None:
    """No argument values in logs: e-mail addresses, registration ids and results never reach a log
    record, even with every logger at DEBUG and a failing tool."""
    caplog.set_level(logging.DEBUG)
    await ask("What is the status of my registration? my email is ada@example.org")
    await ask("Please resend my registration email, REG-1001")
    await ask("What is the status of my registration REG-1002?", backend=ConferenceBackend(failing=True))
    assert any(r.name == "toolrun.audit" for r in caplog.records)  # the audit log did run
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    for secret in ("ada@example.org", "REG-1001", "REG-1002", "Ada Lovelace"):
        assert secret not in text


def test_criterion_runs_with_a_scripted_model_by_default_and_any_real_model_by_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs with a scripted model by default, and any real model named by TOOLRUN_MODEL."""
    monkeypatch.delenv("TOOLRUN_MODEL", raising=False)
    assert default_model().name == "conference-scripted"
    monkeypatch.setenv("TOOLRUN_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    model = default_model()
    assert type(model).__name__ == "OpenAIModel"  # built, never called


def test_criterion_the_example_runs_as_shipped() -> None:
    """`python examples/conference_assistant "question"` answers with the scripted model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OPENAI_", "ANTHROPIC_"))}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "conference_assistant"), "Is my registration REG-1001 confirmed?"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Your registration REG-1001 (Full pass) is confirmed."


def test_duplicate_tool_names_are_an_error() -> None:
    registry = build_registry()
    with pytest.raises(ToolAlreadyExistsError):
        registry.register(registry.get("lookup_registration"))
