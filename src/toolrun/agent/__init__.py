"""The agent loop: native tool calling and planner mode, pause and resume, streaming events."""

from toolrun.agent._agent import Agent
from toolrun.agent._boundary import CheckedCalls, OutputLimits, check_calls
from toolrun.agent._compact import CompactToolResults, HistoryPolicy
from toolrun.agent._events import (
    AgentEvent,
    ConfirmationRequired,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
)
from toolrun.agent._extras import SEARCH_TOOL_NAME, PromptSource, loaded_tools, make_search_tool
from toolrun.agent._planner import Plan, PlannedCall
from toolrun.agent._run import (
    AgentRun,
    Approve,
    Deny,
    InvalidDecisionError,
    InvalidRunError,
    PendingConfirmation,
    RunSignatureError,
    RunStatus,
    ToolCallRecord,
)

__all__ = [
    "SEARCH_TOOL_NAME",
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Approve",
    "CheckedCalls",
    "CompactToolResults",
    "ConfirmationRequired",
    "Deny",
    "HistoryPolicy",
    "InvalidDecisionError",
    "InvalidRunError",
    "OutputLimits",
    "PendingConfirmation",
    "Plan",
    "PlannedCall",
    "PromptSource",
    "RunFinished",
    "RunSignatureError",
    "RunStatus",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallRecord",
    "ToolCallStarted",
    "check_calls",
    "loaded_tools",
    "make_search_tool",
]
