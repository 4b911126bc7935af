"""The public surfaces of `toolrun.planning` and `toolrun.prompts`; `import toolrun` loads neither."""

from __future__ import annotations

import subprocess
import sys

import toolrun.planning
import toolrun.prompts


def test_planning_surface() -> None:
    assert set(toolrun.planning.__all__) == {
        "STRATEGIES",
        "Channel",
        "Kind",
        "Plan",
        "PlanStatus",
        "PlanStep",
        "Session",
        "StepStatus",
        "Strategy",
        "planning_section",
        "planning_tools",
        "register_kind",
        "render_current_plan",
    }
    for name in toolrun.planning.__all__:
        assert getattr(toolrun.planning, name) is not None


def test_prompts_surface() -> None:
    assert set(toolrun.prompts.__all__) == {"Prompt", "PromptError", "RenderedPrompt", "Section", "Template"}


def test_import_toolrun_stays_light() -> None:
    lazy = ("toolrun.planning", "toolrun.prompts", "toolrun.search", "sqlite3")
    code = f"import sys, toolrun; print(sorted(m for m in {lazy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
