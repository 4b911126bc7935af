"""Confirmation of destructive tools with the person behind the MCP client.

2025 (`legacy`): an elicitation request while the call waits. 2026-07-28 (`auto`): an input-required
round whose sealed `requestState` the client sends back with the answer.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import Clock, answer, text

from mcp import Client
from toolrun import ToolContext, ToolExecutor, ToolRegistry
from toolrun.mcp import create_server
from toolrun.runtime import InMemoryAuditSink


class Deleter:
    def __init__(self, clock: Clock) -> None:
        self.deleted: list[str] = []
        self.registry = ToolRegistry()
        self.audit = InMemoryAuditSink()

        @self.registry.register(destructive=True)
        async def delete_task(task_id: str) -> dict[str, str]:
            """Delete a task permanently."""
            self.deleted.append(task_id)
            return {"deleted": task_id}

        self.executor = ToolExecutor(self.registry, audit=self.audit, clock=clock, confirmation_ttl=60.0)

    def server(self, user: str = "u1", clock: Clock | None = None) -> Any:
        kwargs: dict[str, Any] = {"clock": clock} if clock is not None else {}
        return create_server(
            self.registry, executor=self.executor, principal=ToolContext(user_id=user), **kwargs
        )


@pytest.fixture
def deleter(clock: Clock) -> Deleter:
    return Deleter(clock)


both = pytest.mark.parametrize("mode", ["auto", "legacy"])


@both
async def test_accept_runs_once(deleter: Deleter, mode: str) -> None:
    callback = answer("accept")
    async with Client(deleter.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    assert result.structured_content == {"deleted": "t1"}
    assert deleter.deleted == ["t1"]
    [asked] = callback.asked
    assert isinstance(asked, types.ElicitRequestFormParams)
    assert 'delete_task(task_id="t1")' in asked.message
    assert asked.requested_schema["properties"]["approve"]["type"] == "boolean"
    assert [(r.action, r.outcome) for r in deleter.audit.records] == [
        ("execute", "confirmation_required"),
        ("approve", "ok"),
    ]


@both
@pytest.mark.parametrize(
    ("action", "approve", "reason"),
    [("decline", None, "denied"), ("accept", False, "denied"), ("cancel", None, "cancelled")],
)
async def test_decline_and_cancel_run_nothing(
    deleter: Deleter, mode: str, action: str, approve: bool | None, reason: str
) -> None:
    async with Client(deleter.server(), mode=mode, elicitation_callback=answer(action, approve)) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    assert result.is_error
    assert "CONFIRMATION_DENIED" in text(result)
    assert ("dismissed" in text(result)) == (reason == "cancelled")
    assert deleter.deleted == []
    assert await deleter.executor.pending_confirmations(ToolContext(user_id="u1")) == []


@both
async def test_client_without_elicitation_fails_closed(deleter: Deleter, mode: str) -> None:
    async with Client(deleter.server(), mode=mode) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    assert result.is_error
    assert "needs confirmation" in text(result)
    assert deleter.deleted == []
    assert await deleter.executor.pending_confirmations(ToolContext(user_id="u1")) == []


# ------------------------------------------------------------------------------------------------------
# 2026-07-28: the sealed requestState, driven by hand


async def first_round(client: Client, args: dict[str, Any] | None = None) -> types.InputRequiredResult:
    first = await client.session.call_tool(
        "delete_task", args or {"task_id": "t1"}, allow_input_required=True
    )
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None and set(first.input_requests) == {"toolrun_confirm"}
    assert first.request_state is not None
    return first


async def retry(
    client: Client, state: str, args: dict[str, Any] | None = None, action: str = "accept"
) -> types.CallToolResult:
    content = {"approve": True} if action == "accept" else None
    result = await client.session.call_tool(
        "delete_task",
        args or {"task_id": "t1"},
        input_responses={"toolrun_confirm": types.ElicitResult(action=action, content=content)},  # type: ignore[arg-type]
        request_state=state,
        allow_input_required=True,
    )
    assert isinstance(result, types.CallToolResult)
    return result


def assert_invalid_state(error: MCPError) -> None:
    """A requestState this server did not seal for this call is a JSON-RPC error, not a tool result."""
    assert error.code == types.INVALID_PARAMS
    assert "Invalid requestState" in error.message and "nothing ran" in error.message


async def test_state_is_single_use(deleter: Deleter) -> None:
    async with Client(deleter.server(), elicitation_callback=answer("accept")) as client:
        first = await first_round(client)
        assert first.request_state is not None
        ok = await retry(client, first.request_state)
        replay = await retry(client, first.request_state)
    assert not ok.is_error
    assert replay.is_error and "CONFIRMATION_NOT_FOUND" in text(replay)
    assert deleter.deleted == ["t1"]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s: s[:-1] + ("0" if s[-1] != "0" else "1"),  # the MAC
        lambda s: s.replace("tr2.", "tr2.e30", 1),  # the claims
        lambda s: "garbage",
        lambda s: "",
    ],
)
async def test_tampered_state_runs_nothing(deleter: Deleter, tamper: Any) -> None:
    async with Client(deleter.server(), elicitation_callback=answer("accept")) as client:
        first = await first_round(client)
        assert first.request_state is not None
        with pytest.raises(MCPError) as refused:
            await retry(client, tamper(first.request_state))
        still = await retry(client, first.request_state)  # the real state still works once
    assert_invalid_state(refused.value)
    assert not still.is_error
    assert deleter.deleted == ["t1"]


async def test_state_is_bound_to_arguments(deleter: Deleter) -> None:
    async with Client(deleter.server(), elicitation_callback=answer("accept")) as client:
        first = await first_round(client, {"task_id": "t1"})
        assert first.request_state is not None
        with pytest.raises(MCPError) as refused:
            await retry(client, first.request_state, {"task_id": "t2"})
    assert_invalid_state(refused.value)
    assert deleter.deleted == []


async def test_state_is_bound_to_the_principal(deleter: Deleter) -> None:
    async with Client(deleter.server("u1"), elicitation_callback=answer("accept")) as alice:
        first = await first_round(alice)
    assert first.request_state is not None
    async with Client(deleter.server("u2"), elicitation_callback=answer("accept")) as mallory:
        with pytest.raises(MCPError) as refused:
            await retry(mallory, first.request_state)
    assert_invalid_state(refused.value)
    assert deleter.deleted == []


async def test_state_expires(deleter: Deleter, clock: Clock) -> None:
    async with Client(deleter.server(clock=clock), elicitation_callback=answer("accept")) as client:
        first = await first_round(client)
        assert first.request_state is not None
        clock.now += 61
        result = await retry(client, first.request_state)
    assert result.is_error and "CONFIRMATION_EXPIRED" in text(result)
    assert deleter.deleted == []


async def test_state_from_another_executor_key_is_refused(deleter: Deleter, clock: Clock) -> None:
    other = Deleter(clock)
    async with Client(other.server(), elicitation_callback=answer("accept")) as client:
        first = await first_round(client)
    assert first.request_state is not None
    async with Client(deleter.server(), elicitation_callback=answer("accept")) as client:
        with pytest.raises(MCPError) as refused:
            await retry(client, first.request_state)
    assert_invalid_state(refused.value)
    assert deleter.deleted == other.deleted == []


@both
async def test_the_person_is_shown_the_preview_and_their_reason_reaches_the_model(
    clock: Clock, mode: str
) -> None:
    titles = {"t1": "Renew passport"}
    registry = ToolRegistry()
    deleted: list[str] = []

    async def describe(args: Any, ctx: ToolContext) -> str:
        return f"Delete the task '{titles[args['task_id']]}'"

    @registry.register(destructive=True, preview=describe)
    async def delete_task(task_id: str) -> dict[str, str]:
        """Delete a task permanently."""
        deleted.append(task_id)
        return {"deleted": task_id}

    executor = ToolExecutor(registry, clock=clock, confirmation_ttl=60.0)
    asked: list[types.ElicitRequestParams] = []

    async def refuse(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": False, "reason": "keep it please"})

    server = create_server(registry, executor=executor, principal=ToolContext(user_id="u1"))
    async with Client(server, mode=mode, elicitation_callback=refuse) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    [form] = asked
    assert isinstance(form, types.ElicitRequestFormParams)
    assert form.message == "Allow this action? Delete the task 'Renew passport'"
    assert form.requested_schema["properties"]["reason"]["type"] == "string"
    assert result.is_error and "The user said: keep it please" in text(result)
    assert deleted == []


@both
@pytest.mark.parametrize("content", [{"approve": "no"}, {"approve": "true"}, {"approve": 1}, {}, None])
async def test_an_answer_that_is_not_a_boolean_runs_nothing(
    deleter: Deleter, mode: str, content: dict[str, Any] | None
) -> None:
    """Only `approve: true` approves: a form value passed through ("no", "true", 1) or no value at all is
    refused with a clear error, and the held call can no longer run."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=content)

    async with Client(deleter.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    assert result.is_error
    assert "CONFIRMATION_DENIED" in text(result) and "not a yes or no" in text(result)
    assert deleter.deleted == []
    assert await deleter.executor.pending_confirmations(ToolContext(user_id="u1")) == []
