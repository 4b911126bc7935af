"""`python -m toolrun.mcp serve` as a real stdio subprocess, driven by the official client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import answer, text

from mcp import Client, StdioServerParameters

HERE = Path(__file__).parent

pytestmark = pytest.mark.slow


def serve(*extra: str) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolrun.mcp", "serve", "sample_tools:registry", "--user", "u1", *extra],
        env=env,
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_round_trip(mode: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(serve(), mode=mode, elicitation_callback=answer("accept")) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        ok = await client.call_tool("add", {"a": 40, "b": 2})
        bad = await client.call_tool("add", {"a": 1})
        broken = await client.call_tool("broken", {"task_id": "t"})
        slow = await client.call_tool("slow", {})
        confirmed = await client.call_tool("delete_task", {"task_id": "t9"})
        progress = await client.call_tool("long_job", {"steps": 2}, progress_callback=on_progress)
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
    assert "purge_cache" not in names and "add" in names
    assert ok.structured_content == {"result": 42} and text(ok) == "42"
    assert bad.is_error and "- b:" in text(bad)
    assert broken.is_error and "hunter2" not in text(broken)
    assert slow.is_error and "TIMEOUT" in text(slow)
    assert confirmed.structured_content == {"deleted": "t9"}
    assert text(progress) == "done" and seen == [1, 2]
    assert unknown.value.code == types.INVALID_PARAMS


async def test_stdio_roles_are_the_configured_principal_s() -> None:
    async with Client(serve()) as member:
        denied = await member.call_tool("purge_cache", {})
    async with Client(serve("--role", "admin")) as admin:
        allowed = await admin.call_tool("purge_cache", {})
    assert denied.is_error and "PERMISSION_DENIED" in text(denied)
    assert text(allowed) == "purged"


async def test_stdio_without_elicitation_fails_closed() -> None:
    async with Client(serve()) as client:
        result = await client.call_tool("delete_task", {"task_id": "t1"})
    assert result.is_error and "needs confirmation" in text(result)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module_xyz:registry", "Cannot import module 'no_such_module_xyz'"),
        ("sample_tools:nothing", "has no attribute 'nothing'"),
        ("sample_tools:STATE", "not a ToolRegistry"),
    ],
)
def test_cli_explains_a_bad_target(target: str, message: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    args = [sys.executable, "-m", "toolrun.mcp", "serve", target]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert message in done.stderr
    assert done.stdout == ""


def test_missing_default_target_names_the_task_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.mcp import _cli

    assert _cli.DEFAULT_TARGET == "toolrun.cli:app_registry"
    monkeypatch.setattr(_cli, "DEFAULT_TARGET", "toolrun.no_such_cli:app_registry")
    with pytest.raises(_cli.TargetError, match=r"task tools are not part of this installation"):
        _cli.load_target("toolrun.no_such_cli:app_registry")


@pytest.mark.timeout(120)  # two server processes that import the service (slow on a loaded machine)
async def test_the_default_target_serves_the_task_tools_on_the_service_database(tmp_path: Path) -> None:
    """`toolrun mcp serve` with no TARGET: the task tools on TOOLRUN_DATABASE_URL, for `--user` only."""
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    await upgrade(url)
    env = client_env(TOOLRUN_DATABASE_URL=url, TOOLRUN_DATA_DIR=str(tmp_path / "data"))

    def as_user(user: str) -> StdioServerParameters:
        args = ["-m", "toolrun.mcp", "serve", "--user", user]
        return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))

    async with Client(as_user("ada")) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        created = await client.call_tool("create_task", {"title": "Renew passport", "priority": "high"})
        mine = await client.call_tool("query_tasks", {})
    async with Client(as_user("bob")) as client:
        theirs = await client.call_tool("query_tasks", {})
    assert {"create_task", "query_tasks", "delete_task"} <= set(names)
    assert not created.is_error and "Renew passport" in text(created)
    assert "Renew passport" in text(mine)
    assert "Renew passport" not in text(theirs)


# ------------------------------------------------------------------------------------------------------
# The task tools as documented for Claude Desktop; and without a database


def documented_config() -> dict[str, object]:
    """The `claude_desktop_config.json` block of docs/mcp.md, as written."""
    import json
    import re

    page = (HERE.parents[1] / "docs" / "mcp.md").read_text()
    found = re.search(r"`claude_desktop_config\.json`.*?```json\n(.*?)```", page, re.S)
    assert found is not None
    [server] = json.loads(found.group(1))["mcpServers"].values()
    return dict(server)


def client_env(**extra: str) -> dict[str, str]:
    """The environment a client such as Claude Desktop gives: no TOOLRUN_* settings of this process (the
    `toolrun` under test importable from anywhere)."""
    import toolrun

    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    env["PYTHONPATH"] = str(Path(toolrun.__file__).parents[1])
    return {**env, **extra}


@pytest.mark.timeout(120)  # a server process that imports the service (slow on a loaded machine)
@pytest.mark.parametrize("how", ["toolrun", "python -m"])
async def test_the_documented_claude_desktop_config_starts_and_lists_the_task_tools(
    tmp_path: Path, how: str
) -> None:
    from toolrun.server.migrate import upgrade

    config = documented_config()
    command, args, env = str(config["command"]), list(config["args"]), dict(config["env"])  # type: ignore[call-overload]
    assert command == "/path/to/venv/bin/toolrun" and args[:2] == ["mcp", "serve"]
    database = tmp_path / "data" / "toolrun.db"
    database.parent.mkdir()
    url = env["TOOLRUN_DATABASE_URL"].replace("/path/to/toolrun.db", str(database))
    assert url == f"sqlite+aiosqlite:///{database}"
    await upgrade(url)
    if how == "toolrun":
        command = command.replace("/path/to/venv/bin", str(Path(sys.executable).parent))
    else:  # the documented alternative: the same arguments after `python -m toolrun.mcp`
        command, args = sys.executable, ["-m", "toolrun.mcp", *args[1:]]
    elsewhere = tmp_path / "client-cwd"  # the client starts the server in a directory of its own
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=command, args=args, env=client_env(TOOLRUN_DATABASE_URL=url), cwd=str(elsewhere)
    )
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        created = await client.call_tool("create_task", {"title": "Renew passport"})
    assert {"create_task", "query_tasks", "delete_task"} <= set(names)
    assert not created.is_error, text(created)
    assert list(elsewhere.iterdir()) == []  # nothing written where the client runs


@pytest.mark.timeout(120)
@pytest.mark.parametrize("database", ["missing", "empty", "memory"])
def test_serving_the_task_tools_without_a_database_is_an_error_at_start(
    tmp_path: Path, database: str
) -> None:
    """No TOOLRUN_DATABASE_URL (the default ./toolrun.db, not there), an empty file, or an in-memory
    database: a clear error and exit 1, before any client is served; no file is created."""
    extra = {}
    if database == "empty":
        (tmp_path / "empty.db").touch()
        extra["TOOLRUN_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    elif database == "memory":
        extra["TOOLRUN_DATABASE_URL"] = "sqlite+aiosqlite:///:memory:"
    before = sorted(tmp_path.iterdir())
    args = [sys.executable, "-m", "toolrun.mcp", "serve", "--user", "me"]
    done = subprocess.run(
        args,
        env=client_env(**extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    expected = {
        "missing": f"No database at {tmp_path / 'toolrun.db'}",
        "empty": "has no toolrun tables: run `toolrun db upgrade` first",
        "memory": "need a database kept on disk",
    }[database]
    assert expected in done.stderr
    assert sorted(tmp_path.iterdir()) == before  # no ./toolrun.db made


def test_the_task_tools_module_as_a_target_points_to_the_default() -> None:
    from toolrun.mcp import _cli

    with pytest.raises(_cli.TargetError, match=r"default TARGET: `toolrun mcp serve` without one"):
        _cli.load_target("toolrun.apps.tasks")
