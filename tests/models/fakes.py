"""Local fake LLM servers speaking the providers' wire formats, on a real socket on 127.0.0.1.

The shapes follow the providers' API references: OpenAI Chat Completions (`POST /v1/chat/completions`,
JSON or SSE `data: {chunk}` frames ending in `data: [DONE]`) and Anthropic Messages (`POST /v1/messages`,
JSON or SSE frames with `event:` lines: message_start, content_block_start, content_block_delta,
content_block_stop, message_delta, message_stop, plus ping).

A test queues replies per path (`server.reply(path, Reply(...))`) and reads back what the client sent
(`server.requests`).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


class CutConnection(Exception):
    """Raised inside a streaming body to make the server drop the connection mid-response."""


@dataclass
class Reply:
    """One scripted HTTP reply."""

    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    frames: Sequence[str] | None = None
    """SSE frames, each already formatted (ending in a blank line)."""
    cut: bool = False
    """Drop the connection after the frames (no terminating chunk)."""
    gate: threading.Event | None = None
    """Streams: wait for it before sending frame 2 on (to observe a stream in flight). Others: wait for it
    before answering at all."""


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    json: Any
    peer: tuple[str, int] | None = None
    """The client's address and port: one port for two requests = one kept-alive connection."""


class FakeServer:
    """A starlette app served by uvicorn in a background thread on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        app = Starlette(
            routes=[
                Route(OPENAI_PATH, self._handle, methods=["POST"]),
                Route(ANTHROPIC_PATH, self._handle, methods=["POST"]),
            ]
        )
        # Bound and listening before uvicorn starts: connections queue in the backlog, so no test ever
        # has to wait for the server to come up.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="critical", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._replies.clear()

    def reply(self, path: str, *replies: Reply) -> None:
        with self._lock:
            self._replies.setdefault(path, deque()).extend(replies)

    def bodies(self, path: str | None = None) -> list[Any]:
        return [r.json for r in self.requests if path is None or r.path == path]

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = raw.decode(errors="replace")
        with self._lock:
            peer = (request.client.host, request.client.port) if request.client else None
            self.requests.append(Recorded(request.url.path, dict(request.headers), payload, peer))
            queue = self._replies.get(request.url.path)
            reply = queue.popleft() if queue else None
        if reply is None:
            return JSONResponse({"error": {"message": "no reply scripted"}}, status_code=599)
        if reply.frames is None and reply.gate is not None:
            await asyncio.to_thread(reply.gate.wait, 10)  # hold the answer (timeouts); the test releases it
        if reply.frames is not None:
            return StreamingResponse(
                _frames(reply),
                status_code=reply.status,
                headers=reply.headers,
                media_type="text/event-stream",
            )
        if reply.body is not None:
            headers = {"content-type": "application/json", **reply.headers}
            return Response(reply.body, status_code=reply.status, headers=headers)
        return JSONResponse(reply.json, status_code=reply.status, headers=reply.headers)


async def _frames(reply: Reply) -> AsyncIterator[bytes]:
    assert reply.frames is not None
    for i, frame in enumerate(reply.frames):
        # The test sets the gate once it has seen frame 1's delta: proof the stream is not buffered.
        if i == 2 and reply.gate is not None and not await asyncio.to_thread(reply.gate.wait, 10):
            raise CutConnection("the client never signalled that it saw the first frames")
        yield frame.encode()
    if reply.cut:
        raise CutConnection("dropping the connection mid-stream")


# --------------------------------------------------------------------------------------------------------
# OpenAI Chat Completions shapes


def openai_error(
    message: str, *, type: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


def openai_completion(
    text: str | None = None,
    tool_calls: Iterable[tuple[str, str, str]] = (),
    *,
    finish_reason: str | None = None,
    usage: tuple[int, int] = (12, 5),
    model: str = "gpt-4o-mini-2024-07-18",
) -> dict[str, Any]:
    """A chat.completion object; tool calls are (id, name, arguments JSON text)."""
    calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in tool_calls]
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def openai_chunk(
    delta: dict[str, Any] | None = None, *, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}],
    }
    chunk.update(extra)
    return chunk


def openai_usage_chunk(prompt: int = 12, completion: int = 5) -> dict[str, Any]:
    chunk = openai_chunk()
    chunk["choices"] = []
    chunk["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return chunk


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n"


def openai_stream(chunks: Iterable[dict[str, Any]], *, done: bool = True) -> list[str]:
    frames = [sse(c) for c in chunks]
    if done:
        frames.append(sse("[DONE]"))
    return frames


# --------------------------------------------------------------------------------------------------------
# Anthropic Messages shapes


def anthropic_error(message: str, type: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type, "message": message}}


def anthropic_message(
    blocks: Sequence[dict[str, Any]],
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] = (25, 10),
) -> dict[str, Any]:
    has_tools = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(blocks),
        "stop_reason": stop_reason or ("tool_use" if has_tools else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def anthropic_frame(data: dict[str, Any]) -> str:
    return sse(data, event=data["type"])


def anthropic_start(message_id: str, *, input_tokens: int = 25) -> dict[str, Any]:
    """A stream's `message_start` event: an empty assistant message."""
    return {
        "type": "message_start",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "claude-sonnet-4-5-20250929",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


def anthropic_stream(
    blocks: Sequence[tuple[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: tuple[int, int] = (25, 10),
    complete: bool = True,
) -> list[str]:
    """Frames for a message whose blocks are ("text", [pieces]) or ("tool_use", (id, name, [json pieces]))."""
    events: list[dict[str, Any]] = [anthropic_start("msg_01Stream", input_tokens=usage[0]), {"type": "ping"}]
    for index, (kind, spec) in enumerate(blocks):
        if kind == "text":
            events.append({"type": "content_block_start", "index": index, "content_block": text_block("")})
            events += [
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
                for p in spec
            ]
        else:
            call_id, name, pieces = spec
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": tool_use_block(call_id, name, {}),
                }
            )
            events += [
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                }
                for p in pieces
            ]
        events.append({"type": "content_block_stop", "index": index})
    if complete:
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            }
        )
        events.append({"type": "message_stop"})
    return [anthropic_frame(e) for e in events]
