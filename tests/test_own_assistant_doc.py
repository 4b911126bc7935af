"""docs/own-assistant.md as a reader follows it: its files saved in a folder, its shell commands run there
(`toolrun db upgrade --app notes_app:app`, `toolrun serve notes_app:app`), the page's title answered by a
real server on 127.0.0.1. Its Python blocks also run in tests/test_docs.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from test_docs import ROOT, file_name, python_blocks

PAGE = ROOT / "docs" / "own-assistant.md"
SRC = ROOT / "src"


def shell_commands() -> list[str]:
    blocks = re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("toolrun ")]


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_the_tutorial_as_a_reader_follows_it(tmp_path: Path) -> None:
    from server._procs import ServeProcess

    for _, code, _ in python_blocks(PAGE):
        name = file_name(code)
        if name is not None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(code)
    launcher = tmp_path / "toolrun_launcher.py"  # a console script: its own folder on sys.path, not the cwd
    launcher.write_text("from toolrun.cli import main\nmain()\n")
    env = {
        "TOOLRUN_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/notes.db",
        "TOOLRUN_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": str(SRC),
        "PATH": "/usr/bin:/bin",
    }
    upgrade, serve = shell_commands()
    assert upgrade == "toolrun db upgrade --app notes_app:app"
    assert serve == "toolrun serve notes_app:app --demo-user me"

    def toolrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(launcher), *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = toolrun(*upgrade.split()[1:])
    assert done.returncode == 0, done.stderr
    db = toolrun("db", "upgrade", "--app", "notes_db:app")  # section 4: the app's own migrations
    assert db.returncode == 0 and "(app notes-db at notes_0001)" in db.stdout, db.stdout + db.stderr
    listed = toolrun("tools", "list", "--app", "notes_app:app")
    assert "clear_notes" in listed.stdout and "create_task" not in listed.stdout

    process = ServeProcess(
        env,
        extra_args=tuple(serve.split()[2:]),
        launcher=(sys.executable, str(launcher)),
        cwd=str(tmp_path),
    )
    try:
        url = await process.wait_ready(60)
        async with httpx.AsyncClient(base_url=url) as http:
            face = (await http.get("/api/v1/app")).json()
    finally:
        process.stop()
    assert face["title"] == "Notes" and face["panel"] == {"title": "Your notes", "tool": "list_notes"}
    assert any("API token of user me" in line for line in process.lines)  # --demo-user me (port 0: no link)
