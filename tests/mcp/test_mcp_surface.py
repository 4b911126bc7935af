"""The public surface of `toolrun.mcp`, and `import toolrun` staying free of MCP."""

from __future__ import annotations

import subprocess
import sys

import toolrun.mcp


def test_exported_names() -> None:
    assert sorted(toolrun.mcp.__all__) == [
        "MCPHTTPEndpoint",
        "MCPTaskStore",
        "MCPToolset",
        "MemoryTaskStore",
        "PrincipalResolver",
        "ToolrunMCPServer",
        "create_http_app",
        "create_server",
        "import_tools",
        "mount_mcp",
        "serve_stdio",
    ]
    for name in toolrun.mcp.__all__:
        assert getattr(toolrun.mcp, name) is not None


def test_import_toolrun_does_not_import_mcp() -> None:
    code = (
        "import sys, toolrun; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'toolrun.mcp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"
