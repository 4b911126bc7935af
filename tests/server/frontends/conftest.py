"""A live server for the real clients (Node and Chromium), and the Node set-up from the committed lockfile."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from processes import stop

JS_DIR = Path(__file__).resolve().parents[2] / "js"
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@dataclass
class LiveServer:
    url: str
    alice: str
    bob: str

    def get(self, path: str, token: str) -> Any:
        response = httpx.get(self.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        response.raise_for_status()
        return response.json()

    def task_titles(self, token: str) -> list[str]:
        return [t["title"] for t in self.get("/api/v1/tasks?limit=200", token)["tasks"]]


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A real uvicorn on 127.0.0.1 (a free port) with the demo model and a fresh SQLite database."""
    yield from _serve(tmp_path_factory.mktemp("live"))


@pytest.fixture(scope="module")
def rich_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The same, also serving `_rich.py`'s tools: `chart <metric>` (progress, then an image) and
    `scan <n>` (an async generator tool)."""
    yield from _serve(tmp_path_factory.mktemp("live-rich"), "rich")


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The same, with `_page_model.py`'s model: `markdown`, `slow ...` (stopped by the page), `report ...`
    (a tool that works until cancelled); anything else goes to the demo model."""
    yield from _serve(tmp_path_factory.mktemp("live-page"), "page")


def _serve(directory: Path, *args: str) -> Iterator[LiveServer]:
    log = directory / "server.log"
    with log.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_live_server.py")), str(directory), *args],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        if not line:
            process.wait(timeout=10)
            pytest.fail(f"the live server did not start:\n{log.read_text()[-3000:]}")
        info = json.loads(line)
        yield LiveServer(url=f"http://127.0.0.1:{info['port']}", alice=info["alice"], bob=info["bob"])
    finally:
        stop(process)


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """tests/js with its node_modules installed by `npm ci` from the committed package-lock.json.

    Fails (never skips) when Node 20+ or npm is missing or the install fails: these clients are the proof.
    A node_modules that is a symbolic link is used as it is, never reinstalled.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            "Node.js 20+ and npm are required (apt-get install nodejs npm); `make test` installs them."
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 20:
        pytest.fail(f"Node.js 20+ is required, found {version}.")
    if (JS_DIR / "node_modules").is_symlink():
        # Another checkout's install (a git worktree sharing the main one's): used as it is. `npm ci`
        # through the link would empty the other checkout's node_modules before installing here.
        return JS_DIR
    stamp = JS_DIR / "node_modules" / ".package-lock.json"
    lock = JS_DIR / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=300
        )
        if result.returncode != 0:
            pytest.fail(f"npm ci failed in {JS_DIR}:\n{result.stderr[-2000:]}")
    return JS_DIR


@pytest.fixture(scope="module")
def axe_source(node_clients: Path) -> str:
    """axe-core from the committed lockfile (tests/js): the accessibility checker the page must pass."""
    return (node_clients / "node_modules" / "axe-core" / "axe.min.js").read_text()


def run_node(js_dir: Path, script: str, payload: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """Run one harness script with `payload` on stdin; its JSON report."""
    result = subprocess.run(
        ["node", script],
        cwd=js_dir,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{script} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(result.stdout)
    report["stderr"] = result.stderr
    return report


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile; fails (never skips) when Chromium or its driver is missing."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            pytest.fail(f"{path} is missing: apt-get install chromium chromium-driver (`make test` does).")
    profile = tempfile.mkdtemp(prefix="toolrun-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
