"""Edit, then approve, over MCP: the confirmation form carries the arguments a form can hold; a changed
call is validated and previewed again, asked once more, and only an approval of exactly what was shown
runs it (once, with the new arguments; the model is told what changed).

2025 (`legacy`): the rounds are elicitation requests while the call waits. 2026-07-28 (`auto`): each round
is an input-required result whose sealed state carries the previewed edit's hash.
"""

from __future__ import annotations

from typing import Annotated, Any

import mcp_types as types
import pytest
from mcp_helpers import Clock, text
from pydantic import Field

from mcp import Client
from toolrun import ToolContext, ToolExecutor, ToolRegistry
from toolrun.mcp import create_server
from toolrun.mcp._confirm import FIELD_PREFIX, MAX_ROUNDS
from toolrun.runtime import InMemoryAuditSink

both = pytest.mark.parametrize("mode", ["auto", "legacy"])
TITLES = {"t1": "Renew passport", "t2": "Buy milk"}


class Archiver:
    def __init__(self, clock: Clock) -> None:
        self.archived: list[tuple[str, int, list[str]]] = []
        self.registry = ToolRegistry()
        self.audit = InMemoryAuditSink()

        async def describe(args: Any, ctx: ToolContext) -> str:
            return f"Archive '{TITLES.get(args['task_id'], '?')}' for {args['days']} days"

        @self.registry.register(destructive=True, preview=describe)
        async def archive_task(
            task_id: str, days: Annotated[int, Field(ge=1, le=30)] = 7, labels: list[str] | None = None
        ) -> dict[str, Any]:
            """Archive a task for a number of days.

            Args:
                task_id: The task's id.
                days: How long, in days.
                labels: Labels to add.
            """
            self.archived.append((task_id, days, labels or []))
            return {"archived": task_id, "days": days}

        self.executor = ToolExecutor(self.registry, audit=self.audit, clock=clock, confirmation_ttl=60.0)

    def server(self) -> Any:
        return create_server(self.registry, executor=self.executor, principal=ToolContext(user_id="u1"))


@pytest.fixture
def archiver(clock: Clock) -> Archiver:
    return Archiver(clock)


def person(*answers: dict[str, Any] | None) -> Any:
    """An elicitation callback that answers each form in turn (a dict: accept with that content; None:
    decline), recording the forms; past the last answer it declines."""
    asked: list[types.ElicitRequestFormParams] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params)
        content = answers[len(asked) - 1] if len(asked) <= len(answers) else None
        if content is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    callback.asked = asked  # type: ignore[attr-defined]
    return callback


def fields(form: types.ElicitRequestFormParams) -> dict[str, Any]:
    props = form.requested_schema["properties"]
    return {k[len(FIELD_PREFIX) :]: v for k, v in props.items() if k.startswith(FIELD_PREFIX)}


async def pending(archiver: Archiver) -> list[Any]:
    return await archiver.executor.pending_confirmations(ToolContext(user_id="u1"))


@both
async def test_the_form_offers_the_arguments_a_form_can_hold(archiver: Archiver, mode: str) -> None:
    callback = person({"approve": True})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1", "labels": ["x"]})
    assert not result.is_error, text(result)
    [form] = callback.asked
    offered = fields(form)
    assert set(offered) == {"task_id", "days"}  # a list is not a form field: not editable here
    assert offered["task_id"]["type"] == "string" and offered["task_id"]["default"] == "t1"
    assert offered["days"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 30,
        "title": "days",
        "default": 7,
        "description": "How long, in days. Change it before approving if you want: you will see the new "
        "preview first.",
    }
    assert archiver.archived == [("t1", 7, ["x"])]  # approved as held: no edit, no second round


@both
async def test_an_edit_is_previewed_again_then_runs_once_with_the_new_arguments(
    archiver: Archiver, mode: str
) -> None:
    callback = person(
        {"approve": True, "arg_task_id": "t2", "arg_days": 3},  # changed: shown again first
        {"approve": True, "arg_task_id": "t2", "arg_days": 3},  # approves what it was shown
    )
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1", "labels": ["x"]})
    assert not result.is_error, text(result)
    first, second = callback.asked
    assert first.message == "Allow this action? Archive 'Renew passport' for 7 days"
    assert second.message.endswith("Allow this action? Archive 'Buy milk' for 3 days")  # previewed again
    assert 'task_id: "t1" → "t2"' in second.message and "days: 7 → 3" in second.message
    assert fields(second)["task_id"]["default"] == "t2" and fields(second)["days"]["default"] == 3
    assert archiver.archived == [("t2", 3, ["x"])]  # the arguments the form could not hold kept
    assert "The user changed the arguments before approving" in text(result)  # the model is told
    assert 'task_id: "t1" → "t2"' in text(result)
    assert [(r.action, r.outcome) for r in archiver.audit.records] == [
        ("execute", "confirmation_required"),
        ("approve", "ok"),
    ]
    assert await pending(archiver) == []


@both
async def test_an_edit_the_tool_refuses_asks_again_and_the_call_stays_held(
    archiver: Archiver, mode: str
) -> None:
    callback = person(
        {"approve": True, "arg_days": 99},  # over the tool's maximum
        {"approve": True},  # then approves the call as held
    )
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    _, second = callback.asked
    assert second.message.startswith("Your change was not accepted:") and "days" in second.message
    assert second.message.endswith("Allow this action? Archive 'Renew passport' for 7 days")
    assert fields(second)["days"]["default"] == 7  # the held values, not the refused ones
    assert archiver.archived == [("t1", 7, [])]
    assert "changed the arguments" not in text(result)


@both
async def test_an_invalid_edit_then_a_refusal_runs_nothing(archiver: Archiver, mode: str) -> None:
    callback = person({"approve": True, "arg_days": "soon"}, {"approve": False, "reason": "never mind"})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert result.is_error and "never mind" in text(result)
    assert archiver.archived == []
    assert await pending(archiver) == []


@both
@pytest.mark.parametrize("content", [{"arg_labels": ["y"]}, {"arg_user_id": "u2"}, {"task_id": "t2"}])
async def test_an_answer_changing_what_the_form_did_not_offer_runs_nothing(
    archiver: Archiver, mode: str, content: dict[str, Any]
) -> None:
    """A list argument, an argument the tool does not have, a field outside the form: refused whole (the
    call is withdrawn), never approved with part of the answer."""
    callback = person({"approve": True, **content})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1", "labels": ["x"]})
    assert result.is_error
    assert "CONFIRMATION_DENIED" in text(result) and "did not offer to change" in text(result)
    assert archiver.archived == []
    assert await pending(archiver) == []
    assert len(callback.asked) == 1


@both
async def test_edits_without_end_are_withdrawn(archiver: Archiver, mode: str) -> None:
    callback = person(*({"approve": True, "arg_days": d} for d in range(2, 12)))
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert result.is_error and "withdrawn" in text(result)
    assert len(callback.asked) == MAX_ROUNDS
    assert archiver.archived == []
    assert await pending(archiver) == []


# ------------------------------------------------------------------------------------------------------
# 2026-07-28, driven by hand: the sealed edit


async def call(client: Client, state: str | None = None, content: dict[str, Any] | None = None) -> Any:
    responses = (
        {"toolrun_confirm": types.ElicitResult(action="accept", content=content)}
        if content is not None
        else None
    )
    return await client.session.call_tool(
        "archive_task",
        {"task_id": "t1"},
        input_responses=responses,  # type: ignore[arg-type]
        request_state=state,
        allow_input_required=True,
    )


async def test_a_replayed_edit_runs_once(archiver: Archiver) -> None:
    edit = {"approve": True, "arg_days": 3}
    async with Client(archiver.server(), elicitation_callback=person()) as client:
        first = await call(client)
        shown = await call(client, first.request_state, edit)
        assert isinstance(shown, types.InputRequiredResult)  # the edit is shown before it runs
        assert archiver.archived == []
        ran = await call(client, shown.request_state, edit)
        replay = await call(client, shown.request_state, edit)
        again = await call(client, first.request_state, edit)  # the first round's state, replayed
    assert isinstance(ran, types.CallToolResult) and not ran.is_error, text(ran)
    assert isinstance(replay, types.CallToolResult) and replay.is_error
    assert "CONFIRMATION_NOT_FOUND" in text(replay)
    assert isinstance(again, types.CallToolResult) and "CONFIRMATION_NOT_FOUND" in text(again)
    assert archiver.archived == [("t1", 3, [])]


async def test_a_shown_edit_changed_afterwards_is_shown_again_not_run(archiver: Archiver) -> None:
    """The state of a previewed edit approves only those arguments: other values (a client altering the
    answer after the person saw the preview) lead to another preview."""
    async with Client(archiver.server(), elicitation_callback=person()) as client:
        first = await call(client)
        shown = await call(client, first.request_state, {"approve": True, "arg_days": 3})
        other = await call(client, shown.request_state, {"approve": True, "arg_days": 30})
        assert isinstance(other, types.InputRequiredResult)
        form = other.input_requests["toolrun_confirm"].params  # type: ignore[index, union-attr]
        assert "for 30 days" in form.message
        assert archiver.archived == []
        # The first round's state with an edit: also only a preview (it carries no edit of its own).
        fresh = await call(client, first.request_state, {"approve": True, "arg_days": 3})
        assert isinstance(fresh, types.InputRequiredResult)
    assert archiver.archived == []
    assert len(await pending(archiver)) == 1


# ------------------------------------------------------------------------------------------------------
# The service's own task tools, over Streamable HTTP, with each user's bearer token


@pytest.mark.slow
@both
async def test_the_service_edits_a_delete_over_http(tmp_path: Any, mode: str) -> None:
    """`toolrun serve`'s /mcp: the person changes which task to delete; the form then shows the preview of
    the other task, written from the store, and only that task is deleted. Another user's task id, typed
    into the form, is previewed as missing and deletes nothing."""
    from mcp_helpers import http_transport, serving

    from toolrun.cli import create_service_app
    from toolrun.server import Settings
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(url)
    settings = Settings(_env_file=None, database_url=url, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    app = create_service_app(settings)
    users = app.state.toolrun.users
    _, ada = await users.add("ada")
    _, bob = await users.add("bob")
    async with serving(app) as base:
        async with Client(http_transport(f"{base}/mcp", bob), elicitation_callback=person()) as client:
            theirs = (await client.call_tool("create_task", {"title": "Bob's secret"})).structured_content
        async with Client(http_transport(f"{base}/mcp", ada), elicitation_callback=person()) as client:
            first = (await client.call_tool("create_task", {"title": "Renew passport"})).structured_content
            second = (await client.call_tool("create_task", {"title": "Buy milk"})).structured_content
        assert first and second and theirs
        edit = {"approve": True, "arg_task_id": second["id"]}
        callback = person(edit, edit)
        async with Client(
            http_transport(f"{base}/mcp", ada), mode=mode, elicitation_callback=callback
        ) as client:
            deleted = await client.call_tool("delete_task", {"task_id": first["id"]})
            left = await client.call_tool("query_tasks", {})
        stolen = {"approve": True, "arg_task_id": theirs["id"]}
        grab = person(stolen, stolen)
        async with Client(http_transport(f"{base}/mcp", ada), mode=mode, elicitation_callback=grab) as client:
            refused = await client.call_tool("delete_task", {"task_id": first["id"]})
        async with Client(http_transport(f"{base}/mcp", bob), elicitation_callback=person()) as client:
            bobs = await client.call_tool("query_tasks", {})
    asked_first, asked_second = callback.asked
    assert "Renew passport" in asked_first.message and "Buy milk" not in asked_first.message
    assert "Allow this action? Delete the task 'Buy milk' (no due date)" in asked_second.message
    assert not deleted.is_error, text(deleted)
    assert "The user changed the arguments before approving" in text(deleted)
    assert "Renew passport" in text(left) and "Buy milk" not in text(left)
    assert "Bob's secret" not in grab.asked[1].message  # another user's task: never shown
    assert refused.is_error
    assert "Bob's secret" in text(bobs)


@both
async def test_the_held_value_written_otherwise_is_no_edit(archiver: Archiver, mode: str) -> None:
    """A form that sends 7.0 for the integer 7 changes nothing once validated: approved as held, asked
    once, never looping. ("7", a string, is the tool's to refuse: asked again with its error.)"""
    callback = person({"approve": True, "arg_days": 7.0})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    assert len(callback.asked) == 1
    assert archiver.archived == [("t1", 7, [])]
    assert "changed the arguments" not in text(result)


@both
async def test_an_edit_written_otherwise_the_second_time_runs_as_shown(archiver: Archiver, mode: str) -> None:
    callback = person({"approve": True, "arg_days": 3}, {"approve": True, "arg_days": 3.0})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    assert len(callback.asked) == 2
    assert archiver.archived == [("t1", 3, [])]


# ------------------------------------------------------------------------------------------------------
# Only what was last previewed runs (2026-07-28: the state carries the previewed edit)


@both
async def test_an_approval_leaving_out_the_edited_field_runs_the_edit_shown_not_the_held_call(
    archiver: Archiver, mode: str
) -> None:
    """The form requires only `approve`: an answer without the argument fields approves what the person
    was last shown (the edit), never the call as first held."""
    callback = person({"approve": True, FIELD_PREFIX + "task_id": "t2"}, {"approve": True})
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    assert "Archive 'Buy milk' for 7 days" in callback.asked[1].message
    assert archiver.archived == [("t2", 7, [])]


async def test_the_edit_shown_then_an_answer_without_fields_runs_the_edit_by_hand(archiver: Archiver) -> None:
    async with Client(archiver.server(), elicitation_callback=person()) as client:
        first = await call(client)
        shown = await call(client, first.request_state, {"approve": True, FIELD_PREFIX + "task_id": "t2"})
        assert isinstance(shown, types.InputRequiredResult)
        form = shown.input_requests["toolrun_confirm"].params  # type: ignore[index, union-attr]
        assert "Archive 'Buy milk'" in form.message
        ran = await call(client, shown.request_state, {"approve": True})
    assert isinstance(ran, types.CallToolResult) and not ran.is_error, text(ran)
    assert archiver.archived == [("t2", 7, [])]  # what was shown; t1 was never approved as shown last


@both
async def test_changing_back_to_the_held_arguments_is_shown_again_before_it_runs(
    archiver: Archiver, mode: str
) -> None:
    """The person edits t1 → t2, is shown t2, then answers with t1 again: t1 is not what was last shown,
    so it is previewed and asked once more; only that approval runs it."""
    callback = person(
        {"approve": True, FIELD_PREFIX + "task_id": "t2"},
        {"approve": True, FIELD_PREFIX + "task_id": "t1"},
        {"approve": True},
    )
    async with Client(archiver.server(), mode=mode, elicitation_callback=callback) as client:
        result = await client.call_tool("archive_task", {"task_id": "t1"})
    assert not result.is_error, text(result)
    assert len(callback.asked) == 3
    third = callback.asked[2]
    assert third.message.endswith("Allow this action? Archive 'Renew passport' for 7 days")
    assert fields(third)["task_id"]["default"] == "t1"
    assert archiver.archived == [("t1", 7, [])]


async def test_the_held_arguments_after_an_edit_are_not_run_at_once_by_hand(archiver: Archiver) -> None:
    async with Client(archiver.server(), elicitation_callback=person()) as client:
        first = await call(client)
        shown = await call(client, first.request_state, {"approve": True, FIELD_PREFIX + "task_id": "t2"})
        back = await call(client, shown.request_state, {"approve": True, FIELD_PREFIX + "task_id": "t1"})
        assert isinstance(back, types.InputRequiredResult)  # asked again, nothing ran
        assert archiver.archived == []
        form = back.input_requests["toolrun_confirm"].params  # type: ignore[index, union-attr]
        assert form.message.endswith("Allow this action? Archive 'Renew passport' for 7 days")
        # The t2 state replayed with its own edit cannot run anything either: the confirmation is pending,
        # and an approval of t2 there runs t2 (what that state showed), once.
        ran = await call(client, back.request_state, {"approve": True})
    assert isinstance(ran, types.CallToolResult) and not ran.is_error, text(ran)
    assert archiver.archived == [("t1", 7, [])]
