"""Output budgets: a result over budget is cut where its structure allows, stays valid against the tool's
output type (or drops to text), tells the model what was left out, and is kept whole as an artifact that
`read_result` pages — for its owner only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun import Agent, ToolContext, ToolRegistry, ToolResult, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.models import FunctionModel, ModelResponse
from toolrun.runtime import ToolExecutor
from toolrun.runtime._budget import InMemoryArtifactStore
from toolrun.tools._options import OutputBudget

from .conftest import call

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=200),
    lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=10), inner, max_size=8),
    max_leaves=120,
)


async def page_all(ex: ToolExecutor, artifact_id: str, user: str | None, length: int) -> str:
    text, offset = "", 0
    while offset is not None:
        page = await ex.execute(
            call("read_result", {"artifact_id": artifact_id, "offset": offset, "length": length}),
            ToolContext(user_id=user),
        )
        assert page.status == "ok", page.render()
        text += page.value["text"]
        offset = page.value["next_offset"]
    return text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, limit=st.integers(200, 1500), length=st.integers(64, 5000))
async def test_any_result_over_budget_is_cut_valid_and_fully_recoverable(
    value: Any, limit: int, length: int
) -> None:
    @tool(output_budget=limit)
    async def produce() -> Any:
        """Returns the value."""
        return value

    ex = ToolExecutor(ToolRegistry([produce]))
    try:
        result = await ex.execute(call("produce"), ToolContext(user_id="u1"))
        whole = ToolResult(value=value).render()
        assert result.status == "ok"
        assert len(result.render()) <= limit  # the model is shown no more than the budget
        if len(whole) <= limit:
            assert result.value == value and "artifact_id" not in result.metadata
            return
        artifact_id = result.metadata["artifact_id"]
        assert "left out" in result.render() and artifact_id in result.render()
        assert await page_all(ex, artifact_id, "u1", length) == whole
        stranger = await ex.execute(
            call("read_result", {"artifact_id": artifact_id}), ToolContext(user_id="u2")
        )
        nobody = await ex.execute(call("read_result", {"artifact_id": artifact_id}), ToolContext())
        assert stranger.error.code == nobody.error.code == "NOT_FOUND"
    finally:
        ex.close()


@settings(max_examples=40, deadline=None)
@given(items=st.lists(st.integers(), min_size=1, max_size=400), limit=st.integers(200, 600))
async def test_a_typed_list_keeps_whole_items_and_its_type(items: list[int], limit: int) -> None:
    @tool(output_budget=limit)
    async def numbers() -> list[int]:
        """Numbers."""
        return items

    ex = ToolExecutor(ToolRegistry([numbers]))
    try:
        result = await ex.execute(call("numbers"), ToolContext(user_id="u1"))
    finally:
        ex.close()
    assert len(result.render()) <= limit
    if "artifact_id" in result.metadata:
        assert isinstance(result.value, list) and result.value == items[: len(result.value)]
        assert numbers.output_problems(result.value) == []
        assert f"{len(items) - len(result.value):,} of {len(items):,} items left out" in result.render()


async def test_text_keeps_head_and_tail() -> None:
    @tool(output_budget=400)
    async def log() -> str:
        """A long log."""
        return "START " + "x" * 5000 + " END"

    ex = ToolExecutor(ToolRegistry([log]))
    result = await ex.execute(call("log"), ToolContext())
    ex.close()
    shown = result.render()
    assert shown.startswith("START ") and " END\n[Cut to fit" in shown and "characters left out" in shown


async def test_an_object_cuts_its_largest_member_and_a_hopeless_cut_drops_to_text() -> None:
    @tool(output_budget=300)
    async def page() -> dict[str, Any]:
        """A page of rows."""
        return {"total": 500, "rows": [{"id": i} for i in range(500)]}

    @tool(output_budget=250)
    async def fixed() -> tuple[str, str]:
        """A pair no cut keeps valid (a two-item tuple cut to one item breaks the type)."""
        return ("a" * 500, "b" * 500)

    ex = ToolExecutor(ToolRegistry([page, fixed]))
    cut = await ex.execute(call("page"), ToolContext())
    pair = await ex.execute(call("fixed"), ToolContext())
    ex.close()
    assert cut.value["total"] == 500 and 0 < len(cut.value["rows"]) < 500
    assert "rows: " in cut.render() and "items left out" in cut.render()
    # a list cut drops items, which breaks `tuple[str, str]`: no valid cut, the model gets text, no value
    assert pair.value is None and pair.message is not None and len(pair.render()) <= 250


async def test_executor_default_budget_and_builtin_reader_in_the_agent() -> None:
    @tool
    async def dump() -> list[str]:
        """Many lines."""
        return [f"line {i}" for i in range(300)]

    seen: list[Any] = []

    def reply(messages, tools):  # type: ignore[no-untyped-def]
        seen.append([t.name for t in tools])
        if len(seen) == 1:
            return ModelResponse.from_tool_calls(("dump", {}))
        if len(seen) == 2:
            note = messages[-1].content
            artifact_id = note.split('artifact_id="')[1].split('"')[0]
            return ModelResponse.from_tool_calls(("read_result", {"artifact_id": artifact_id, "length": 50}))
        return ModelResponse.from_text(messages[-1].content)

    ex = ToolExecutor(ToolRegistry([dump]), output_budget=500)
    run = await Agent(FunctionModel(reply), executor=ex).run("dump it", context=ToolContext(user_id="u1"))
    ex.close()
    assert seen[0] == ["dump"] and seen[1] == ["dump", "read_result"]
    page = json.loads(run.output)
    assert (
        page["offset"] == 0
        and page["text"] == json.dumps([f"line {i}" for i in range(300)], separators=(",", ":"))[:50]
    )


async def test_expired_artifacts_are_gone() -> None:
    now = [1000.0]
    store = InMemoryArtifactStore(clock=lambda: now[0])

    @tool(output_budget=200)
    async def long() -> str:
        """Long."""
        return "y" * 1000

    ex = ToolExecutor(ToolRegistry([long]), artifacts=store, artifact_ttl=60)
    result = await ex.execute(call("long"), ToolContext(user_id="u"))
    artifact = await store.get(result.metadata["artifact_id"], "u")
    assert artifact is not None
    now[0] = artifact.expires_at + 1
    late = await ex.execute(call("read_result", {"artifact_id": artifact.id}), ToolContext(user_id="u"))
    ex.close()
    assert late.error.code == "NOT_FOUND"


def test_budgets_are_checked_when_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="at least 200"):

        @tool(output_budget=0)
        def nothing() -> str:
            """Nothing."""
            return ""

    words = OutputBudget(limit=300, counter=lambda text: len(text.split()))
    made = tool(name="words", description="Words.", output_budget=words)(lambda: "a")
    assert made.options.output_budget is words
