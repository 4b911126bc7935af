"""The signed form of an `AgentRun`: the key's minimum length, canonical JSON, the exact error texts.

Pinned by mutation testing (docs/mutation.md): each test fails for a mutant that the older tests let live.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolrun import ToolCall, ToolResult
from toolrun.agent import AgentRun, InvalidRunError, PendingCall, RunSignatureError, ToolCallRecord
from toolrun.models import Usage

KEY = b"k" * 16


def small_run() -> AgentRun:
    call = ToolCall(id="c1", name="delete_task", arguments={"task_id": "t1"})
    return AgentRun(
        run_id="run_1",
        status="awaiting_confirmation",
        steps=2,
        tool_calls=[
            ToolCallRecord(
                call=call,
                result=ToolResult.confirmation_required_result(
                    "conf_1", "delete", call_id="c1", tool_name="delete_task"
                ),
                step=2,
            )
        ],
        pending=[PendingCall(confirmation_id="conf_1", call=call, summary="delete t1")],
        batch=[call],
        usage=Usage(input_tokens=3, output_tokens=4),
        plan={"nested": {"b": [1, {"z": 1, "a": "é"}], "a": None}},
        state={"ünï": {"y": 2, "x": 1}},
    )


def test_a_key_of_exactly_16_bytes_signs_and_15_do_not() -> None:
    run = small_run()
    text = run.to_json(signing_key=KEY)
    assert AgentRun.from_json(text, signing_key=bytearray(KEY)).to_dict() == run.to_dict()
    for bad in (b"k" * 15, b"", "k" * 32):
        with pytest.raises(ValueError, match="at least 16 bytes"):
            run.to_json(signing_key=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at least 16 bytes"):
            AgentRun.from_json(text, signing_key=bad)  # type: ignore[arg-type]


def test_the_signature_is_hmac_sha256_over_canonical_json_so_key_order_and_spacing_do_not_matter() -> None:
    import hashlib
    import hmac

    data = json.loads(small_run().to_json(signing_key=KEY))
    signature = data.pop("signature")
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert signature == "hmac-sha256:" + hmac.new(KEY, canonical, hashlib.sha256).hexdigest()

    # The same content written another way (reversed nested key order, indentation, \u escapes) verifies.
    def reverse(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: reverse(v) for k, v in reversed(list(value.items()))}
        if isinstance(value, list):
            return [reverse(v) for v in value]
        return value

    rewritten = json.dumps(dict(reverse(data), signature=signature), indent=2, ensure_ascii=True)
    assert AgentRun.from_json(rewritten, signing_key=KEY).plan == {
        "nested": {"b": [1, {"z": 1, "a": "é"}], "a": None}
    }
    # A change deep inside a nested dict is caught.
    data["plan"]["nested"]["b"][1]["z"] = 2
    with pytest.raises(RunSignatureError, match="does not match"):
        AgentRun.from_json(json.dumps(dict(data, signature=signature)), signing_key=KEY)


def test_another_key_and_a_signature_for_other_content_are_refused() -> None:
    text = small_run().to_json(signing_key=KEY)
    with pytest.raises(RunSignatureError, match="does not match"):
        AgentRun.from_json(text, signing_key=b"o" * 16)
    with pytest.raises(RunSignatureError, match="not signed"):
        AgentRun.from_json(small_run().to_json(), signing_key=KEY)
    other = small_run()
    other.steps = 3
    forged = dict(json.loads(other.to_json()), signature=json.loads(text)["signature"])
    with pytest.raises(RunSignatureError):
        AgentRun.from_json(json.dumps(forged), signing_key=KEY)
    assert issubclass(RunSignatureError, InvalidRunError)


def test_unsigned_text_has_no_signature_and_a_signed_one_reads_without_a_key() -> None:
    run = small_run()
    assert "signature" not in json.loads(run.to_json())
    signed = run.to_json(signing_key=KEY)
    assert json.loads(signed)["signature"].startswith("hmac-sha256:")
    assert AgentRun.from_json(signed).to_dict() == run.to_dict()
    assert "é" in run.to_json() and "\\u00e9" not in run.to_json()  # written as UTF-8, not escaped


def test_error_messages_name_the_field_and_the_expected_and_found_kinds() -> None:
    data = small_run().to_dict()
    cases: list[tuple[dict[str, Any], str]] = [
        (dict(data, run_id=5), "Invalid AgentRun: run_id: expected a string, got int"),
        (dict(data, steps=True), "Invalid AgentRun: steps: expected an integer, got a boolean"),
        (dict(data, steps=1.5), "Invalid AgentRun: steps: expected an integer, got float"),
        (dict(data, plan=[]), "Invalid AgentRun: plan: expected an object or null, got list"),
        (dict(data, messages={}), "Invalid AgentRun: messages: expected an array, got dict"),
        (dict(data, tool_calls=[1]), "Invalid AgentRun: tool_calls[0]: expected an object, got int"),
        ({k: v for k, v in data.items() if k != "run_id"}, "Invalid AgentRun: run_id: is missing"),
        (dict(data, status="paused"), "Invalid AgentRun: status: unknown status 'paused'"),
    ]
    for bad, message in cases:
        with pytest.raises(InvalidRunError) as info:
            AgentRun.from_dict(bad)
        assert str(info.value) == message
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_json("{")
    assert info.value.field is None and str(info.value).startswith("Invalid AgentRun: the text is not JSON (")


def test_optional_fields_default_when_missing() -> None:
    data = small_run().to_dict()
    for name in (
        "mode",
        "output",
        "steps",
        "tool_calls",
        "pending",
        "batch",
        "usage",
        "error",
        "plan",
        "state",
    ):
        del data[name]
    run = AgentRun.from_dict(data)
    assert (run.mode, run.output, run.steps, run.tool_calls, run.pending, run.batch) == (
        "native",
        None,
        0,
        [],
        [],
        [],
    )
    assert (run.usage, run.error, run.plan, run.state) == (Usage(), None, None, {})
    data = small_run().to_dict()
    data["tool_calls"][0]["result"] = {"status": "ok", "call_id": "c1", "tool_name": "t", "value": 1}
    data["pending"][0].pop("arguments")
    data["batch"][0].pop("arguments")
    run = AgentRun.from_dict(data)
    assert run.tool_calls[0].result.ok and run.pending[0].arguments is None and run.batch[0].arguments is None


def test_a_state_value_that_is_not_json_safe_is_named() -> None:
    run = small_run()
    run.state = {"fine": 1, "handle": object()}
    with pytest.raises(TypeError, match=r"AgentRun.state\['handle'\] is not JSON-safe"):
        run.to_json()
    run.state = {}
    run.plan = {"bad": object()}
    with pytest.raises(TypeError) as info:
        run.to_json()
    assert "AgentRun.state" not in str(info.value)


def test_done_and_results() -> None:
    run = small_run()
    assert not run.done and run.results == [run.tool_calls[0].result]
    for status in ("running", "awaiting_confirmation"):
        assert not AgentRun(status=status).done  # type: ignore[arg-type]
    for status in ("completed", "failed", "max_steps", "needs_user_input"):
        assert AgentRun(status=status).done  # type: ignore[arg-type]
    assert AgentRun().run_id.startswith("run_") and len(AgentRun().run_id) == 24
    assert AgentRun().run_id != AgentRun().run_id


RESULT_CASES = [
    ("status", 1, "tool_calls[0].result.status", "expected a string, got int"),
    ("call_id", 1, "tool_calls[0].result.call_id", "expected a string, got int"),
    ("tool_name", None, "tool_calls[0].result.tool_name", "expected a string, got NoneType"),
    ("message", 1, "tool_calls[0].result.message", "expected a string or null, got int"),
    ("confirmation_id", [], "tool_calls[0].result.confirmation_id", "expected a string or null, got list"),
    ("metadata", [], "tool_calls[0].result.metadata", "expected an object, got list"),
    ("attempts", "2", "tool_calls[0].result.attempts", "expected an integer, got str"),
    ("attempts", True, "tool_calls[0].result.attempts", "expected an integer, got a boolean"),
    ("error", [], "tool_calls[0].result.error", "expected an object or null, got list"),
]


@pytest.mark.parametrize(("name", "value", "field", "message"), RESULT_CASES)
def test_each_result_field_of_the_wrong_type_is_named(
    name: str, value: Any, field: str, message: str
) -> None:
    data = small_run().to_dict()
    data["tool_calls"][0]["result"][name] = value
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(data)
    assert info.value.field == field and str(info.value) == f"Invalid AgentRun: {field}: {message}"


@pytest.mark.parametrize(
    ("error", "field", "message"),
    [
        ({"code": "x", "message": 1}, "error.message", "expected a string, got int"),
        ({"code": "x"}, "error.message", "is missing"),
        (
            {"code": "x", "message": "m", "details": []},
            "error.details",
            "expected an object or null, got list",
        ),
    ],
)
def test_a_result_error_of_the_wrong_shape_is_named(error: dict[str, Any], field: str, message: str) -> None:
    data = small_run().to_dict()
    data["tool_calls"][0]["result"]["error"] = error
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(data)
    assert str(info.value) == f"Invalid AgentRun: tool_calls[0].result.{field}: {message}"


def test_a_result_of_only_a_status_reads_with_the_defaults() -> None:
    data = small_run().to_dict()
    data["tool_calls"][0]["result"] = {"status": "error", "error": {"code": "boom", "message": "m"}}
    result = AgentRun.from_dict(data).tool_calls[0].result
    assert (result.call_id, result.tool_name, result.message, result.metadata, result.attempts) == (
        "",
        "",
        None,
        {},
        0,
    )
    data["tool_calls"][0]["result"] = {"status": "done"}
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(data)
    assert str(info.value) == "Invalid AgentRun: tool_calls[0].result.status: unknown result status 'done'"


def test_entries_read_on_their_own_name_their_fields() -> None:
    call = {"id": "c1", "name": "t", "arguments": None}
    for bad, message in [
        ({}, "Invalid AgentRun: pending.confirmation_id: is missing"),
        (
            {"confirmation_id": "x", "call": {"id": "c1"}, "summary": "s"},
            "Invalid AgentRun: pending.call.name: is missing",
        ),
        (
            {"confirmation_id": "x", "call": 3, "summary": "s"},
            "Invalid AgentRun: pending.call: expected an object, got int",
        ),
        ("nope", "Invalid AgentRun: pending: expected an object, got str"),
    ]:
        with pytest.raises(InvalidRunError) as info:
            PendingCall.from_dict(bad)  # type: ignore[arg-type]
        assert str(info.value) == message
    with pytest.raises(InvalidRunError, match=r"^Invalid AgentRun: tool_call.step: is missing$"):
        ToolCallRecord.from_dict({"call": call, "result": {"status": "ok"}})
    with pytest.raises(InvalidRunError, match=r"^Invalid AgentRun: tool_call: expected an object, got list$"):
        ToolCallRecord.from_dict([])  # type: ignore[arg-type]


def test_text_that_is_not_an_object_and_the_exact_signature_errors() -> None:
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_json("[]")
    assert str(info.value) == "Invalid AgentRun: (the run): expected an object, got list"
    with pytest.raises(RunSignatureError) as info:
        AgentRun.from_json(small_run().to_json(), signing_key=KEY)
    assert str(info.value) == (
        "Invalid AgentRun: the run is not signed, and a signed one is required; it cannot be trusted."
    )
    with pytest.raises(RunSignatureError) as info:
        AgentRun.from_json(small_run().to_json(signing_key=KEY), signing_key=b"o" * 16)
    assert str(info.value) == (
        "Invalid AgentRun: the signature does not match: the run was changed after it was signed, or signed "
        "with another key. Nothing of it can be trusted; start a new run."
    )
    with pytest.raises(ValueError, match=r"^A signing key must be at least 16 bytes\.$"):
        small_run().to_json(signing_key=b"")


def test_a_signed_run_is_written_as_utf8_and_lone_surrogates_in_state_still_verify() -> None:
    run = small_run()
    signed = run.to_json(signing_key=KEY)
    assert "ünï" in signed and "\\u00fc" not in signed
    run.state = {"odd": "\ud800 half a pair"}  # JSON text can carry it (as \ud800); the signature must too
    signed = run.to_json(signing_key=KEY)
    assert AgentRun.from_json(signed, signing_key=KEY).state == {"odd": "\ud800 half a pair"}


def test_the_state_error_says_where_handles_belong() -> None:
    run = small_run()
    run.state = {"client": object()}
    with pytest.raises(TypeError, match=r"Keep handles and clients in ToolContext\.deps, not in state\.$"):
        run.to_json()


def test_top_level_fields_and_messages_of_the_wrong_shape_are_named_exactly() -> None:
    data = small_run().to_dict()
    data["messages"] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "t", "arguments": None}]},
    ]
    assert AgentRun.from_dict(data).messages[1].to_dict()["tool_calls"][0]["name"] == "t"
    no_calls = dict(data, messages=[{"role": "assistant", "content": "done"}])  # tool_calls may be left out
    assert AgentRun.from_dict(no_calls).messages[0].to_dict()["content"] == "done"
    cases: list[tuple[Any, str]] = [
        (dict(data, mode=1), "Invalid AgentRun: mode: expected a string, got int"),
        (dict(data, mode="auto"), "Invalid AgentRun: mode: unknown mode 'auto'"),
        (dict(data, state=[]), "Invalid AgentRun: state: expected an object or null, got list"),
        (
            dict(data, schema_version=2),
            "Invalid AgentRun: schema_version: cannot read schema version 2 (expected 1)",
        ),
        (
            dict(data, messages=[{"role": "assistant", "tool_calls": {}}]),
            "Invalid AgentRun: messages[0].tool_calls: expected an array or null, got dict",
        ),
        (
            dict(data, messages=[{"role": "assistant", "tool_calls": [3]}]),
            "Invalid AgentRun: messages[0].tool_calls[0]: expected an object, got int",
        ),
        ([], "Invalid AgentRun: (the run): expected an object, got list"),
    ]
    for bad, message in cases:
        with pytest.raises(InvalidRunError) as info:
            AgentRun.from_dict(bad)
        assert str(info.value) == message
    data["tool_calls"][0]["result"] = 3
    with pytest.raises(
        InvalidRunError, match=r"^Invalid AgentRun: tool_calls\[0\]\.result: expected an object"
    ):
        AgentRun.from_dict(data)


def test_errors_from_the_message_and_usage_readers_keep_their_text() -> None:
    data = small_run().to_dict()
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(dict(data, messages=[{"role": "robot", "content": "x"}]))
    assert info.value.field == "messages[0]" and "unknown role 'robot'" in str(info.value)
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(dict(data, usage={"input_tokens": "many"}))
    assert info.value.field == "usage" and "invalid literal for int()" in str(info.value)


def test_a_planner_run_reads_back_as_a_planner_run() -> None:
    run = small_run()
    run.mode = "planner"
    assert AgentRun.from_json(run.to_json()).mode == "planner"


@pytest.mark.parametrize(
    ("message", "field", "text"),
    [
        ({"role": 1, "content": "x"}, "messages[0].role", "expected a string, got int"),
        ({"role": "system"}, "messages[0].content", "is missing"),
        ({"role": "tool", "call_id": "c1"}, "messages[0].content", "is missing"),
        ({"role": "assistant", "content": 1}, "messages[0].content", "expected a string or null, got int"),
    ],
)
def test_each_message_field_of_the_wrong_shape_is_named(
    message: dict[str, Any], field: str, text: str
) -> None:
    data = dict(small_run().to_dict(), messages=[message])
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(data)
    assert str(info.value) == f"Invalid AgentRun: {field}: {text}"


def test_lists_of_the_wrong_type_and_results_that_are_not_results_are_named() -> None:
    data = small_run().to_dict()
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(dict(data, tool_calls={}))
    assert str(info.value) == "Invalid AgentRun: tool_calls: expected an array, got dict"
    data["tool_calls"][0]["result"]["surprise"] = 1
    with pytest.raises(InvalidRunError) as info:
        AgentRun.from_dict(data)
    assert str(info.value).startswith(
        "Invalid AgentRun: tool_calls[0].result: not a tool result (TypeError: "
    )
