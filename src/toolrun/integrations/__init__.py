"""Doors from other frameworks to toolrun's executor and gates.

- `toolrun.integrations.langchain` (extra `langchain`): toolrun tools as LangChain `StructuredTool`s whose
  calls go through a `ToolExecutor`, and LangChain tools as toolrun `Tool`s.
- `toolrun.integrations.langgraph` (extra `langgraph`): an `execute_tools` node for message graphs
  (confirmations through `interrupt()`), a planner node and its router for graphs without native tools.
- `toolrun.integrations.dbos` (extra `dbos`): `DurableAgent`, agent runs as DBOS workflows that survive
  the process; background jobs (`@tool(background=True)`).

Nothing here is imported by `import toolrun`: import the submodule you use.
"""
