"""`bench/langgraph.py` runs (a one-round smoke run: its checks verify every row does the same work)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_langgraph_bench_smoke_run() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "langgraph.py"),
            "--rounds",
            "1",
            "--target-ms",
            "1",
            "--no-json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    for row in ("graph_only", "floor", "langgraph_toolnode", "toolrun_node"):
        assert row in out.stdout
    assert out.stdout.count("net of the graph's own cost") == 2
