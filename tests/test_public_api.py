"""The public surface of `toolrun` is a contract: pin it, and keep `import toolrun` light."""

from __future__ import annotations

import subprocess
import sys

import toolrun

EXPECTED = {
    "Agent",
    "ArgumentsError",
    "ErrorCode",
    "SchemaError",
    "Tool",
    "ToolAlreadyExistsError",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutor",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolResult",
    "ToolrunError",
    "__version__",
    "tool",
}

ARCHITECTURE_NAMES = {
    "tool",
    "Tool",
    "ToolRegistry",
    "ToolCall",
    "ToolContext",
    "ToolResult",
    "ToolError",
    "ErrorCode",
    "ToolExecutor",
    "Agent",
    "ToolrunError",
    "ToolAlreadyExistsError",
}


def test_all_is_exactly_the_public_surface() -> None:
    assert set(toolrun.__all__) == EXPECTED
    for name in toolrun.__all__:
        assert getattr(toolrun, name) is not None


def test_architecture_contract_names_are_importable() -> None:
    assert set(toolrun.__all__) >= ARCHITECTURE_NAMES


def test_every_public_name_has_a_docstring() -> None:
    for name in toolrun.__all__:
        obj = getattr(toolrun, name)
        if callable(obj):
            assert obj.__doc__, name


def test_import_is_light() -> None:
    heavy = ["openai", "anthropic", "mcp", "fastapi", "starlette", "httpx", "sqlalchemy", "redis", "uvicorn"]
    heavy += ["toolrun.server", "toolrun.mcp", "toolrun.integrations", "toolrun.apps"]
    code = f"import sys, toolrun, json\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_content_names_of_the_contract() -> None:
    from toolrun import content

    names = {"Text", "Image", "Audio", "File", "ResourceLink", "ToolOutput"}
    assert names <= set(content.__all__)
    for name in content.__all__:
        assert getattr(content, name) is not None
        obj = getattr(content, name)
        if isinstance(obj, type):
            assert obj.__doc__, name
