"""The official MCP conformance suite (@modelcontextprotocol/conformance) against toolrun's MCP server and
client.

`toolrun mcp serve everything:registry --http` (the real CLI; the tools the suite's scenarios call, in
tests/conformance/everything.py) is driven by the suite's server scenarios, once per specification
revision's requirement set: 2025-11-25 (the initialize handshake, sessions) and 2026-07-28 (stateless,
per-request `_meta`). Each set also runs the scenarios it reports without scoring (pending, extensions).
Every scenario must pass except those in tests/conformance/expected-failures.yml, each listed with its
reason; one listed there that passes fails the run too (a stale entry; checked here as well, since the
suite reports stale entries only for the scenarios it scores).

The client scenarios run tests/conformance/client.py (`MCPToolset` + `ToolExecutor`, as a user writes
them) against the suite's mock servers, for the same two requirement sets.

The suite is installed by `make conformance` (npm ci from the committed lockfile, with the Node.js 22 it
needs as a pinned npm package); a missing install is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from processes import free_port, stop

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "tests" / "conformance"
NODE = SUITE_DIR / "node_modules" / ".bin" / "node"
CLI = SUITE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = SUITE_DIR / "expected-failures.yml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def suite() -> Path:
    """The suite's CLI, installed by `npm ci` in tests/conformance when missing or older than the lockfile."""
    stamp = SUITE_DIR / "node_modules" / ".package-lock.json"
    lock = SUITE_DIR / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is required to install the MCP conformance suite (`make conformance`).")
        result = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=SUITE_DIR, capture_output=True, text=True, timeout=300
        )
        if result.returncode != 0:
            pytest.fail(f"npm ci failed in {SUITE_DIR}:\n{result.stderr[-2000:]}")
    if not NODE.exists() or not CLI.exists():
        pytest.fail(f"The MCP conformance suite is not installed in {SUITE_DIR} (`make conformance`).")
    return CLI


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """`toolrun mcp serve everything:registry --http` on a free port of 127.0.0.1, until the module ends."""
    port = free_port()
    path = os.pathsep.join([str(SUITE_DIR), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    process = subprocess.Popen(
        [sys.executable, "-m", "toolrun.mcp", "serve", "everything:registry", "--http", "--port", str(port)],
        env={**os.environ, "PYTHONPATH": path},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"toolrun mcp serve exited ({process.returncode}):\n{process.stderr.read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("toolrun mcp serve did not listen within 30 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def _scenario(checks: Path, output: Path) -> str:
    """The scenario a results folder is for: `server-tools-list-<time>`, `auth/dpop-<time>`."""
    return _STAMP.sub("", checks.parent.relative_to(output).as_posix()).removeprefix("server-")


def _failing(output: Path) -> dict[str, list[str]]:
    """Scenario → the ids of its failing checks (a failed MUST, or a warning: a missed SHOULD, which the
    suite's exit code also counts), read from the suite's checks.json files."""
    failing: dict[str, list[str]] = {}
    for checks in sorted(output.glob("**/checks.json")):
        bad = [c["id"] for c in json.loads(checks.read_text()) if c["status"] in ("FAILURE", "WARNING")]
        if bad:
            failing[_scenario(checks, output)] = bad
    return failing


def _expected(role: str) -> set[str]:
    entries: list[str] = yaml.safe_load(BASELINE.read_text())[role]
    return set(entries)


def _unexpected(output: Path, role: str) -> dict[str, list[str]]:
    expected = _expected(role)
    unexpected = {
        scenario: [check for check in checks if f"{scenario}:{check}" not in expected]
        for scenario, checks in _failing(output).items()
        if scenario not in expected
    }
    return {scenario: checks for scenario, checks in unexpected.items() if checks}


def _stale(output: Path, role: str) -> list[str]:
    """The entries of expected-failures.yml that passed in this run: a scenario that ran without a failing
    check, or a `scenario:check` whose check succeeded. The suite reports these itself only for the
    scenarios it scores; the extensions' scenarios (io.modelcontextprotocol/tasks) it runs unscored."""
    ran = {_scenario(path, output): json.loads(path.read_text()) for path in output.glob("**/checks.json")}
    stale = []
    for entry in sorted(_expected(role)):
        if entry in ran:
            if not any(c["status"] in ("FAILURE", "WARNING") for c in ran[entry]):
                stale.append(entry)
            continue
        scenario, _, check = entry.partition(":")
        statuses = {c["status"] for c in ran.get(scenario, ()) if c["id"] == check}
        if check and statuses == {"SUCCESS"}:
            stale.append(entry)
    return stale


@pytest.mark.timeout(420)
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_server_scenarios_pass(suite: Path, server_url: str, revision: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            str(NODE),
            str(suite),
            "server",
            "--url",
            server_url,
            "--requirements",
            revision,
            "--expected-failures",
            str(BASELINE),
            "--output-dir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    unexpected = _unexpected(tmp_path, "server")
    assert not unexpected, f"scenarios failing against toolrun ({revision}): {unexpected}"
    stale = _stale(tmp_path, "server")
    assert not stale, f"listed in {BASELINE.name} but passing ({revision}): {stale}"
    assert result.returncode == 0, (
        f"the conformance suite exited {result.returncode} ({revision}):\n{result.stdout[-6000:]}"
    )
    ran = {path.parent.name for path in tmp_path.glob("**/checks.json")}
    assert len(ran) >= 30, f"only {len(ran)} scenarios ran"


@pytest.mark.timeout(420)
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_client_scenarios_pass(suite: Path, revision: str, tmp_path: Path) -> None:
    client = f"{sys.executable} {SUITE_DIR / 'client.py'}"
    result = subprocess.run(
        [
            str(NODE),
            str(suite),
            "client",
            "--command",
            client,
            "--requirements",
            revision,
            "--expected-failures",
            str(BASELINE),
            "--output-dir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    unexpected = _unexpected(tmp_path, "client")
    assert not unexpected, f"scenarios failing against toolrun's client ({revision}): {unexpected}"
    stale = _stale(tmp_path, "client")
    assert not stale, f"listed in {BASELINE.name} but passing ({revision}): {stale}"
    assert result.returncode == 0, (
        f"the conformance suite exited {result.returncode} ({revision}):\n{result.stdout[-6000:]}"
    )
    passed = {_scenario(path, tmp_path) for path in tmp_path.glob("**/checks.json")} - _expected("client")
    assert {"tools_call", "json-schema-2020-12-preservation"} <= passed
