"""MCP both ways, through the same gates (needs the `mcp` extra: `pip install 'toolrun[mcp]'`).

Serve a registry (every `tools/call` through a `ToolExecutor`: validation, roles, confirmation with the
person behind the client, rate limits, timeouts, cache, audit, events):

```python
server = create_server(registry, executor=executor, principal=ToolContext(user_id="me"))
await serve_stdio(server)                                             # Claude Desktop, IDEs
app = create_http_app(server, resolve_principal=principal_for_token)  # Streamable HTTP at /mcp
mount_mcp(your_app, server, resolve_principal=principal_for_token)    # inside your Starlette/FastAPI app
```

Bring a remote MCP server's tools under toolrun's executor:

```python
async with MCPToolset("http://127.0.0.1:8000/mcp", prefix="remote") as remote:
    await remote.register(registry)          # or: toolset = await import_tools(registry, target, ...)
```

A `@tool(background=True)` tool called by a client that declares the MCP Tasks extension
(`io.modelcontextprotocol/tasks`, SEP-2663) runs as a task (`tasks/get`, `tasks/update`, `tasks/cancel`); the
`MCPToolset` declares it and waits for the tasks a server answers with.

From the shell: `toolrun mcp serve module:registry [--http --host --port]` or `python -m toolrun.mcp`.
"""

from toolrun.mcp._client import MCPToolset, import_tools
from toolrun.mcp._http import MCPHTTPEndpoint, PrincipalResolver, create_http_app, mount_mcp
from toolrun.mcp._server import ToolrunMCPServer, create_server, serve_stdio
from toolrun.mcp._tasks import MCPTaskStore, MemoryTaskStore

__all__ = [
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
