"""A turn stopped by the person (the page's Stop, `POST /api/v1/conversations/{id}/stop`) while the real
AG-UI and AI SDK clients stream it: each client sees the run end as stopped — AG-UI a `RUN_FINISHED` whose
result says `stopped`, the AI SDK an `abort` chunk, as its own streams end one — with the partial answer
kept, and no run error."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._page_model import SLOW_FIRST_PART
from .conftest import LiveServer, run_node

pytestmark = pytest.mark.timeout(120)


def _stop_the_slow_turn(live: LiveServer, title: str) -> None:
    """Stop the conversation titled `title` once its turn runs (409 until it does)."""
    headers = {"Authorization": f"Bearer {live.alice}"}
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=live.url, headers=headers, timeout=10) as http:
        while time.monotonic() < deadline:
            listed = http.get("/api/v1/conversations").json()["conversations"]
            found = [c["id"] for c in listed if c["title"].lower() == title]  # titled from the message
            if found and http.post(f"/api/v1/conversations/{found[0]}/stop").status_code == 202:
                return
            time.sleep(0.1)
    raise AssertionError(f"the turn of {title!r} never ran")


def _while_stopping(live: LiveServer, title: str, client: Any) -> dict[str, Any]:
    stopper = threading.Thread(target=_stop_the_slow_turn, args=(live, title), daemon=True)
    stopper.start()
    report: dict[str, Any] = client()
    stopper.join(60)
    assert not stopper.is_alive()
    return report


def test_the_ai_sdk_chat_sees_a_stopped_turn_as_aborted(page_server: LiveServer, node_clients: Path) -> None:
    title = f"slow {uuid.uuid4().hex[:6]}"
    payload = {
        "url": f"{page_server.url}/api/v1/ai-sdk",
        "token": page_server.alice,
        "chatId": f"chat-{uuid.uuid4().hex[:8]}",
        "steps": [{"op": "say", "text": title}],
    }
    report = _while_stopping(page_server, title, lambda: run_node(node_clients, "ai_sdk_client.mjs", payload))
    (step,) = report["steps"]
    assert step["status"] == "ready" and step["error"] is None, step
    body = step["bodies"][0]
    assert '"type":"abort"' in body.replace(" ", "") and '"type":"error"' not in body.replace(" ", "")
    assert body.rstrip().endswith("data: [DONE]")
    text = "".join(p["text"] for p in step["messages"][-1]["parts"] if p["type"] == "text")
    assert text.startswith(SLOW_FIRST_PART.split(" ")[0]) and SLOW_FIRST_PART in text


def test_the_ag_ui_client_sees_a_stopped_turn_finish(page_server: LiveServer, node_clients: Path) -> None:
    title = f"slow {uuid.uuid4().hex[:6]}"
    payload = {
        "url": f"{page_server.url}/api/v1/ag-ui",
        "token": page_server.alice,
        "threadId": f"thread-{uuid.uuid4().hex[:8]}",
        "steps": [{"op": "say", "text": title}],
    }
    report = _while_stopping(page_server, title, lambda: run_node(node_clients, "ag_ui_client.mjs", payload))
    (step,) = report["steps"]
    assert step["runError"] is None and step["clientError"] is None, step
    assert step["types"][-1] == "RUN_FINISHED" and "RUN_ERROR" not in step["types"]
    assert step["events"][-1]["result"]["status"] == "stopped"
    text = "".join(e.get("delta", "") for e in step["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert SLOW_FIRST_PART in text
