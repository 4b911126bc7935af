"""Tool options are typed keyword arguments: mypy catches a misspelt or mistyped option."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mypy import api

from toolrun import Tool, ToolRegistry, tool
from toolrun.exceptions import ToolDefinitionError
from toolrun.tools import ToolOptions, ToolOptionsKwargs

SNIPPET = '''
from toolrun import Tool, ToolRegistry, tool

@tool(destructive=True, timeout=5.0, rate_limit="5/minute", tags=["admin"], coerce=False)
def fine(x: int) -> int:
    """Fine."""
    return x

@tool(destrutive=True)  # a typo
def typo(x: int) -> int:
    """Typo."""
    return x

Tool.from_schema("s", "S.", {"type": "object"}, read_only="yes")  # the wrong type
Tool.from_function(fine, retries=2, idempotent=True)
ToolRegistry().register(fine, cache_ttll=3)  # a typo

class Delete(Tool, destructive=True, timeoutt=3):  # a typo in a class keyword
    """Delete."""
    def run(self, x: int) -> int:
        return x

Delete(name="remove", retries=1)
Delete(nmae="remove")  # a typo
'''


@pytest.mark.timeout(300)
def test_mypy_reports_misspelt_and_mistyped_options(tmp_path: Path) -> None:
    source = tmp_path / "snippet.py"
    source.write_text(textwrap.dedent(SNIPPET).lstrip("\n"))
    cache = Path(__file__).resolve().parents[2] / ".mypy_cache"
    limit = sys.getrecursionlimit()
    try:
        stdout, stderr, status = api.run(
            [str(source), "--strict", "--no-error-summary", "--show-error-codes", "--cache-dir", str(cache)]
        )
    finally:
        sys.setrecursionlimit(limit)  # mypy raises it for the whole process; later tests rely on the default
    assert status == 1, stdout + stderr
    lines = sorted({int(line.split(":")[1]) for line in stdout.splitlines() if ": error:" in line})
    assert lines == [8, 13, 15, 17, 23], stdout
    assert '"destrutive"' in stdout and '"cache_ttll"' in stdout and '"nmae"' in stdout
    assert "read_only" in stdout


def test_the_typed_options_are_exactly_the_tool_options() -> None:
    assert set(ToolOptionsKwargs.__annotations__) == set(ToolOptions.__dataclass_fields__)


def test_a_misspelt_option_is_refused_at_run_time_too() -> None:
    def fine(x: int) -> int:
        """Fine."""
        return x

    with pytest.raises(ToolDefinitionError, match="unknown option"):
        tool(destrutive=True)(fine)  # type: ignore[call-overload]
    with pytest.raises(ToolDefinitionError, match="unknown option"):
        ToolRegistry().register(fine, cache_ttll=3)  # type: ignore[call-overload]
    assert Tool.from_function(fine, coerce=True).options.coerce


def test_every_option_is_typed_and_every_typed_option_exists() -> None:
    """The TypedDict and the dataclass stay in step (an option added to one only is caught here)."""
    from toolrun.tools._options import ToolOptions, ToolOptionsKwargs

    assert set(ToolOptionsKwargs.__annotations__) == set(ToolOptions.__dataclass_fields__)
