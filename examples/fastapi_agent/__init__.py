"""The seed's FastAPI agent ("Agent Tools and LLM-Based Tool Selection") on LangGraph + toolrun.

`POST /agent/chat` and `POST /agent/stream`; tools registered with the seed's `(args, user_context)`
contract; the planner picks a tool or none; the answer is written from the results; every call runs
through toolrun's executor. Run it: `python examples/fastapi_agent` (serves http://127.0.0.1:8000).
"""

from fastapi_agent.agent import build_agent, default_model
from fastapi_agent.app import create_app
from fastapi_agent.tools import SeedToolRegistry, default_tools

__all__ = ["SeedToolRegistry", "build_agent", "create_app", "default_model", "default_tools"]
