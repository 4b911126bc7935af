"""The examples run as shipped (with the scripted model: no provider is configured in tests).

README and docs code blocks are run, with their printed output checked, by tests/test_docs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_task_agent_example_runs_without_a_provider() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OPENAI_", "ANTHROPIC_"))}
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "task_agent.py")],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "tool add_task: ok" in out.stdout
    assert "tool delete_task: error Error CONFIRMATION_DENIED" in out.stdout  # no terminal: denied, never run
    assert out.stdout.rstrip().splitlines()[-2].startswith("[completed]")
