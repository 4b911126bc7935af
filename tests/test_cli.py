"""The `toolrun` command: db, users, tools, chat (in-process and against a running server), exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from toolrun._chat_cli import run_chat
from toolrun.cli import app
from toolrun.server.migrate import head_revision

runner = CliRunner()


def script(*lines: str) -> Any:
    """An input function that types `lines`, then ends the input (like Ctrl-D)."""
    it = iter(lines)

    def ask() -> str:
        line = next(it, None)
        if line is None:
            raise EOFError
        return line

    return ask


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLRUN_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("TOOLRUN_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def test_db_and_users(env: Path) -> None:
    r = runner.invoke(app, ["db", "upgrade"])
    assert r.exit_code == 0, r.output
    assert f"revision {head_revision()}" in r.output
    r = runner.invoke(app, ["users", "add", "alice", "--role", "admin", "--role", "member"])
    assert r.exit_code == 0, r.output
    token = r.stdout.strip().splitlines()[-1]
    assert token.startswith("trk_")
    assert runner.invoke(app, ["users", "add", "alice"]).exit_code == 1
    assert runner.invoke(app, ["users", "add", "bad name!"]).exit_code == 1
    listed = runner.invoke(app, ["users", "list"])
    assert "alice" in listed.output and "admin, member" in listed.output and token not in listed.output
    r = runner.invoke(app, ["users", "revoke", "alice"])
    assert r.exit_code == 0 and "revoked 1 token(s)" in r.output
    assert runner.invoke(app, ["users", "revoke", "nobody"]).exit_code == 1
    assert runner.invoke(app, ["db", "current"]).output.strip() == head_revision()
    assert runner.invoke(app, ["db", "downgrade", "base"]).exit_code == 0
    assert runner.invoke(app, ["db", "current"]).output.strip() == "none"


def test_users_on_a_database_without_tables_say_how_to_fix_it(env: Path) -> None:
    """Before `toolrun db upgrade`: one clear line and exit 1, never a traceback."""
    for args in (["users", "list"], ["users", "add", "alice"], ["users", "revoke", "alice"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 1, (args, r.output)
        assert "toolrun db upgrade" in r.output and "Traceback" not in r.output
        assert r.exception is None or isinstance(r.exception, SystemExit)


def test_tools_commands() -> None:
    r = runner.invoke(app, ["tools", "list"])
    assert r.exit_code == 0 and "delete_task" in r.output and "refresh_attachment" in r.output
    for fmt in ("openai", "openai-responses", "anthropic", "gemini", "mcp"):
        r = runner.invoke(app, ["tools", "export", "--format", fmt])
        assert r.exit_code == 0
        assert len(json.loads(r.stdout)) == 8
    assert runner.invoke(app, ["tools", "export", "--format", "cobol"]).exit_code == 2
    r = runner.invoke(app, ["tools", "check"])
    assert r.exit_code == 0 and "8 tools conform" in r.output
    assert runner.invoke(app, ["nope"]).exit_code == 2


def test_serve_refuses_postgres_without_a_shared_secret(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    r = runner.invoke(app, ["serve"])
    assert r.exit_code == 1 and "TOOLRUN_SECRET_KEY is required" in r.output


async def test_chat_in_process_streams_and_asks_for_confirmation(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = Console(record=True, width=200, force_terminal=False)
    answers = iter(["y"])
    asked: list[str] = []

    def confirm(question: str, *a: Any, **k: Any) -> bool:
        asked.append(question)
        return next(answers) == "y"

    monkeypatch.setattr("rich.prompt.Confirm.ask", confirm)
    ask = script("add Buy bread !high", "list", "", "exit")
    code = await run_chat(url=None, token=None, conversation_id=None, console=console, ask=ask)
    assert code == 0
    out = console.export_text()
    assert "(demo model)" in out and "✓ create_task" in out and "Buy bread (pending, high)" in out
    task_id = out.split("Created ")[1].split(":")[0]
    ask = script(f"delete {task_id}", "list")
    code = await run_chat(url=None, token=None, conversation_id=None, console=console, ask=ask)
    assert code == 0  # end of input
    out = console.export_text()
    assert f"Deleted task {task_id} (Buy bread)." in out and "No tasks match." in out
    assert asked == ["[yellow]Allow?[/yellow] Delete the task 'Buy bread' (no due date), permanently."]
    kept = (env / "data" / "demo-token").read_text().strip()
    assert kept.startswith("trk_") and (env / "data" / "demo-token").stat().st_mode & 0o777 == 0o600


async def test_chat_needs_a_token_for_a_server(env: Path) -> None:
    console = Console(record=True)
    assert await run_chat(url="http://127.0.0.1:9", token=None, conversation_id=None, console=console) == 2


async def test_chat_against_a_running_server(tmp_path: Path) -> None:
    from server._procs import uvicorn_server
    from toolrun.server import Settings, create_app
    from toolrun.server.migrate import upgrade

    settings = Settings(
        _env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/x.db", data_dir=tmp_path
    )  # type: ignore[call-arg]
    await upgrade(settings.database_url)
    app = create_app(settings)
    _, token = await app.state.toolrun.users.add("carol")
    console = Console(record=True, width=200)
    lines = script("add Remote task", "exit")
    async with uvicorn_server(app) as url:
        code = await run_chat(url=url, token=token, conversation_id=None, console=console, ask=lines)
        assert code == 0
        bad = script("list", "exit")
        await run_chat(url=url, token="trk_wrong", conversation_id=None, console=console, ask=bad)
    out = console.export_text()
    assert "Created task_" in out and "Remote task" in out
    assert "401 The token is unknown or revoked." in out


def test_approvals_add_list_revoke(env: Path) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    assert runner.invoke(app, ["users", "add", "alice"]).exit_code == 0
    r = runner.invoke(
        app, ["approvals", "add", "alice", "delete_task", "--days", "7", "--arguments", '{"task_id": "t1"}']
    )
    assert r.exit_code == 0, r.output
    rule_id = r.output.split(":")[0].strip()
    assert rule_id.startswith("rule_") and "allow delete_task for alice" in r.output
    listed = runner.invoke(app, ["approvals", "list", "alice"])
    assert rule_id in listed.output and "t1" in listed.output
    assert runner.invoke(app, ["approvals", "add", "alice", "delete_task", "--days", "400"]).exit_code == 1
    assert runner.invoke(app, ["approvals", "add", "alice", "x", "--arguments", "[1]"]).exit_code == 1
    assert runner.invoke(app, ["approvals", "list", "nobody"]).exit_code == 1
    assert runner.invoke(app, ["approvals", "revoke", "alice", rule_id]).exit_code == 0
    assert runner.invoke(app, ["approvals", "revoke", "alice", rule_id]).exit_code == 1
    assert rule_id not in runner.invoke(app, ["approvals", "list", "alice"]).output
