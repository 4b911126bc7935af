from __future__ import annotations

from toolrun import ErrorCode, ToolError, ToolResult


def test_constructors_and_render() -> None:
    ok = ToolResult.ok({"id": 1, "title": "café"})
    assert ok.status == "ok" and ok.is_ok
    assert ok.render() == '{"id":1,"title":"café"}'
    assert ToolResult.ok("plain").render() == "plain"
    assert ToolResult.ok({"a": 1}, message="Created task 1.").render() == "Created task 1."
    hidden = ToolResult.ok({"secret": 1}, exclude_value_from_context=True)
    assert "secret" not in hidden.render()

    err = ToolResult.error(
        ErrorCode.RATE_LIMITED,
        "Too many calls.",
        retryable=True,
        recover_action="Wait 3 s.",
        details={"retry_after": 3},
    )
    assert err.status == "error" and err.is_error
    assert err.error is not None and err.error.code == "RATE_LIMITED"
    assert err.render() == "Error RATE_LIMITED: Too many calls.\nWhat to do: Wait 3 s."

    pending = ToolResult.confirmation_required_result("conf_1", "delete task t1")
    assert pending.confirmation_id == "conf_1"
    assert "has NOT run" in pending.render()


def test_tool_error_custom_code_and_round_trip() -> None:
    err = ToolError("INVALID_TITLE", "Title too long.", recover_action="Shorten it.", details={"max": 80})
    assert err.code == "INVALID_TITLE"
    assert ToolError.from_dict(err.to_dict()) == err
    result = ToolResult.fail(err, call_id="c1", tool_name="add_task", attempts=1, duration=0.01)
    assert ToolResult.from_dict(result.to_dict()) == result
    assert isinstance(err, Exception)


def test_error_code_is_a_string() -> None:
    assert ErrorCode.NOT_FOUND == "NOT_FOUND"
    assert {c.value for c in ErrorCode} >= {
        "NOT_FOUND",
        "PERMISSION_DENIED",
        "INVALID_ARGUMENTS",
        "CONFIRMATION_DENIED",
        "CONFIRMATION_EXPIRED",
        "CONFIRMATION_NOT_FOUND",
        "RATE_LIMITED",
        "DEADLINE_EXCEEDED",
        "BUDGET_EXCEEDED",
        "TIMEOUT",
        "EXECUTION_FAILED",
        "RESULT_INVALID",
    }


def test_render_of_scalars_is_their_compact_json() -> None:
    import json

    class Named(str):
        pass

    for value in (3, 0, -(10**30), True, False, None, 1.5, "text", Named("sub"), [1, True, None]):
        expected = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        assert ToolResult.ok(value).render() == expected, value


def test_an_instances_error_is_a_plain_attribute_and_the_class_attribute_the_constructor() -> None:
    # `error` is a non-data descriptor: on an instance the field in `__dict__` wins without a Python call
    # (the executor reads it on every call), on the class it is the `ToolResult.error(...)` constructor.
    descriptor = vars(ToolResult)["error"]
    assert not hasattr(type(descriptor), "__set__")
    failed = ToolResult.error("INVALID_ARGUMENTS", "bad")
    assert failed.error is not None and failed.error.code == "INVALID_ARGUMENTS"
    ok = ToolResult.ok(1)
    assert ok.error is None
    ok.error = failed.error
    assert ok.error is failed.error and vars(ok)["error"] is failed.error
    bare = object.__new__(ToolResult)  # no fields set: still reads as None
    assert bare.error is None
