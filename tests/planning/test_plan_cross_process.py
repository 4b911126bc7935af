"""A paused run with a plan, resumed in ANOTHER process (fresh interpreter): the plan comes along."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolrun.agent import AgentRun
from toolrun.planning import Plan, Session

SCRIPT = Path(__file__).with_name("_plan_cross_process_script.py")

pytestmark = pytest.mark.slow


def spawn(tmp_path: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", str(SCRIPT), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=25,
        check=False,
    )
    assert done.returncode == 0, f"{args[0]} process failed:\n{done.stderr}"


def test_a_paused_run_resumed_in_another_process_keeps_its_plan(tmp_path: Path) -> None:
    db, paused_json, done_json = tmp_path / "toolrun.db", tmp_path / "paused.json", tmp_path / "done.json"
    spawn(tmp_path, "start", str(db), str(paused_json))
    paused = AgentRun.from_json(paused_json.read_text())
    assert paused.status == "awaiting_confirmation"
    plan = Session(paused.state)[Plan].latest()
    assert plan is not None
    assert [(s.title, s.status) for s in plan.steps] == [("Delete t1", "in_progress"), ("Report", "pending")]

    spawn(tmp_path, "resume", str(db), str(paused_json), str(done_json))
    data = json.loads(done_json.read_text())
    # The first request process B made already showed the plan from the JSON, before any tool ran there.
    assert "[~] 1. Delete t1 (in_progress)" in data.pop("first_request_system")
    done = AgentRun.from_dict(data)
    assert done.status == "completed", done.error
    assert done.output == "Deleted t1."
    final = Session(done.state)[Plan].latest()
    assert final is not None and final.status == "completed"
    assert [s.step_id for s in final.steps] == [1, 2]
    assert [r.result.status for r in done.tool_calls] == ["ok"] * 5
