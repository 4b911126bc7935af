"""The real AG-UI client (@ag-ui/client 1.0 HttpAgent, with its schema enforcement and event verification)
against a real server: a run through interrupt and resume, and every way a client can try to cheat."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from .conftest import LiveServer, run_node

pytestmark = pytest.mark.timeout(120)


def agui(
    live: LiveServer,
    js: Path,
    steps: list[dict[str, Any]],
    *,
    thread: str | None = None,
    token: str | None = None,
) -> list[dict[str, Any]]:
    payload = {
        "url": f"{live.url}/api/v1/ag-ui",
        "token": token or live.alice,
        "threadId": thread or f"thread-{uuid.uuid4().hex[:8]}",
        "steps": steps,
    }
    report = run_node(js, "ag_ui_client.mjs", payload)
    assert "[ag-ui]" not in report["stderr"], report["stderr"]  # nothing stripped or warned about
    return report["steps"]  # type: ignore[no-any-return]


def created_id(step: dict[str, Any]) -> str:
    result = next(e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT")
    return str(json.loads(result["content"])["value"]["id"])


def task_ids(live: LiveServer) -> list[str]:
    return [t["id"] for t in live.get("/api/v1/tasks?limit=200", live.alice)["tasks"]]


def resume_entry(interrupt_id: str, approved: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": approved}}]


def test_a_run_through_interrupt_and_resume_passes_the_clients_verification(
    live_server: LiveServer, node_clients: Path
) -> None:
    (add,) = agui(live_server, node_clients, [{"op": "say", "text": "add Water the plants"}])
    task_id = created_id(add)
    assert add["clientError"] is None and add["runError"] is None
    assert add["types"][:5] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert add["types"][-1] == "RUN_FINISHED"

    thread = f"thread-{uuid.uuid4().hex[:8]}"
    delete, resume = agui(
        live_server,
        node_clients,
        [{"op": "say", "text": f"delete {task_id}"}, {"op": "resume", "approved": True}],
        thread=thread,
    )
    for step in (delete, resume):
        assert step["clientError"] is None, step["clientError"]
        assert step["runError"] is None, step["runError"]
    assert delete["types"] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    start = delete["events"][1]
    assert start["toolCallName"] == "delete_task"
    (interrupt,) = delete["interrupts"]
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == start["toolCallId"]
    assert interrupt["responseSchema"]["properties"]["approved"]["type"] == "boolean"
    assert interrupt["expiresAt"]
    assert interrupt["metadata"]["tool"] == "delete_task"
    assert interrupt["metadata"]["arguments"] == {"task_id": task_id}
    assert interrupt["message"] == interrupt["metadata"]["preview"]  # what the person approves
    assert interrupt["message"].startswith("Delete the task ")
    assert resume["types"][:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"]
    assert "TOOL_CALL_START" not in resume["types"]
    assert resume["events"][1]["toolCallId"] == start["toolCallId"]
    assert resume["types"][-1] == "RUN_FINISHED" and "TEXT_MESSAGE_CONTENT" in resume["types"]
    assert task_id not in task_ids(live_server)

    # The same answer again (a replay) runs nothing.
    (replay,) = agui(
        live_server,
        node_clients,
        [{"op": "resume_raw", "resume": resume_entry(interrupt["id"], True)}],
        thread=thread,
    )
    assert replay["types"] == ["RUN_STARTED", "RUN_ERROR"] and replay["runError"]["code"] == "STALE_RESUME"


@pytest.mark.parametrize(
    "answer", [{"op": "resume", "approved": False}, {"op": "cancel"}], ids=["deny", "cancel"]
)
def test_deny_or_cancel_runs_nothing(
    live_server: LiveServer, node_clients: Path, answer: dict[str, Any]
) -> None:
    (add,) = agui(live_server, node_clients, [{"op": "say", "text": "add Keep this one"}])
    task_id = created_id(add)
    delete, decided = agui(live_server, node_clients, [{"op": "say", "text": f"delete {task_id}"}, answer])
    assert delete["interrupts"]
    assert decided["clientError"] is None and decided["runError"] is None
    result = next(e for e in decided["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert "CONFIRMATION_DENIED" in result["content"]
    assert task_id in task_ids(live_server)


def test_open_interrupt_forged_loose_and_foreign_resumes_run_nothing(
    live_server: LiveServer, node_clients: Path
) -> None:
    (add,) = agui(live_server, node_clients, [{"op": "say", "text": "add Do not delete me yet"}])
    task_id = created_id(add)
    thread = f"thread-{uuid.uuid4().hex[:8]}"
    delete, _, new_input, forged, no_payload = agui(
        live_server,
        node_clients,
        [
            {"op": "say", "text": f"delete {task_id}"},
            {"op": "forget_interrupts"},  # a client that ignores the interrupt and talks on
            {"op": "say", "text": "add Sneaky"},
            {"op": "resume_raw", "resume": resume_entry("conf_forged_by_the_client", True)},
            {"op": "resume_raw", "resume": [{"interruptId": "x", "status": "resolved"}]},
        ],
        thread=thread,
    )
    interrupt_id = delete["interrupts"][0]["id"]
    assert (
        new_input["types"] == ["RUN_STARTED", "RUN_ERROR"]
        and new_input["runError"]["code"] == "INTERRUPT_OPEN"
    )
    assert forged["types"] == ["RUN_STARTED", "RUN_ERROR"] and forged["runError"]["code"] == "STALE_RESUME"
    assert no_payload["runError"]["code"] == "INVALID_RESUME"

    # The real id with a string "true", from another thread, or from another user: nothing runs.
    (loose_real,) = agui(
        live_server,
        node_clients,
        [{"op": "resume_raw", "resume": resume_entry(interrupt_id, "true")}],
        thread=thread,
    )
    assert loose_real["runError"]["code"] == "INVALID_RESUME"
    (other_thread,) = agui(
        live_server, node_clients, [{"op": "resume_raw", "resume": resume_entry(interrupt_id, True)}]
    )
    assert other_thread["runError"]["code"] == "STALE_RESUME"
    (bobs,) = agui(
        live_server,
        node_clients,
        [{"op": "resume_raw", "resume": resume_entry(interrupt_id, True)}],
        thread=thread,
        token=live_server.bob,
    )
    assert bobs["runError"]["code"] == "STALE_RESUME"
    titles = live_server.task_titles(live_server.alice)
    assert "Sneaky" not in titles and "Do not delete me yet" in titles
