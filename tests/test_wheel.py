"""The README's install path, from a built wheel into a fresh virtual environment.

What an editable checkout hides: files missing from the wheel (the page, the migrations), imports of
modules that only exist in the tree, a console script that points nowhere. The wheel is built offline
(`pip wheel --no-build-isolation`, hatchling from the dev extra) and installed with `--no-deps` into a new
venv; its dependencies come from the test venv's site-packages through a `.pth` line, which Python appends
*after* the new venv's own site-packages, so `import toolrun` finds the wheel's copy, never `src/`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from processes import free_port
from test_docs import run_page

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TOOLRUN_", "VIRTUAL_ENV"))}
    return {**env, **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel of this checkout installed; returns its bin directory."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp, ROOT],
        check=True,
        cwd=tmp,
        env=_clean_env(),
        timeout=240,
    )
    (wheel,) = tmp.glob("toolrun-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The dependencies, after the venv's own site-packages (a .pth line appends to sys.path).
    Path(site, "_deps_from_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
        check=True,
        env=_clean_env(),
        timeout=120,
    )
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    # What only exists as data files: the page and the migrations.
    assert "toolrun/server/static/index.html" in names and "toolrun/server/static/app.js" in names
    assert any(re.fullmatch(r"toolrun/server/migrations/versions/0001_\w+\.py", n) for n in names), names
    assert "toolrun/py.typed" in names
    return venv / "bin"


def test_the_wheel_is_what_imports_and_the_readme_runs(installed: Path, tmp_path: Path) -> None:
    """`import toolrun` resolves to the installed wheel, and the README's Python (the fifteen lines, the
    executor) prints what the README says, run from an empty directory."""
    where = subprocess.run(
        [installed / "python", "-c", "import toolrun; print(toolrun.__file__)"],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(installed.parent)) and "/src/" not in where, where
    run_page(ROOT / "README.md", installed / "python", cwd=tmp_path, env=_clean_env())


def test_the_installed_console_script_migrates_and_serves_the_page(installed: Path, tmp_path: Path) -> None:
    """`toolrun db upgrade && toolrun serve --demo-user demo`, as the README says, from the installed
    script: the page, its script and the API answer."""
    database = f"sqlite+aiosqlite:///{tmp_path}/toolrun.db"
    env = _clean_env(TOOLRUN_DATABASE_URL=database, TOOLRUN_DATA_DIR=str(tmp_path / "data"))
    toolrun = installed / "toolrun"
    assert subprocess.run([toolrun, "--help"], env=env, capture_output=True, timeout=60).returncode == 0
    upgrade = [toolrun, "db", "upgrade"]
    subprocess.run(upgrade, env=env, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    port = free_port()
    serve = subprocess.Popen(
        [toolrun, "serve", "--demo-user", "demo", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(base + "/", timeout=5)
                break
            except httpx.TransportError:
                assert serve.poll() is None and time.monotonic() < deadline, "toolrun serve did not start"
                time.sleep(0.2)
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert httpx.get(base + "/static/app.js", timeout=5).status_code == 200
        assert httpx.get(base + "/api/v1/me", timeout=5).status_code == 401  # no token, no user
    finally:
        serve.terminate()
        out, _ = serve.communicate(timeout=30)
    assert "Traceback" not in out, out
    assert "/#token=" in out or "sign in" in out.lower(), out  # the demo user's sign-in link
