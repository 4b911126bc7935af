"""A scripted OpenAI-compatible model server for bench/service.py: `POST /v1/chat/completions`, JSON or SSE.

It stands in for a fast model (a local vLLM) so that what is measured is the service around it. The script:
a conversation whose last message is the user's gets one `create_task` call with the user's text as title;
one whose last message is a tool result gets a short answer. It answers as the OpenAI API does (the same
fields, `usage`, a `[DONE]` frame for streams), so every SDK reads it without complaint.

Plain asyncio streams (no framework), HTTP/1.1 keep-alive, pinned to the last CPU when it can be, so the
model costs the service under test as little as possible. Run as:

    python bench/_scripted_llm.py PORT
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time

_ids = itertools.count()


def _completion(body: dict[str, object]) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The whole answer, and the same as stream chunks."""
    messages = body.get("messages") or []
    last = messages[-1] if isinstance(messages, list) and messages else {}
    n = next(_ids)
    base = {"id": f"chatcmpl-{n}", "created": int(time.time()), "model": str(body.get("model") or "scripted")}
    usage = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}
    if isinstance(last, dict) and last.get("role") == "tool":
        text = "Done: " + str(last.get("content") or "")[:60]
        message: dict[str, object] = {"role": "assistant", "content": text, "refusal": None}
        finish = "stop"
        deltas: list[dict[str, object]] = [{"role": "assistant", "content": text}]
    else:
        title = str(last.get("content") if isinstance(last, dict) else "")[:80] or "task"
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "create_task", "arguments": json.dumps({"title": title})},
        }
        message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
        finish = "tool_calls"
        deltas = [{"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}]
    whole = {
        **base,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }
    chunk = {**base, "object": "chat.completion.chunk"}
    chunks = [{**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**chunk, "choices": [], "usage": usage})
    return whole, chunks


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            raw = await reader.readexactly(length) if length else b"{}"
            body = json.loads(raw)
            whole, chunks = _completion(body)
            if body.get("stream"):
                payload = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
                payload += b"data: [DONE]\n\n"
                kind = b"text/event-stream"
            else:
                payload = json.dumps(whole).encode()
                kind = b"application/json"
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: "
                + kind
                + b"\r\ncontent-length: "
                + str(len(payload)).encode()
                + b"\r\n\r\n"
                + payload
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_handle, "127.0.0.1", port, backlog=2048)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {(os.cpu_count() or 1) - 1})
    asyncio.run(main(int(sys.argv[1])))
