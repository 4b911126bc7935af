"""toolrun's model client on aiohttp (`models._aiohttp`), against real HTTP/1.1 servers on 127.0.0.1.

`RawServer` is written on asyncio streams so that a test decides, request by request, what goes on the wire:
which connection a request arrived on, a body with Content-Length or chunked, a stream written a few bytes
at a time, a connection closed without an answer, an answer that never comes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun.models import (
    ModelRequest,
    OpenAIModel,
    ProviderBadRequestError,
    ProviderRateLimitError,
    ProviderResponseError,
    ProviderStreamError,
    ProviderUnavailableError,
    UserMessage,
)
from toolrun.models._aiohttp import AioHTTPClient, AioSSEStream
from toolrun.models._http import HTTPClient

from .fakes import OPENAI_PATH, openai_chunk, openai_stream, openai_usage_chunk

Action = Callable[[asyncio.StreamWriter], Awaitable[bool]]
"""Answers one request on its connection; False closes the connection afterwards."""


class RawServer:
    """An HTTP/1.1 server answering each request with the next scripted `Action`."""

    def __init__(self) -> None:
        self.script: deque[Action] = deque()
        self.seen: list[tuple[int, str, Any]] = []
        """(connection number, path, decoded JSON body) of every request read."""
        self.connections = 0
        self.closed = 0
        self.arrived = asyncio.Condition()

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def wait_for(self, count: int) -> None:
        """Until `count` requests have been read."""
        async with self.arrived:
            await self.arrived.wait_for(lambda: len(self.seen) >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                async with self.arrived:
                    self.seen.append((number, path, json.loads(body) if body else None))
                    self.arrived.notify_all()
                if not await self.script.popleft()(writer):
                    return
        finally:
            writer.close()
            self.closed += 1


def answer(
    status: int, payload: Any, *, chunked: bool = False, headers: dict[str, str] | None = None
) -> Action:
    async def act(writer: asyncio.StreamWriter) -> bool:
        body = json.dumps(payload).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        framing = "transfer-encoding: chunked" if chunked else f"content-length: {len(body)}"
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{framing}\r\n{extra}\r\n".encode()
        )
        if chunked:
            half = len(body) // 2
            for piece in (body[:half], body[half:]):
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            writer.write(b"0\r\n\r\n")
        else:
            writer.write(body)
        await writer.drain()
        return True

    return act


def events(frames: list[str], *, step: int = 0, cut: bool = False) -> Action:
    """A chunked `text/event-stream` answer; `step` > 0 writes it `step` bytes per chunk, each flushed
    alone; `cut` drops the connection after the frames (no terminating chunk)."""

    async def act(writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        data = "".join(frames).encode()
        pieces = [data[i : i + step] for i in range(0, len(data), step)] if step else [data]
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            if step:
                await asyncio.sleep(0)
        if cut:
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    return act


async def hang_up(writer: asyncio.StreamWriter) -> bool:
    """Close the connection without a byte of answer."""
    return False


def after(event: asyncio.Event, action: Action) -> Action:
    async def act(writer: asyncio.StreamWriter) -> bool:
        await event.wait()
        return await action(writer)

    return act


def then_close(action: Action) -> Action:
    """Answer (kept alive, no `connection: close`), then close the connection: a server's idle timeout."""

    async def act(writer: asyncio.StreamWriter) -> bool:
        await action(writer)
        return False

    return act


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    async with RawServer() as server:
        yield server


@pytest.fixture
async def client(raw: RawServer) -> AsyncIterator[AioHTTPClient]:
    http = AioHTTPClient(raw.url, headers={"authorization": "Bearer sk-test"}, provider="openai")
    yield http
    await http.aclose()


def chunks_of(text: str) -> list[str]:
    return openai_stream(
        [openai_chunk({"role": "assistant", "content": text}), openai_chunk({}, finish_reason="stop")]
    )


async def read_all(stream: AioSSEStream) -> list[dict[str, Any]]:
    try:
        return [item async for item in stream]
    finally:
        await stream.close()


# -- connections: kept alive, reused, grown, closed by the server -----------------------------------------


async def test_requests_one_after_another_share_one_connection(raw: RawServer, client: AioHTTPClient) -> None:
    raw.script.extend([answer(200, {"n": 1}), events(chunks_of("two")), answer(200, {"n": 3}, chunked=True)])
    assert await client.post(OPENAI_PATH.removeprefix("/v1"), b'{"a":1}') == {"n": 1}
    items = await read_all(await client.stream("/chat/completions", b'{"a":2}'))
    assert items[0]["choices"][0]["delta"]["content"] == "two"
    assert await client.post("/chat/completions", b'{"a":3}') == {"n": 3}
    assert [(c, p, b) for c, p, b in raw.seen] == [
        (1, "/v1/chat/completions", {"a": 1}),
        (1, "/v1/chat/completions", {"a": 2}),
        (1, "/v1/chat/completions", {"a": 3}),
    ]
    assert raw.connections == 1


async def test_concurrent_requests_grow_the_pool_then_reuse_it(raw: RawServer, client: AioHTTPClient) -> None:
    gate = asyncio.Event()
    raw.script.extend(after(gate, events(chunks_of(f"r{i}"))) for i in range(10))

    async def one() -> str:
        items = await read_all(await client.stream("/chat/completions", b"{}"))
        return str(items[0]["choices"][0]["delta"]["content"])

    first = [asyncio.create_task(one()) for _ in range(10)]
    await raw.wait_for(10)  # all ten in flight at once: ten connections
    gate.set()
    assert sorted(await asyncio.gather(*first)) == sorted(f"r{i}" for i in range(10))
    assert raw.connections == 10
    raw.script.extend(answer(200, {"i": i}) for i in range(10))
    await asyncio.gather(*(client.post("/chat/completions", b"{}") for _ in range(10)))
    assert raw.connections == 10  # every connection went back to the pool and was used again
    assert raw.closed == 0


async def test_a_connection_the_server_closed_while_idle_is_not_used_again(
    raw: RawServer, client: AioHTTPClient
) -> None:
    raw.script.extend([then_close(answer(200, {"n": 1})), answer(200, {"n": 2})])
    assert await client.post("/chat/completions", b"{}") == {"n": 1}
    while raw.closed < 1:  # the server has closed its end
        await asyncio.sleep(0.01)
    assert await client.post("/chat/completions", b"{}") == {"n": 2}
    assert [c for c, _, _ in raw.seen] == [1, 2]


async def test_a_reused_connection_closed_before_any_answer_is_retried_once_on_a_fresh_one(
    raw: RawServer, client: AioHTTPClient
) -> None:
    """The server read the request on the kept-alive connection and hung up without a byte of answer (its
    idle timeout racing the request): sent again, on a new connection."""
    raw.script.extend([answer(200, {"n": 1}), hang_up, answer(200, {"n": 2})])
    assert await client.post("/chat/completions", b'{"a":1}') == {"n": 1}
    assert await client.post("/chat/completions", b'{"a":2}') == {"n": 2}
    assert [(c, b) for c, _, b in raw.seen] == [(1, {"a": 1}), (1, {"a": 2}), (2, {"a": 2})]


async def test_a_retried_request_that_fails_again_is_unavailable(
    raw: RawServer, client: AioHTTPClient
) -> None:
    raw.script.extend([answer(200, {"n": 1}), hang_up, hang_up])
    await client.post("/chat/completions", b"{}")
    with pytest.raises(
        ProviderUnavailableError, match="could not reach the provider: ServerDisconnectedError"
    ):
        await client.post("/chat/completions", b"{}")
    assert [c for c, _, _ in raw.seen] == [1, 1, 2]  # one retry, not more


async def test_a_fresh_connection_closed_before_any_answer_is_not_retried(
    raw: RawServer, client: AioHTTPClient
) -> None:
    raw.script.extend([hang_up, answer(200, {"never": True})])
    with pytest.raises(ProviderUnavailableError) as info:
        await client.stream("/chat/completions", b"{}")
    assert isinstance(info.value.__cause__, aiohttp.ServerDisconnectedError)
    assert len(raw.seen) == 1


async def test_nothing_listening_is_unavailable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = AioHTTPClient(f"http://127.0.0.1:{port}/v1", headers={}, provider="openai")
    try:
        with pytest.raises(
            ProviderUnavailableError, match="could not reach the provider: ClientConnectorError"
        ):
            await http.post("/chat/completions", b"{}")
    finally:
        await http.aclose()


# -- bodies and streams --------------------------------------------------------------------------------


@pytest.mark.parametrize("chunked", [False, True])
async def test_json_answers_with_content_length_or_chunked(
    raw: RawServer, client: AioHTTPClient, chunked: bool
) -> None:
    payload = {"choices": [{"message": {"content": "é" * 3000}}]}
    raw.script.append(answer(200, payload, chunked=chunked))
    assert await client.post("/chat/completions", b"{}") == payload


async def test_a_stream_written_a_few_bytes_at_a_time_reads_the_same(
    raw: RawServer, client: AioHTTPClient
) -> None:
    frames = chunks_of("split ✓ across reads")
    frames.insert(1, ": ping\r\n\r\n")  # a comment, CRLF line ends split between reads
    frames.insert(1, "event: message\r\ndata: " + json.dumps(openai_chunk({"content": "+"})) + "\r\n\r\n")
    raw.script.extend([events(frames, step=3), answer(200, {"after": True})])
    items = await read_all(await client.stream("/chat/completions", b"{}"))
    assert [i["choices"][0]["delta"].get("content") for i in items] == ["split ✓ across reads", "+", None]
    assert await client.post("/chat/completions", b"{}") == {"after": True}
    assert raw.connections == 1  # the stream was read to its end and its connection reused


async def test_a_stream_closed_early_is_read_to_its_end_and_its_connection_reused(
    raw: RawServer, client: AioHTTPClient
) -> None:
    """The agent stops reading at the finish reason; the rest (usage, `[DONE]`, the last chunk) comes a
    moment later. `close` reads it, so the connection goes back to the pool instead of being closed."""
    head, tail = chunks_of("Hi"), openai_stream([openai_usage_chunk(9, 3)])
    stopped = asyncio.Event()  # the consumer has stopped reading

    async def late_tail(writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        for frames in (head[:-1], tail):  # `[DONE]` only in the second part
            data = "".join(frames).encode()
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
            await asyncio.wait_for(stopped.wait(), 10)  # the rest comes after the consumer stopped
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    raw.script.extend([late_tail, answer(200, {"next": True})])
    stream = await client.stream("/chat/completions", b"{}")
    async for item in stream:
        assert item["choices"][0]["delta"]["content"] == "Hi"
        break
    stopped.set()
    await stream.close()
    assert await client.post("/chat/completions", b"{}") == {"next": True}
    assert [c for c, _, _ in raw.seen] == [1, 1]


async def test_a_stream_cut_mid_body_is_unavailable_after_what_arrived(
    raw: RawServer, client: AioHTTPClient
) -> None:
    frames = chunks_of("partial")[:1]
    raw.script.append(events(frames, cut=True))
    stream = await client.stream("/chat/completions", b"{}")
    got: list[dict[str, Any]] = []

    async def consume() -> None:
        async for item in stream:
            got.append(item)

    with pytest.raises(ProviderUnavailableError, match="the connection broke") as info:
        await consume()
    await stream.close()
    assert got[0]["choices"][0]["delta"]["content"] == "partial"
    assert isinstance(info.value.__cause__, aiohttp.ClientError)


async def test_a_cut_stream_through_the_model_is_a_stream_error_with_the_partial_answer(
    raw: RawServer,
) -> None:
    raw.script.append(events(chunks_of("half")[:1], cut=True))
    async with OpenAIModel("m", base_url=raw.url, api_key="k", transport="aiohttp") as model:
        with pytest.raises(ProviderStreamError) as info:
            async for _ in model.stream(ModelRequest([UserMessage(content="x")])):
                pass
    assert info.value.partial is not None and info.value.partial.text == "half"


async def test_a_stream_event_that_is_not_json_is_a_response_error(
    raw: RawServer, client: AioHTTPClient
) -> None:
    raw.script.append(events(["data: {not json\n\n"]))
    with pytest.raises(ProviderResponseError, match="not valid JSON"):
        await read_all(await client.stream("/chat/completions", b"{}"))


# -- errors and timeouts -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_non_2xx_answers_map_to_provider_errors(
    raw: RawServer, client: AioHTTPClient, stream: bool
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
    bad = {"error": {"message": "messages: required", "type": "invalid_request_error"}}
    raw.script.extend(
        [
            answer(429, limited, headers={"retry-after": "3"}),
            answer(400, bad, chunked=True),
            answer(503, {"detail": "down"}),
            answer(200, {"ok": True}),
        ]
    )
    send = client.stream if stream else client.post
    with pytest.raises(ProviderRateLimitError, match="Rate limit reached") as limit:
        await send("/chat/completions", b"{}")
    assert limit.value.retry_after == 3 and limit.value.status_code == 429 and limit.value.retryable
    assert (
        isinstance(limit.value.__cause__, aiohttp.ClientResponseError) and limit.value.__cause__.status == 429
    )
    with pytest.raises(ProviderBadRequestError, match="messages: required") as bad_request:
        await send("/chat/completions", b"{}")
    assert bad_request.value.body == bad["error"]
    with pytest.raises(ProviderUnavailableError) as down:
        await send("/chat/completions", b"{}")
    assert down.value.status_code == 503
    assert await client.post("/chat/completions", b"{}") == {"ok": True}
    assert raw.connections == 1  # each error body was read: the connection stayed in use


async def test_an_answer_slower_than_the_timeout_is_unavailable(
    raw: RawServer, client: AioHTTPClient
) -> None:
    gate = asyncio.Event()
    raw.script.extend([after(gate, answer(200, {"late": True})), answer(200, {"ok": True})])
    try:
        with pytest.raises(ProviderUnavailableError, match="the request timed out"):
            await client.post("/chat/completions", b"{}", timeout_s=0.2)
    finally:
        gate.set()
    assert await client.post("/chat/completions", b"{}", timeout_s=5) == {"ok": True}


async def test_a_stream_stalling_past_the_timeout_is_unavailable(
    raw: RawServer, client: AioHTTPClient
) -> None:
    gate = asyncio.Event()

    async def stall(writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        frame = chunks_of("a")[0].encode()
        writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        await writer.drain()
        await gate.wait()
        return False

    raw.script.append(stall)
    stream = await client.stream("/chat/completions", b"{}", timeout_s=0.2)
    try:
        with pytest.raises(ProviderUnavailableError, match="the request timed out"):
            async for _ in stream:
                pass
    finally:
        gate.set()
        await stream.close()


# -- through OpenAIModel -------------------------------------------------------------------------------


async def test_transport_choice(server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    url = server.url + "/v1"
    async with (
        OpenAIModel("m", base_url=url) as default,
        OpenAIModel("m", base_url=url, transport="httpx") as h,
    ):
        assert default.transport == "aiohttp" and isinstance(default._http(), AioHTTPClient)
        assert h.transport == "httpx" and isinstance(h._http(), HTTPClient)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with OpenAIModel("m", base_url=url) as proxied:
        assert isinstance(proxied._http(), HTTPClient)  # httpx's client applies the proxy
    with pytest.raises(ValueError, match="transport"):
        OpenAIModel("m", transport="aiohttp", client=object())


# -- SSE lines split on bytes, however the reads cut them --------------------------------------------------


class _Content:
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def iter_any(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


class _Response:
    """What `AioSSEStream` reads of an aiohttp response: its body's reads, and `release`."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.content = _Content(pieces)
        self.released = False

    def release(self) -> None:
        self.released = True


async def _parse(pieces: list[bytes]) -> list[dict[str, Any]]:
    stream = AioSSEStream(_Response(pieces), "openai")  # type: ignore[arg-type]
    return await read_all(stream)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(max_size=12), min_size=1, max_size=4),
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_sse_lines_split_anywhere_give_the_same_events(
    texts: list[str], ending: str, cuts: list[int]
) -> None:
    body = "".join(
        f": comment{ending}event: message{ending}data: {json.dumps({'t': t})}{ending}{ending}" for t in texts
    )
    body += f"data: [DONE]{ending}{ending}"
    data = body.encode()
    points = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(points) if data[a:b]]
    assert asyncio.run(_parse(pieces)) == [{"t": t} for t in texts]


async def test_an_event_split_over_several_data_lines_is_joined() -> None:
    pieces = [b'data: {"a":\n', b"data: 1}\n\n", b'data: {"b": 2}\n\n']
    assert await _parse(pieces) == [{"a": 1}, {"b": 2}]
    assert await _parse([b'data: {"last": true}']) == [{"last": True}]  # no blank line at the end


# -- TLS -----------------------------------------------------------------------------------------------


def _self_signed(directory: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by its own key: (certificate file, key file)."""
    import datetime
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolrun test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_file), str(key_file)


async def test_https_verifies_the_server_certificate(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    from toolrun.models import _aiohttp

    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    raw = RawServer()
    raw._server = await asyncio.start_server(raw._serve, "127.0.0.1", 0, ssl=context)
    url = f"https://127.0.0.1:{raw._server.sockets[0].getsockname()[1]}/v1"
    try:
        untrusted = AioHTTPClient(url, headers={}, provider="openai")
        try:
            with pytest.raises(ProviderUnavailableError, match="could not reach the provider") as info:
                await untrusted.post("/chat/completions", b"{}")
            assert isinstance(info.value.__cause__, aiohttp.ClientConnectorCertificateError)
        finally:
            await untrusted.aclose()
        assert raw.seen == []
        monkeypatch.setattr(_aiohttp, "_ssl_context", lambda: ssl.create_default_context(cafile=cert))
        raw.script.extend([answer(200, {"n": 1}), events(chunks_of("over TLS"))])
        trusted = AioHTTPClient(url, headers={}, provider="openai")
        try:
            assert await trusted.post("/chat/completions", b"{}") == {"n": 1}
            items = await read_all(await trusted.stream("/chat/completions", b"{}"))
            assert items[0]["choices"][0]["delta"]["content"] == "over TLS"
        finally:
            await trusted.aclose()
        assert raw.connections == 1
    finally:
        raw._server.close()
        await raw._server.wait_closed()
