"""Small pieces: result conversion, the fast ToolResult, summaries, invocation hashes, redacted logs."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest

from toolrun import ToolCall, ToolContext, ToolRegistry, ToolResult, tool
from toolrun._json import ResultNotJSON, json_safe
from toolrun.runtime import ToolExecutor
from toolrun.runtime._convert import ok_result, truncate
from toolrun.runtime._invocation import Invocation
from toolrun.runtime._logging import redacted_exc_info
from toolrun.runtime._stages import summarize_call


def test_the_fast_ok_result_equals_the_constructor() -> None:
    fast = ok_result("c1", "add", {"x": 1}, 2)
    slow = ToolResult(call_id="c1", tool_name="add", status="ok", value={"x": 1}, attempts=2)
    assert fast == slow and fast.to_dict() == slow.to_dict() and fast.error is None
    fast.metadata["k"] = 1
    assert ok_result("c", "t", 1, 1).metadata == {}  # no shared default


def test_json_safe_and_truncate_edges() -> None:
    assert json_safe(float("inf")) is None and json_safe(1.5) == 1.5 and json_safe("x") == "x"
    with pytest.raises(ResultNotJSON):
        json_safe(object())
    assert truncate("abc", None) == ("abc", None)
    assert truncate(12345678901234567890, 3) == (12345678901234567890, None)
    value, total = truncate({"k": "é" * 10}, 8)
    assert total == len('{"k":"' + "é" * 10 + '"}') and value.startswith('{"k":"éé')
    assert truncate({"k": "\ud800" * 3}, 5)[1] == 11


def test_summaries_show_the_arguments_in_full() -> None:
    @tool
    def send(to: str, body: str, when: Any = None) -> None:
        """Send a message to someone. It is delivered at once."""

    short = summarize_call(send, {"to": "bob", "body": "hi"})
    assert short == 'send(to="bob", body="hi") — Send a message to someone'
    text = summarize_call(send, {"to": "bob", "body": "x" * 1000, "when": object()})
    assert text.startswith('send — Send a message to someone\n  to: "bob"\n  body: "xxx')
    assert "<object>" in text
    assert text.count("x") == 1000  # folded over lines, never cut


async def test_the_invocation_hash_follows_replaced_arguments() -> None:
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    ex = ToolExecutor(ToolRegistry([echo]), hash_key=b"k" * 32)
    inv = Invocation(ex, echo, ToolCall(name="echo"), ToolContext(), {"text": "a"})
    first = inv.arguments_hash
    assert inv.arguments_hash == first
    inv.arguments = {"text": "b"}
    assert inv.arguments_hash != first
    assert "'b'" not in repr(inv)


def test_redacted_tracebacks_keep_types_frames_and_chains_only() -> None:
    secret = "s" + "3cr3t"
    try:
        try:
            raise KeyError(secret)
        except KeyError as inner:
            err = ValueError(secret)
            err.add_note(secret)
            raise err from inner
    except ValueError as exc:
        kind, value, tb = redacted_exc_info(exc)
    text = "".join(traceback.format_exception(kind, value, tb))
    assert secret not in text
    assert "ValueError: [message redacted by toolrun]" in text and "KeyError" in text
    assert "direct cause" in text and "test_redacted_tracebacks" in text
    try:
        compile("x = (", "<tool>", "exec")
    except SyntaxError as exc:
        text = logging.Formatter().formatException(redacted_exc_info(exc))
    assert "SyntaxError" in text
