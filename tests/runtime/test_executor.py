"""The executor's front half and its results: lookup, access, validation, errors, conversion."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import logging
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from toolrun import ErrorCode, Tool, ToolCall, ToolContext, ToolError, ToolRegistry, ToolResult, tool
from toolrun.runtime import ToolExecutor

from .conftest import call


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers (a sync tool, run in a worker thread)."""
    return a * b


@tool(roles={"admin"})
async def purge_cache() -> str:
    """Clear every cache."""
    return "purged"


async def test_async_and_sync_tools_run_and_report_timing(make_executor: Any) -> None:
    ex = make_executor(add, multiply)
    r = await ex.execute(call("add", {"a": 1, "b": 2}, id="c1"))
    assert (r.status, r.value, r.call_id, r.tool_name, r.attempts, r.error) == ("ok", 3, "c1", "add", 1, None)
    assert r.duration > 0 and r.render() == "3"
    r = await ex.execute(call("multiply", {"a": 3, "b": 4}))
    assert (r.status, r.value) == ("ok", 12)


async def test_context_defaults_to_anonymous_and_mapping_or_empty_arguments_work(make_executor: Any) -> None:
    @tool
    def hello(ctx: ToolContext, name: str = "world") -> str:
        """Say hello."""
        return f"hello {name} from {ctx.user_id}"

    ex = make_executor(hello)
    assert (await ex.execute(ToolCall(name="hello"))).value == "hello world from None"
    assert (await ex.execute(ToolCall(name="hello", arguments=""))).value == "hello world from None"
    r = await ex.execute(ToolCall(name="hello", arguments={"name": "you"}), ToolContext(user_id="u1"))
    assert r.value == "hello you from u1"


async def test_unknown_tool_is_not_found_with_suggestions(make_executor: Any) -> None:
    ex = make_executor(add, multiply)
    r = await ex.execute(call("ad", {"a": 1}))
    assert r.status == "error" and r.error is not None
    assert r.error.code == ErrorCode.NOT_FOUND
    assert r.error.details["suggestions"] == ["add"]
    assert "add" in r.error.message and r.attempts == 0
    r = await ex.execute(call("x" * 10_000))
    assert r.error is not None and r.error.code == ErrorCode.NOT_FOUND and len(r.error.message) < 300


async def test_roles_and_allowlists_gate_access(make_executor: Any) -> None:
    ex = make_executor(add, purge_cache)
    r = await ex.execute(call("purge_cache"), ToolContext(roles=("member",)))
    assert r.error is not None and r.error.code == ErrorCode.PERMISSION_DENIED
    r = await ex.execute(call("purge_cache"), ToolContext(roles=("member", "admin")))
    assert r.value == "purged"
    r = await ex.execute(call("add", {"a": 1, "b": 1}), ToolContext(allowed_tools=frozenset({"purge_cache"})))
    assert r.error is not None and r.error.code == ErrorCode.PERMISSION_DENIED
    r = await ex.execute(call("add", {"a": 1, "b": 1}), ToolContext(allowed_tools=frozenset({"add"})))
    assert r.value == 2


async def test_invalid_arguments_list_every_problem(make_executor: Any) -> None:
    ex = make_executor(add)
    r = await ex.execute(call("add", {"a": "one", "c": 3}))
    assert r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS
    problems = r.error.details["problems"]
    assert {p["path"] for p in problems} == {"a", "b", "c"}
    assert all(set(p) == {"path", "message", "expected", "given"} for p in problems)
    assert r.error.message.startswith("Invalid arguments for tool 'add' (3 problems)")
    assert r.attempts == 0
    r = await ex.execute(call("add", '{"a": 1,'))
    assert r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS
    assert "not valid JSON" in r.error.message


async def test_schema_tools_validate_with_jsonschema(make_executor: Any) -> None:
    search = Tool.from_schema(
        "search",
        "Search.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        lambda q: [q, q],
    )
    ex = make_executor(search)
    assert (await ex.execute(call("search", {"q": "x"}))).value == ["x", "x"]
    r = await ex.execute(call("search", {"q": 1}))
    assert r.error is not None and r.error.code == ErrorCode.INVALID_ARGUMENTS


async def test_a_tool_error_reaches_the_model_as_is(make_executor: Any) -> None:
    @tool
    async def rename(title: str) -> str:
        """Rename a task."""
        raise ToolError(
            "INVALID_TITLE", "Titles are at most 5 characters.", recover_action="Ask for a shorter title."
        )

    ex = make_executor(rename)
    r = await ex.execute(call("rename", {"title": "much too long"}))
    assert r.error is not None and r.error.code == "INVALID_TITLE"
    assert (
        r.render()
        == "Error INVALID_TITLE: Titles are at most 5 characters.\nWhat to do: Ask for a shorter title."
    )


async def test_unexpected_exception_is_execution_failed_with_an_error_id_and_no_internals(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "-".join(["secret", "detail"])  # not a literal: tracebacks show source lines

    @tool
    def broken() -> int:
        """Always fails."""
        raise KeyError(secret)

    ex = make_executor(broken)
    with caplog.at_level(logging.DEBUG):
        r = await ex.execute(call("broken"))
    assert r.error is not None and r.error.code == ErrorCode.EXECUTION_FAILED
    error_id = r.error.details["error_id"]
    assert error_id.startswith("err_") and error_id in r.error.message
    assert "secret-detail" not in r.render() and "KeyError" not in r.render()
    # One line at ERROR naming the error id; the (redacted) traceback only at DEBUG.
    [line, stack] = [rec for rec in caplog.records if rec.name == "toolrun"]
    assert line.levelno == logging.ERROR and error_id in line.getMessage() and line.exc_info is None
    assert stack.levelno == logging.DEBUG and error_id in stack.getMessage()
    assert stack.exc_info is not None and "secret-detail" not in caplog.text
    assert "KeyError" in caplog.text and "Traceback" in caplog.text  # the type and stack are kept


async def test_a_failing_tool_logs_one_line_without_a_traceback_by_default(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    async def broken() -> int:
        """Always fails."""
        raise RuntimeError("boom")

    ex = make_executor(broken)
    with caplog.at_level(logging.INFO):
        r = await ex.execute(call("broken"))
    [record] = [rec for rec in caplog.records if rec.name == "toolrun"]
    assert r.error is not None and r.error.details["error_id"] in record.getMessage()
    assert "RuntimeError" in record.getMessage() and record.exc_info is None
    assert "Traceback" not in caplog.text


async def test_exception_messages_can_be_logged_when_asked(
    make_executor: Any, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    async def broken() -> int:
        """Always fails."""
        raise ValueError("detail-for-developers")

    ex = make_executor(broken, log_exception_messages=True)
    with caplog.at_level(logging.ERROR):
        await ex.execute(call("broken"))
    assert "detail-for-developers" in caplog.text


class Color(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    label: str
    tags: set[str]


async def test_results_are_made_json_safe(make_executor: Any) -> None:
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    ident = uuid.UUID(int=1)

    @tool
    async def everything() -> Any:
        """Return a bit of everything."""
        return {
            "point": Point(x=1, y=2),
            "box": Box(label="b", tags={"t"}),
            "when": when,
            "day": when.date(),
            "color": Color.RED,
            "set": {1},
            "tuple": (1, 2),
            "bytes": b"text",
            "binary": b"\xff\x00",
            "id": ident,
            "nan": float("nan"),
        }

    ex = make_executor(everything)
    r = await ex.execute(call("everything"))
    assert r.status == "ok"
    assert r.value["point"] == {"x": 1, "y": 2}
    assert r.value["box"] == {"label": "b", "tags": ["t"]}
    assert r.value["when"] == "2024-01-02T03:04:05Z" and r.value["day"] == "2024-01-02"
    assert r.value["color"] == "red" and r.value["set"] == [1] and r.value["tuple"] == [1, 2]
    assert r.value["bytes"] == "dGV4dA==" or r.value["bytes"] == "text"
    assert isinstance(r.value["binary"], str)
    assert r.value["id"] == str(ident) and r.value["nan"] is None


async def test_non_serialisable_results_are_result_invalid(make_executor: Any) -> None:
    @tool
    async def gives_object() -> Any:
        """Returns an object with no JSON form."""
        return object()

    @tool
    async def gives_cycle() -> Any:
        """Returns a cycle."""
        data: dict[str, Any] = {}
        data["self"] = data
        return data

    ex = make_executor(gives_object, gives_cycle)
    for name in ("gives_object", "gives_cycle"):
        r = await ex.execute(call(name))
        assert r.error is not None and r.error.code == ErrorCode.RESULT_INVALID, name
        assert r.error.details["error_id"]


async def test_results_breaking_the_declared_output_type_are_result_invalid(make_executor: Any) -> None:
    @tool
    async def count() -> int:
        """Count."""
        return "many"  # type: ignore[return-value]

    raw = Tool.from_schema("raw", "Raw.", {}, lambda: 5, output_schema={"type": "string"})
    ex = make_executor(count, raw)
    for name in ("count", "raw"):
        r = await ex.execute(call(name))
        assert r.error is not None and r.error.code == ErrorCode.RESULT_INVALID, name
        assert r.error.details["problems"]


async def test_huge_results_are_truncated_with_a_visible_marker(make_executor: Any) -> None:
    @tool
    async def big_text() -> str:
        """Big."""
        return "é" * 50

    @tool
    async def big_list() -> list[int]:
        """Big."""
        return list(range(100))

    ex = make_executor(big_text, big_list, max_result_chars=20)
    r = await ex.execute(call("big_text"))
    assert r.value.startswith("é" * 20) and "truncated" in r.value and "50" in r.value
    assert r.metadata == {"truncated": True, "original_chars": 50}
    r = await ex.execute(call("big_list"))
    assert isinstance(r.value, str) and r.value.startswith("[0,1,2,3,4,5,6,7,8,9…")
    assert "truncated" in r.value and r.metadata["truncated"] is True
    ex2 = make_executor(big_list, max_result_chars=None)
    assert (await ex2.execute(call("big_list"))).value == list(range(100))


async def test_a_tool_may_return_a_whole_tool_result(make_executor: Any) -> None:
    @tool
    async def report() -> ToolResult:
        """Report."""
        return ToolResult.ok({"rows": 3}, message="3 rows exported.", metadata={"file": "x.csv"})

    @tool
    async def refuse() -> ToolResult:
        """Refuse."""
        return ToolResult.error("NOPE", "Not today.")

    ex = make_executor(report, refuse)
    r = await ex.execute(call("report", id="c9"))
    assert (r.call_id, r.value, r.message, r.metadata, r.attempts) == (
        "c9",
        {"rows": 3},
        "3 rows exported.",
        {"file": "x.csv"},
        1,
    )
    r = await ex.execute(call("refuse"))
    assert r.status == "error" and r.error is not None and r.error.code == "NOPE"


async def test_tool_error_details_are_made_json_safe(make_executor: Any) -> None:
    @tool
    async def odd() -> int:
        """Odd."""
        raise ToolError("ODD", "odd", details={"when": dt.date(2024, 1, 1), "obj": object()})

    ex = make_executor(odd)
    r = await ex.execute(call("odd"))
    assert r.error is not None and r.error.code == "ODD" and r.error.details == {}


async def test_plans_follow_registry_changes() -> None:
    registry = ToolRegistry([add])
    ex = ToolExecutor(registry)
    assert (await ex.execute(call("add", {"a": 1, "b": 1}))).value == 2
    registry.unregister("add")
    r = await ex.execute(call("add", {"a": 1, "b": 1}))
    assert r.error is not None and r.error.code == ErrorCode.NOT_FOUND

    @registry.register(name="add")
    async def add_ten(a: int, b: int) -> int:
        """Add, plus ten."""
        return a + b + 10

    assert (await ex.execute(call("add", {"a": 1, "b": 1}))).value == 12


async def test_views_and_aliases_work_as_registries() -> None:
    @tool(name="tasks.create")
    async def create(title: str) -> str:
        """Create."""
        return title

    registry = ToolRegistry([create, add])
    ex = ToolExecutor(registry.prefixed("app"))
    assert (await ex.execute(call("app_add", {"a": 1, "b": 2}))).value == 3
    ex = ToolExecutor(registry)
    assert (await ex.execute(call("tasks_create", {"title": "x"}))).tool_name == "tasks.create"
    ex = ToolExecutor(registry.filter(deny=["add"]))
    r = await ex.execute(call("add", {"a": 1, "b": 2}))
    assert r.error is not None and r.error.code == ErrorCode.NOT_FOUND


def test_constructor_refuses_nonsense() -> None:
    registry = ToolRegistry()
    with pytest.raises(ValueError):
        ToolExecutor(registry, default_timeout=0)
    with pytest.raises(ValueError):
        ToolExecutor(registry, max_result_chars=0)
    with pytest.raises(ValueError):
        ToolExecutor(registry, thread_pool_size=0)
    with pytest.raises(ValueError):
        ToolExecutor(registry, hash_key=b"short")


async def test_scalar_results_keep_their_value_and_still_meet_the_declared_output_type(
    make_executor: Any,
) -> None:
    @tool
    async def flag() -> bool:
        """A flag."""
        return True

    @tool
    async def nothing() -> None:
        """Nothing."""

    @tool
    async def untyped():  # type: ignore[no-untyped-def]
        """No declared output type."""
        return 7

    @tool
    async def says_text() -> str:
        """Declares text, returns an int."""
        return 7  # type: ignore[return-value]

    @tool
    async def says_text_too() -> str:
        """Declares text, returns nothing."""
        return None  # type: ignore[return-value]

    ex = make_executor(flag, nothing, untyped, says_text, says_text_too)
    for name, value, text in (("flag", True, "true"), ("nothing", None, "null"), ("untyped", 7, "7")):
        r = await ex.execute(call(name))
        assert r.status == "ok" and r.value is value and r.attempts == 1, name
        assert r.render() == text and r.call_id and r.tool_name == name
    for name in ("says_text", "says_text_too"):
        r = await ex.execute(call(name))
        assert r.error is not None and r.error.code == ErrorCode.RESULT_INVALID, name
