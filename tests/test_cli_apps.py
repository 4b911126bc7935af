"""`toolrun` with an App of one's own: `toolrun serve module:app` (a real process on 127.0.0.1), `--app`
and `TOOLRUN_APP` on the other commands, and a bad `module:attribute` as one line and exit 2."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolrun.cli import app

runner = CliRunner()
OWN_APP = Path(__file__).parent / "server" / "own_app"
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(OWN_APP)  # where notes_app.py is, as a team runs `toolrun serve notes_app:app`
    monkeypatch.setenv("TOOLRUN_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("TOOLRUN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TOOLRUN_APP", "")  # the commands set it for what they start: restored after
    monkeypatch.delenv("TOOLRUN_APP")
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_toolrun_serve_module_app_serves_that_app(env: Path) -> None:
    from server._procs import ServeProcess

    # A console script's sys.path holds its own folder, not the current one: so does this launcher.
    launcher = env / "toolrun_script.py"
    launcher.write_text("from toolrun.cli import main\nmain()\n")
    serve_env = {
        "TOOLRUN_DATABASE_URL": f"sqlite+aiosqlite:///{env}/serve.db",
        "TOOLRUN_DATA_DIR": str(env / "data"),
        "PYTHONPATH": str(SRC),
    }
    process = ServeProcess(
        serve_env,
        extra_args=("notes_app:app", "--upgrade", "--host", "127.0.0.1"),
        launcher=(sys.executable, str(launcher)),
        cwd=str(OWN_APP),
    )
    try:
        url = await process.wait_ready(60)
        async with httpx.AsyncClient(base_url=url) as http:
            face = (await http.get("/api/v1/app")).json()
    finally:
        process.stop()
    assert face["name"] == "notes" and face["title"] == "Notes"
    assert face["panel"] == {"title": "Your notes", "tool": "list_notes"}
    assert any("Notes is starting" in line for line in process.lines)


def test_app_on_the_db_and_tools_commands(env: Path) -> None:
    r = runner.invoke(app, ["db", "upgrade", "--app", "notes_app:app"])
    assert r.exit_code == 0, r.output
    assert "(app notes at notes_0001)" in r.output
    r = runner.invoke(app, ["tools", "list", "--app", "notes_app:app"])
    assert r.exit_code == 0, r.output
    assert "add_note" in r.output and "create_task" not in r.output
    os.environ.pop("TOOLRUN_APP", None)
    r = runner.invoke(app, ["db", "current"], env={"TOOLRUN_APP": "notes_app:app"})
    assert r.output.split() == ["0008", "app", "notes:", "notes_0001"]
    r = runner.invoke(app, ["users", "add", "ada", "--app", "notes_app:app"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["serve", "no_such_module_here:app"], "no such module"),
        (["serve", "notes_app"], "not 'module:attribute'"),
        (["serve", "notes_app:nope"], "no attribute 'nope'"),
        (["serve", "notes_app:tools"], "not a toolrun.server.App"),
        (["serve", "notes_app:app", "--app", "other:app"], "two apps named"),
        (["db", "upgrade", "--app", "notes_app:nope"], "no attribute"),
        (["users", "list", "--app", "nope:app"], "no such module"),
        (["tools", "export", "--app", "nope:app"], "no such module"),
        (["chat", "--app", "nope:app"], "no such module"),
        (["mcp", "serve", "--app", "nope:app"], "no such module"),
    ],
)
def test_a_bad_app_is_one_line_and_exit_2(env: Path, args: list[str], said: str) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and said in lines[0], r.output
    assert "Traceback" not in r.output


def test_a_bad_toolrun_app_is_one_line_too(env: Path) -> None:
    r = runner.invoke(app, ["tools", "list"], env={"TOOLRUN_APP": "notes_app:missing"})
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "no attribute 'missing'" in r.output


def test_the_tools_commands_show_an_apps_remote_tools(env: Path) -> None:
    """An App's `MCPToolset` tools are fetched (then the connection closed) by the commands that show or
    check the App's tools, as `toolrun serve` fetches them at start."""
    r = runner.invoke(app, ["tools", "list", "--app", "weather_app:app"])
    assert r.exit_code == 0, r.output
    assert "met_forecast" in r.output
    os.environ.pop("TOOLRUN_APP", None)
    r = runner.invoke(app, ["tools", "export", "--app", "weather_app:app", "--format", "mcp"])
    assert r.exit_code == 0, r.output
    assert "met_forecast" in r.output


def test_an_apps_remote_server_that_is_down_is_one_line(env: Path) -> None:
    r = runner.invoke(app, ["tools", "list", "--app", "weather_app:down"])
    assert r.exit_code == 1, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "Could not fetch the tools of the toolset 'met'" in lines[0], r.output
    assert "Traceback" not in r.output


@pytest.mark.slow
@pytest.mark.timeout(120)  # a server process that imports the service (slow on a loaded machine)
async def test_mcp_serve_serves_an_apps_remote_tools(env: Path) -> None:
    """`toolrun mcp serve --app weather_app:app` over stdio, driven by the official `mcp` client: the
    remote tools are fetched in the serving loop, listed and called through toolrun's executor."""
    from mcp import Client, StdioServerParameters
    from toolrun.server.migrate import upgrade

    url = f"sqlite+aiosqlite:///{env}/mcp.db"
    await upgrade(url)
    child = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRUN_")}
    child |= {"PYTHONPATH": os.pathsep.join([str(SRC), str(OWN_APP)]), "TOOLRUN_DATABASE_URL": url}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolrun.mcp", "serve", "--app", "weather_app:app", "--user", "ada"],
        env=child,
        cwd=str(env),
    )
    async with Client(params) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        called = await client.call_tool("met_forecast", {"city": "Oslo"})
    assert names == ["met_forecast"]
    assert called.is_error is False and called.structured_content == {"city": "Oslo", "weather": "sunny"}
