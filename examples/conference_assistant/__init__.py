"""The conference assistant (seed P3-01) as a LangGraph pipeline on toolrun.

plan (toolrun planner mode) → execute_tools / execute_queries (toolrun's executor) / respond.
State keys: `tool_calls`, `tool_results`, `needs_user_input`, `input_request` (and `question`, `intent`,
`plan_error`, `answer`). Run it: `python examples/conference_assistant "Where is my registration? REG-1001"`.
"""

from conference_assistant.graph import AssistantState, build_graph, default_model, respond_node
from conference_assistant.tools import ConferenceBackend, build_registry

__all__ = [
    "AssistantState",
    "ConferenceBackend",
    "build_graph",
    "build_registry",
    "default_model",
    "respond_node",
]
