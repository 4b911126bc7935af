"""A front-end that goes away mid-stream leaves no half-run tool and no stuck thread: the run goes on to
its next safe point in the service's own task and is stored."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from .conftest import LiveServer

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("protocol", ["ag-ui", "ai-sdk"])
def test_disconnect_after_the_first_frame(live_server: LiveServer, protocol: str) -> None:
    title = f"Survives a hang-up {uuid.uuid4().hex[:6]}"
    if protocol == "ag-ui":
        body = {
            "threadId": uuid.uuid4().hex,
            "runId": "r",
            "messages": [{"id": "m", "role": "user", "content": f"add {title}"}],
        }
    else:
        body = {
            "id": uuid.uuid4().hex,
            "messages": [{"id": "m", "role": "user", "parts": [{"type": "text", "text": f"add {title}"}]}],
        }
    headers = {"Authorization": f"Bearer {live_server.alice}"}
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", f"{live_server.url}/api/v1/{protocol}", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        first = next(response.iter_lines())
        assert first.startswith("data: ")
    deadline = time.monotonic() + 20
    while True:
        conversations = live_server.get("/api/v1/conversations", live_server.alice)["conversations"]
        mine = [c for c in conversations if c["title"] == f"add {title}"]
        detail = (
            live_server.get(f"/api/v1/conversations/{mine[0]['id']}", live_server.alice) if mine else None
        )
        if detail is not None and detail["last_run"]["status"] == "completed":
            break
        assert time.monotonic() < deadline, "the run did not finish after the client left"
        time.sleep(0.1)
    assert title in live_server.task_titles(live_server.alice)
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]
