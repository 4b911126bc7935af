"""`SSEResponse`: a run's events as `text/event-stream` frames, written straight to the ASGI send, with a
`: ping` comment when the run is quiet for `ping` seconds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolrun.server._handle import RunHandle
from toolrun.server.events import TextDelta
from toolrun.server.sse import FramesResponse, SSEResponse


async def test_frames_ids_pings_and_the_end() -> None:
    handle = RunHandle("run_1", "conv_1")
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def run() -> None:
        handle._put(TextDelta(run_id="run_1", message_id="m", text="one\nline\ud800"))
        await asyncio.sleep(0.25)  # quiet longer than the ping interval
        handle._put(TextDelta(run_id="run_1", message_id="m", text="two"))
        handle._close()

    producer = asyncio.create_task(run())
    await SSEResponse(handle, ping=0.1)({"type": "http"}, receive, send)
    await producer

    start, *bodies = sent
    headers = dict(start["headers"])
    assert start["status"] == 200 and headers[b"content-type"].startswith(b"text/event-stream")
    assert headers[b"cache-control"] == b"no-store" and b"content-length" not in headers
    assert bodies[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    text = b"".join(b["body"] for b in bodies).decode()
    frames = [f for f in text.split("\r\n\r\n") if f]
    assert frames[0].startswith("id: run_1:1\r\nevent: text_delta\r\ndata: ")
    assert frames[-1].startswith("id: run_1:2\r\nevent: text_delta\r\ndata: ")
    assert ": ping" in frames[1:-1]  # at least one ping between the two events
    first = json.loads(frames[0].split("data: ", 1)[1])
    # one data line (the newline escaped), the lone surrogate cleaned
    assert first["text"] == "one\nline\ufffd"


async def test_frames_response_sends_each_frame_and_runs_to_the_end_with_the_client_gone() -> None:
    """`FramesResponse` (AG-UI, AI SDK): one send a frame, then the end; a client that left (every
    `receive` says so, uvicorn drops the sends) does not stop the frames, which follow a run that goes on."""
    sent: list[dict[str, Any]] = []
    produced: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def frames() -> Any:
        for n in range(3):
            await asyncio.sleep(0.01)
            produced.append(n)
            yield f"data: {n}\n\n"

    response = FramesResponse(frames(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})
    await response({"type": "http"}, receive, send)

    assert produced == [0, 1, 2]
    start, *bodies = sent
    headers = dict(start["headers"])
    assert start["status"] == 200 and headers[b"content-type"].startswith(b"text/event-stream")
    assert headers[b"cache-control"] == b"no-store"
    assert [b["body"] for b in bodies] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n", b""]
    assert [b["more_body"] for b in bodies] == [True, True, True, False]


async def test_frames_response_closes_its_frames_when_send_fails() -> None:
    """Under a server whose `send` raises once the client is gone, the frames are closed there and then
    (their `finally` runs), and the error reaches the server."""
    closed: list[bool] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("the client went away")

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def frames() -> Any:
        try:
            for n in range(3):
                yield f"data: {n}\n\n"
        finally:
            closed.append(True)

    response = FramesResponse(frames(), media_type="text/event-stream", headers={})
    with pytest.raises(OSError, match="went away"):
        await response({"type": "http"}, receive, send)
    assert closed == [True]


async def test_pinged_adds_a_ping_while_the_frames_are_quiet_and_closes_them() -> None:
    """`pinged` (the jobs stream): a `: ping` comment each `every` seconds the next frame takes; the frames
    in order, unchanged; closing it early closes the frames (their `finally` runs)."""
    from toolrun.server.sse import pinged

    go_on = asyncio.Event()
    closed: list[bool] = []

    async def frames() -> Any:
        try:
            yield "data: 1\r\n\r\n"
            await go_on.wait()  # quiet until the reader has seen a ping
            yield "data: 2\r\n\r\n"
            await asyncio.Event().wait()  # quiet for ever
        finally:
            closed.append(True)

    got: list[str] = []
    stream = pinged(frames(), 0.01)
    async for frame in stream:
        got.append(frame)
        if frame.startswith(":"):
            go_on.set()
        if frame == "data: 2\r\n\r\n":
            break
    await stream.aclose()
    assert got[0] == "data: 1\r\n\r\n" and got[-1] == "data: 2\r\n\r\n"
    assert set(got[1:-1]) == {": ping\r\n\r\n"}
    assert closed == [True]
