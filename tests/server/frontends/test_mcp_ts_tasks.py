"""MCP tasks with the official MCP TypeScript SDK (1.x: protocol 2025-11-25, its experimental task API,
which checks every answer against its schemas) against toolrun's server over Streamable HTTP: a
background tool as a task to its result, a failing one, a plain tool, listing, cancelling (twice), the
result of a cancelled task, an unknown id."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processes import stop

from .conftest import run_node

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_mcp_tasks_server.py"))],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert line, "the MCP server did not start"
        yield f"http://127.0.0.1:{json.loads(line)['port']}/mcp"
    finally:
        stop(process)


def test_the_typescript_sdk_runs_background_tools_as_tasks(mcp_url: str, node_clients: Path) -> None:
    report: dict[str, Any] = run_node(
        node_clients,
        "mcp_tasks_client.mjs",
        {
            "url": mcp_url,
            "slow": {"name": "build_report", "arguments": {"month": "s", "seconds": 30}},
            "calls": [
                {"name": "build_report", "arguments": {"month": "2026-11", "seconds": 0.2}},
                {"name": "failing_export", "arguments": {"target": "x"}},
                {"name": "add", "arguments": {"a": 1, "b": 2}},
            ],
        },
    )
    assert report["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert dict(map(tuple, report["tools"])) == {
        "build_report": {"taskSupport": "optional"},
        "failing_export": {"taskSupport": "optional"},
        "add": None,
    }
    built, failed, added = report["streams"]
    kinds = [m["type"] for m in built]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result" and set(kinds[1:-1]) == {"taskStatus"}
    task_id = built[0]["task"]["taskId"]
    assert built[0]["task"]["ttl"] == 3_600_000 and built[0]["task"]["pollInterval"] == 50
    assert any(m["task"].get("statusMessage") == "reading (1/2)" for m in built if m["type"] == "taskStatus")
    result = built[-1]["result"]
    assert result["structuredContent"] == {"month": "2026-11", "rows": 1234} and not result["isError"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    # 2025-11-25 counts a tool's error result as a failed task
    assert [m["type"] for m in failed] == ["taskCreated", "taskStatus", "error"]
    assert failed[1]["task"]["status"] == "failed"
    assert [m["type"] for m in added] == ["result"] and added[0]["result"]["structuredContent"] == {
        "result": 3
    }
    # the caller's tasks, newest first; cancel once (the task, cancelled), twice (-32602), no result after
    slow = report["slowId"]
    assert report["listed"][0] == [slow, "working"] and {t for t, _ in report["listed"]} >= {task_id, slow}
    assert report["cancelled"]["taskId"] == slow and report["cancelled"]["status"] == "cancelled"
    assert "-32602" in report["afterCancel"]["error"]
    assert "-32602" in report["resultOfCancelled"]["error"]
    assert [m["type"] for m in report["rest"]] == ["taskStatus", "error"]
    assert report["unknown"]["code"] == -32602
