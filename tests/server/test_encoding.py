"""The service's JSON on its hot path (msgspec, with the stdlib for what msgspec refuses): message rows,
the `/chat` body, stream frames and log lines read the same as before, odd strings included."""

from __future__ import annotations

import json
import logging

import pytest

from toolrun.server._observe import JSONFormatter, configure_logging
from toolrun.server._responses import FastJSONResponse, json_text
from toolrun.server._statements import decode_row, encode_row

ODD = {
    "role": "tool",
    "content": 'é 漢字 😀 \u2028 \x00 "q" \\ end',
    "nested": {"list": [1, 2.5, None, True], "empty": {}},
}


def test_rows_round_trip_and_read_as_the_stdlib_wrote_them() -> None:
    assert decode_row(encode_row(ODD)) == ODD
    assert json.loads(encode_row(ODD)) == ODD
    assert decode_row(json.dumps(ODD)) == ODD  # rows written before this change


def test_a_lone_surrogate_still_round_trips_through_a_row() -> None:
    data = {"role": "user", "content": "bad \ud800 text"}
    text = encode_row(data)  # msgspec refuses it: the stdlib escapes it
    assert "\\ud800" in text
    assert decode_row(text) == data  # and msgspec refuses the escape on the way back: the stdlib reads it


def test_stream_frames_are_compact_json_with_clean_unicode() -> None:
    assert json.loads(json_text(ODD)) == ODD
    assert ", " not in json_text({"a": 1, "b": [1, 2]})
    framed = json_text({"text": "bad \ud800 text"})
    assert json.loads(framed) == {"text": "bad \ufffd text"}
    framed.encode("utf-8")  # would raise on a lone surrogate: the stream would be cut


def test_stream_frames_write_what_json_cannot_as_text() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert json.loads(json_text({"v": Odd()})) == {"v": "odd"}


def test_the_chat_body_renders_as_starlette_would() -> None:
    body = {"output": "Done: task_1 é", "messages": [ODD], "pending": []}
    assert json.loads(FastJSONResponse(body).body) == body
    with pytest.raises(UnicodeEncodeError):  # as JSONResponse: a body that cannot be UTF-8 is refused
        FastJSONResponse({"output": "\ud800"})


def test_log_lines_are_json_and_library_info_records_are_never_made() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    saved_levels = {n: logging.getLogger(n).level for n in ("toolrun", "uvicorn", "httpx")}
    try:
        configure_logging("INFO")
        assert logging.getLogger("toolrun.server").isEnabledFor(logging.INFO)
        assert logging.getLogger("uvicorn").isEnabledFor(logging.INFO)
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)  # no record built, none dropped
        assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
        configure_logging("DEBUG")
        assert logging.getLogger("toolrun.server").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("sqlalchemy.engine").isEnabledFor(logging.INFO)
        configure_logging("ERROR")
        assert not logging.getLogger("toolrun.server").isEnabledFor(logging.WARNING)
        assert not logging.getLogger("httpx").isEnabledFor(logging.WARNING)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        for name, value in saved_levels.items():
            logging.getLogger(name).setLevel(value)
    record = logging.LogRecord("toolrun.server", logging.INFO, __file__, 1, "run", None, None)
    record.__dict__.update({"event": "run", "user_id": "usr_é", "odd": object(), "bad": "\ud800"})
    line = json.loads(JSONFormatter().format(record))
    assert line["event"] == "run" and line["user_id"] == "usr_é" and line["message"] == "run"
    assert line["odd"].startswith("<object")
    record.__dict__.pop("bad")
    assert json.loads(JSONFormatter().format(record))["level"] == "info"
