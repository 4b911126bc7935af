"""Weather: an App whose tools live on another MCP server (`tools=[MCPToolset(...)]`), here an in-process
one, so the commands that show or serve the App's tools must fetch them first."""

from __future__ import annotations

from toolrun import ToolContext, ToolRegistry, tool
from toolrun.mcp import MCPToolset, create_server
from toolrun.server import App


@tool(read_only=True)
def forecast(city: str = "Paris", *, ctx: ToolContext) -> dict[str, str]:
    """Tomorrow's weather.

    Args:
        city: The city.
    """
    return {"city": city, "weather": "sunny"}


app = App(
    name="weather",
    title="Weather",
    tools=[MCPToolset(create_server(ToolRegistry([forecast])), trusted=True, prefix="met")],
)

down = App(name="down", title="Down", tools=[MCPToolset("http://127.0.0.1:9/mcp", prefix="met")])
"""An App whose remote server is not running."""
