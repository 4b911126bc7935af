"""A hostile model against the whole service (ASGI), on SQLite and PostgreSQL.

Hypothesis writes the model's script: arbitrary text (lone surrogates, NUL, RTL, emoji, whitespace),
call ids (empty, duplicate, huge, odd), tool names (registered, unknown, unsafe), arguments (valid,
nested, huge, not JSON, with surrogates), call counts. Each example is a conversation of a few turns
through the four doors (JSON chat, toolrun SSE, AG-UI, AI SDK), with the pending confirmations decided
in between. After every turn:

- the route answered with a documented status (200; 422 only for a user message the doors refuse);
- every stream ended with its terminal event (`run_finished`/`error`, `RUN_FINISHED`/`RUN_ERROR`,
  `[DONE]`);
- `GET /conversations/{id}` is 200 and its stored history satisfies `history_problems`;
- every request the model received is valid for OpenAI Chat Completions, OpenAI Responses, Anthropic
  Messages and Gemini, rendered with the project's own model clients and formats.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrun import ToolCall, ToolResult
from toolrun.formats import get_format
from toolrun.formats.gemini import gemini_name
from toolrun.models import (
    AnthropicModel,
    AssistantMessage,
    FunctionModel,
    Message,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from toolrun.models._messages import message_from_dict
from toolrun.server import Settings, create_app
from toolrun.server._text import message_problem
from toolrun.server.migrate import upgrade

from .conftest import sqlite_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

EXAMPLES = int(os.environ.get("TOOLRUN_HOSTILE_EXAMPLES", "25"))

# ------------------------------------------------------------------------------------------------------
# The model's script


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


_odd_text = st.sampled_from(
    [
        "",
        " ",
        "\n\t ",
        "\x00",
        "a\x00b",
        "\ud83d",
        "x\udc00y",
        "\ud83d\ude00",
        "😀 emoji",
        "\u202eRTL override\u202c",
        "עברית ومرحبا",
        "\ufeffBOM",
        "\u0007bell",
        "e\u0301",
        "\uffff",
    ]
)
_text = st.one_of(
    st.text(max_size=40),
    _odd_text,
    st.lists(_odd_text | st.text(max_size=5), max_size=4).map("".join),
)
_ids = st.one_of(
    st.sampled_from(["", "dup", "dup", "call_1", "x" * 300, "a b", "id\x00", "\ud83d", "functions.x:0"]),
    st.text(max_size=8),
)
_names = st.sampled_from(
    [
        "create_task",
        "create_task",
        "query_tasks",
        "update_task",
        "delete_task",
        "delete_task",
        "no_such_tool",
        "",
        "💥 boom",
        "create task",
        "a" * 200,
        "tool\ud83d",
        "x\x00y",
    ]
)
_args = st.one_of(
    st.builds(lambda title: {"title": title}, _text),
    st.builds(lambda title: json.dumps({"title": title}), st.text(max_size=20)),
    st.sampled_from(
        [
            {"task_id": "t_missing"},
            {},
            None,
            "",
            "not json",
            "[1, 2]",
            '{"title": "esc \\ud83d \\u0000"}',
            '{"title": "raw \ud83d"}',
            "{" * 400,
            "[" * 1200 + "]" * 1200,
            {"title": "deep", "description": _nested(300)},
            {"title": "big", "description": "x" * 300_000},
            json.dumps({"title": "huge", "description": "y" * 1_000_000}),
        ]
    ),
    st.dictionaries(_text, _text, max_size=3),
)
_calls = st.lists(st.builds(ToolCall, id=_ids, name=_names, arguments=_args), min_size=1, max_size=4)
_response = st.one_of(
    st.builds(lambda text: text, _text),  # a final answer
    st.builds(lambda calls, text: ModelResponse(text=text, tool_calls=calls), _calls, _text),
)
_turn = st.fixed_dictionaries(
    {
        "door": st.sampled_from(["json", "sse", "ag-ui", "ai-sdk"]),
        "message": st.one_of(st.sampled_from(["add Buy milk", "list my tasks"]), _text),
        "script": st.lists(_response, min_size=1, max_size=3),
        "decisions": st.lists(st.booleans(), max_size=4),
    }
)


class HostileModel:
    """A `FunctionModel` that plays the current turn's script, then answers "ok"."""

    def __init__(self) -> None:
        self.script: list[Any] = []
        self.model = FunctionModel(self._answer, name="hostile")

    def _answer(self, messages: list[Message], tools: list[Any]) -> Any:
        return self.script.pop(0) if self.script else "ok"


# ------------------------------------------------------------------------------------------------------
# What every provider takes

_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]+")
_OPENAI = OpenAIModel("gpt-test", api_key="unused")
_ANTHROPIC = AnthropicModel("claude-test", api_key="unused")


def _encodable(body: Any) -> None:
    json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _check_openai_chat(body: dict[str, Any]) -> None:
    messages = body["messages"]
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m["role"] != "tool", f"a tool message answers nothing: {m}"
        i += 1
        calls = m.get("tool_calls") or []
        if not calls:
            assert isinstance(m["content"], str)
            continue
        ids = [c["id"] for c in calls]
        for c in calls:
            assert _PROVIDER_NAME.fullmatch(c["function"]["name"]), c
            assert isinstance(c["function"]["arguments"], str)
            assert c["id"] not in seen, f"duplicate id {c['id']}"
            seen.add(c["id"])
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        assert sorted(answered) == sorted(ids), (answered, ids)


def _check_anthropic(body: dict[str, Any]) -> None:
    turns = body["messages"]
    assert turns and turns[0]["role"] == "user"
    seen: set[str] = set()
    for n, turn in enumerate(turns):
        assert turn["role"] == ("user" if n % 2 == 0 else "assistant")
        for block in turn["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), "an empty or whitespace-only text block"
        uses = [b for b in turn["content"] if b["type"] == "tool_use"]
        for b in uses:
            assert _ANTHROPIC_ID.fullmatch(b["id"]) and b["id"] not in seen, b["id"]
            assert _PROVIDER_NAME.fullmatch(b["name"]) and isinstance(b["input"], dict)
            seen.add(b["id"])
        results = [b for b in turn["content"] if b["type"] == "tool_result"]
        if turn["role"] == "user":
            previous = [b["id"] for b in turns[n - 1]["content"] if b["type"] == "tool_use"] if n else []
            assert [b["tool_use_id"] for b in results] == previous or sorted(
                b["tool_use_id"] for b in results
            ) == sorted(previous), (results, previous)
            assert turn["content"][: len(results)] == results  # results open the turn
        elif n + 1 < len(turns):
            nxt = [b["tool_use_id"] for b in turns[n + 1]["content"] if b["type"] == "tool_result"]
            assert sorted(nxt) == sorted(b["id"] for b in uses)


def _responses_and_gemini(request: ModelRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The conversation as Responses input items and Gemini contents, results rendered by the formats."""
    responses_fmt, gemini_fmt = get_format("openai-responses"), get_format("gemini")
    items: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in request.messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, UserMessage):
            items.append({"role": "user", "content": m.content})
            contents.append({"role": "user", "parts": [{"text": m.content}]})
        elif isinstance(m, AssistantMessage):
            if m.content:
                items.append({"role": "assistant", "content": m.content})
            parts: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
            for c in m.tool_calls:
                wire = request.wire_name(c.name)
                names[c.id] = wire
                text = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments or {})
                items.append({"type": "function_call", "call_id": c.id, "name": wire, "arguments": text})
                args = c.arguments
                if isinstance(args, str):
                    try:
                        args = json.loads(args or "{}")
                    except ValueError:
                        args = {"_invalid_arguments": args}
                call = {"name": gemini_name(wire), "args": args if isinstance(args, dict) else {}}
                parts.append({"functionCall": call})
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif isinstance(m, ToolResultMessage):
            result = ToolResult(status="ok", value=m.content, call_id=m.call_id, tool_name=m.tool_name)
            items.append(responses_fmt.tool_result_message(result, name=names.get(m.call_id)))
            part = gemini_fmt.tool_result_message(result, name=names.get(m.call_id))
            if contents and contents[-1]["role"] == "user" and "functionResponse" in contents[-1]["parts"][0]:
                contents[-1]["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
    return items, contents


def _check_responses(items: list[dict[str, Any]]) -> None:
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert all(calls) and len(set(calls)) == len(calls)
    assert sorted(outputs) == sorted(calls)


def _check_gemini(contents: list[dict[str, Any]]) -> None:
    for n, content in enumerate(contents):
        called = [p["functionCall"]["name"] for p in content["parts"] if "functionCall" in p]
        if called:
            answered = [
                p["functionResponse"]["name"] for p in contents[n + 1]["parts"] if "functionResponse" in p
            ]
            assert answered == called, (answered, called)


def assert_fit_for_every_provider(request: ModelRequest) -> None:
    assert history_problems(request.messages) == []
    chat = _OPENAI.build_body(request)
    anthropic = _ANTHROPIC.build_body(request)
    items, contents = _responses_and_gemini(request)
    for body in (chat, anthropic, items, contents):
        _encodable(body)
    _check_openai_chat(chat)
    _check_anthropic(anthropic)
    _check_responses(items)
    _check_gemini(contents)


# ------------------------------------------------------------------------------------------------------
# Driving the doors


def _lines(text: str) -> list[str]:
    """SSE lines end with CR, LF or CRLF only (`str.splitlines` would also split at U+2028, U+0085...)."""
    return re.split(r"\r\n|\r|\n", text)


def _sse_events(text: str) -> list[str]:
    return [line[len("event:") :].strip() for line in _lines(text) if line.startswith("event:")]


def _data(text: str) -> list[Any]:
    out = []
    for line in _lines(text):
        if line.startswith("data:"):
            body = line[len("data:") :].strip()
            out.append(body if body == "[DONE]" else json.loads(body))
    return out


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps escapes a lone surrogate ("\\ud83d"), as a browser's JSON.stringify does; httpx's own
    # encoder would refuse to send it
    content = json.dumps(body).encode()
    return await http.post(path, content=content, headers={"Content-Type": "application/json"})


async def _send(http: httpx.AsyncClient, door: str, message: str, conv: str | None, n: int) -> None:
    """Send one user message through `door` and check the documented answer and the stream's end."""
    # what the server reads: a surrogate pair sent as two escapes arrives as one character
    refused = message_problem(json.loads(json.dumps(message))) is not None
    if door in ("json", "sse"):
        body: dict[str, Any] = {"message": message}
        if conv is not None:
            body["conversation_id"] = conv
        r = await _post(http, "/api/v1/chat" if door == "json" else "/api/v1/chat/stream", body)
        assert r.status_code == (422 if refused else 200), r.text
        if door == "sse" and not refused:
            events = _sse_events(r.text)
            assert events and events[0] == "run_started" and events[-1] in ("run_finished", "error"), events
    elif door == "ag-ui":
        body = {
            "threadId": conv or f"thread-{n}",
            "runId": f"r{n}",
            "messages": [{"id": f"m{n}", "role": "user", "content": message}],
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        r = await _post(http, "/api/v1/ag-ui", body)
        assert r.status_code == 200, r.text
        frames = _data(r.text)
        assert frames and frames[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"), frames[-1:]
        assert frames[-1]["type"] == "RUN_ERROR" or not refused
    else:
        part = {"type": "text", "text": message}
        body = {"id": conv or f"chat-{n}", "messages": [{"id": f"m{n}", "role": "user", "parts": [part]}]}
        r = await _post(http, "/api/v1/ai-sdk", body)
        assert r.status_code == 200, r.text
        frames = _data(r.text)
        assert frames and frames[-1] == "[DONE]", frames[-2:]
        assert not refused or any(isinstance(f, dict) and f.get("type") == "error" for f in frames)


async def _conversation_ids(http: httpx.AsyncClient) -> list[str]:
    """The user's conversations, most recently active first."""
    r = await http.get("/api/v1/conversations", params={"limit": 200})
    assert r.status_code == 200, r.text
    return [c["id"] for c in r.json()["conversations"]]


async def _check_stored(http: httpx.AsyncClient, conversation_id: str) -> None:
    r = await http.get(f"/api/v1/conversations/{conversation_id}")
    assert r.status_code == 200, r.text
    detail = r.json()
    stored = [message_from_dict(_as_message(v)) for v in detail["messages"]]
    assert history_problems(stored, open_tail=detail["awaiting_confirmation"]) == []


def _as_message(view: dict[str, Any]) -> dict[str, Any]:
    if view["role"] == "assistant":
        calls = [
            {
                "id": c["id"],
                "name": c["name"],
                # the API decodes JSON text: what was stored as text of a non-object stays text
                "arguments": c["arguments"]
                if isinstance(c["arguments"], dict | str)
                else json.dumps(c["arguments"]),
            }
            for c in view["tool_calls"] or ()
        ]
        return {"role": "assistant", "content": view["content"], "tool_calls": calls}
    if view["role"] == "tool":
        return {
            "role": "tool",
            "call_id": view["call_id"],
            "tool_name": view["tool_name"],
            "content": view["content"],
        }
    return {"role": view["role"], "content": view["content"]}


async def _decide_all(http: httpx.AsyncClient, decisions: list[bool]) -> None:
    for _ in range(12):
        r = await http.get("/api/v1/confirmations")
        assert r.status_code == 200
        pending = r.json()["pending"]
        if not pending:
            return
        approve = decisions.pop(0) if decisions else False
        d = await http.post(
            f"/api/v1/confirmations/{pending[0]['confirmation_id']}", json={"approve": approve}
        )
        assert d.status_code == 200, d.text
    raise AssertionError("confirmations kept coming")


async def play(http: httpx.AsyncClient, hostile: HostileModel, turns: list[dict[str, Any]]) -> None:
    before = set(await _conversation_ids(http))
    conv: str | None = None
    for n, turn in enumerate(turns):
        hostile.script = list(turn["script"])
        hostile.model.requests.clear()
        await _send(http, turn["door"], turn["message"], conv, n)
        await _decide_all(http, list(turn["decisions"]))
        for request in hostile.model.requests:
            assert_fit_for_every_provider(request)
        touched = [c for c in await _conversation_ids(http) if c not in before]
        for cid in touched:
            await _check_stored(http, cid)
        if conv is None and touched:
            conv = touched[0]


# ------------------------------------------------------------------------------------------------------
# The two backends


class Served:
    """The service on one event loop that outlives the hypothesis examples."""

    def __init__(self, settings: Settings) -> None:
        self.runner = asyncio.Runner()
        self.hostile = HostileModel()
        self.settings = settings
        self.http: httpx.AsyncClient | None = None
        self._lifespan: Any = None

    async def start(self) -> None:
        await upgrade(self.settings.database_url)
        app = create_app(self.settings, model=self.hostile.model)
        _, token = await app.state.toolrun.users.add("alice")
        self._lifespan = app.router.lifespan_context(app)
        await self._lifespan.__aenter__()
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
            base_url="http://test",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )

    async def stop(self) -> None:
        assert self.http is not None
        await self.http.aclose()
        await self._lifespan.__aexit__(None, None, None)

    def play(self, turns: list[dict[str, Any]]) -> None:
        assert self.http is not None
        self.runner.run(play(self.http, self.hostile, turns))


def _served(settings: Settings) -> Iterator[Served]:
    served = Served(settings)
    served.runner.run(served.start())
    try:
        yield served
    finally:
        served.runner.run(served.stop())
        served.runner.close()


@pytest.fixture(scope="module")
def on_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("hostile")
    yield from _served(sqlite_settings(tmp))


@pytest.fixture(scope="module")
def on_postgres(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("hostile_pg")
    yield from _served(sqlite_settings(tmp, database_url=postgres_url, secret_key="k" * 40))


_settings = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
    database=None,
)


@_settings
@given(turns=st.lists(_turn, min_size=1, max_size=3))
def test_a_hostile_model_leaves_every_conversation_usable_on_sqlite(
    on_sqlite: Served, turns: list[dict[str, Any]]
) -> None:
    on_sqlite.play(turns)


@_settings
@given(turns=st.lists(_turn, min_size=1, max_size=3))
def test_a_hostile_model_leaves_every_conversation_usable_on_postgres(
    on_postgres: Served, turns: list[dict[str, Any]]
) -> None:
    on_postgres.play(turns)
