"""A paused run resumed in ANOTHER process: real interpreters, one SQLite confirmation store between them.

Process A runs the agent until the destructive call pauses it and writes the run as JSON; process B, a
fresh interpreter with a fresh agent and executor on the same database file and hash key, resumes it.
The tool appends its process id to a file each time it runs, so the tests see where and how often.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolrun import ErrorCode
from toolrun.agent import AgentRun

SCRIPT = Path(__file__).with_name("_cross_process_script.py")

pytestmark = pytest.mark.slow


def spawn(tmp_path: Path, *args: str) -> int:
    """Run the script in a fresh interpreter (warnings are errors there too); return its pid."""
    done = subprocess.run(
        [sys.executable, "-W", "error", str(SCRIPT), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, f"{args[0]} process failed:\n{done.stderr}"
    assert "Warning" not in done.stderr, done.stderr
    return int(done.stdout.strip())


def tool_runs(runs: Path) -> list[tuple[int, str]]:
    if not runs.exists():
        return []
    return [(int(pid), task) for pid, task in (line.split() for line in runs.read_text().splitlines())]


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Process A: run until the destructive call pauses the run; return (db, runs, paused json)."""
    db, runs, out = tmp_path / "toolrun.db", tmp_path / "runs.txt", tmp_path / "paused.json"
    spawn(tmp_path, "start", str(db), str(runs), str(out))
    run = AgentRun.from_json(out.read_text())
    assert run.status == "awaiting_confirmation"
    assert [p.call.name for p in run.pending] == ["delete_task"]
    assert tool_runs(runs) == []  # paused: nothing ran in A
    return db, runs, out


def test_approved_in_another_process_runs_once_there_and_a_replay_runs_nothing(
    tmp_path: Path, paused: tuple[Path, Path, Path]
) -> None:
    db, runs, paused_json = paused
    done_json = tmp_path / "done.json"
    pid_b = spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(done_json), "approve")

    done = AgentRun.from_json(done_json.read_text())
    assert done.status == "completed"
    assert done.output == "Done with t1."
    assert tool_runs(runs) == [(pid_b, "t1")]  # exactly once, in B
    result = done.tool_calls[0].result
    assert result.status == "ok"
    assert result.value == {"deleted": "t1"}

    # Process C replays the same paused JSON: the approval was consumed in B, so nothing runs again,
    # and the run says so instead of "completing" without its action.
    replay_json = tmp_path / "replay.json"
    spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(replay_json), "approve")
    replay = AgentRun.from_json(replay_json.read_text())
    assert tool_runs(runs) == [(pid_b, "t1")]
    assert replay.status == "failed" and "unknown to this executor's confirmation store" in (
        replay.error or ""
    )
    assert replay.tool_calls[0].result.status == "confirmation_required"


def test_a_process_with_another_hash_key_refuses_clearly_and_runs_nothing(
    tmp_path: Path, paused: tuple[Path, Path, Path]
) -> None:
    db, runs, paused_json = paused
    out = tmp_path / "other.json"
    other_key = "another-key-of-a-misconfigured-process"
    spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(out), "approve", other_key)
    run = AgentRun.from_json(out.read_text())
    assert tool_runs(runs) == []
    assert run.status == "failed" and "hash_key" in (run.error or "")
    # Nothing was consumed: the well-configured process can still approve it.
    done_json = tmp_path / "done.json"
    pid = spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(done_json), "approve")
    assert AgentRun.from_json(done_json.read_text()).status == "completed"
    assert tool_runs(runs) == [(pid, "t1")]


def test_an_edited_run_is_refused_before_anything_runs(
    tmp_path: Path, paused: tuple[Path, Path, Path]
) -> None:
    db, runs, paused_json = paused
    data = json.loads(paused_json.read_text())
    data["pending"][0]["summary"] = 'delete_task(task_id="harmless")'
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    done = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            str(SCRIPT),
            "resume",
            str(db),
            str(runs),
            str(edited),
            "x.json",
            "approve",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode != 0 and "RunSignatureError" in done.stderr
    assert tool_runs(runs) == []


def test_denied_in_another_process_never_runs(tmp_path: Path, paused: tuple[Path, Path, Path]) -> None:
    db, runs, paused_json = paused
    done_json = tmp_path / "done.json"
    spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(done_json), "deny")

    done = AgentRun.from_json(done_json.read_text())
    assert done.status == "completed"
    assert tool_runs(runs) == []
    error = done.tool_calls[0].result.error
    assert error is not None and error.code == ErrorCode.CONFIRMATION_DENIED
    # The model was told: the denial went back into the conversation as the call's result.
    assert any(m.to_dict().get("call_id") == "d1" for m in done.messages)

    # Approving the same paused run afterwards finds nothing to approve: the denial consumed it.
    late_json = tmp_path / "late.json"
    spawn(tmp_path, "resume", str(db), str(runs), str(paused_json), str(late_json), "approve")
    assert tool_runs(runs) == []
    late = json.loads(late_json.read_text())
    assert late["status"] == "failed" and "unknown to this executor" in late["error"]
