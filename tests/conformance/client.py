"""toolrun's MCP client (`MCPToolset` + `ToolExecutor`) as the conformance suite's client under test.

The suite runs `python client.py <server-url>` with `MCP_CONFORMANCE_SCENARIO` set, against its own mock
server. The client does what a toolrun user does: import the remote tools into a registry and call them
through the executor (a remote tool without a read-only hint needs a person's approval first: this client
approves, as the person would).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from toolrun import ToolCall, ToolContext, ToolExecutor, ToolRegistry
from toolrun.mcp import MCPToolset

CTX = ToolContext(user_id="conformance")


async def call(executor: ToolExecutor, name: str, arguments: dict[str, Any]) -> None:
    result = await executor.execute(ToolCall(name=name, arguments=arguments), CTX)
    if result.status == "confirmation_required" and result.confirmation_id is not None:
        result = await executor.approve(result.confirmation_id, CTX)
    print(name, result.status, result.render()[:200], file=sys.stderr)


async def main(url: str, scenario: str) -> None:
    registry = ToolRegistry()
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    async with MCPToolset(url, trusted=True, connect_timeout=60.0) as remote:
        tools = await remote.register(registry)
        executor = ToolExecutor(registry)
        names = [tool.name for tool in tools]
        print("tools:", names, file=sys.stderr)
        if scenario in ("initialize", "json-schema-ref-no-deref"):
            return
        if scenario == "json-schema-2020-12-preservation":
            focal = registry.get("json_schema_2020_12_tool")
            await call(executor, "json_schema_echo", {"schema": focal.parameters})
            return
        if context.get("toolCalls"):  # the calls the scenario asks for, as it gives them
            for wanted in context["toolCalls"]:
                await call(executor, wanted["name"], wanted["arguments"])
            return
        if scenario == "sep-2322-client-request-state":  # every tool, each without arguments
            for name in names:
                await call(executor, name, {})
            return
        if "valid_tool" in names:  # http-invalid-tool-headers: the tools with invalid headers are dropped
            await call(executor, "valid_tool", {"region": "us-west1"})
            return
        if names:  # tools_call's add_numbers takes a and b; the other scenarios' tools take nothing
            properties = tools[0].parameters.get("properties", {})
            await call(executor, names[0], {"a": 2, "b": 3} if "a" in properties else {})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
