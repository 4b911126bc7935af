"""The agent loop: native tool calling and planner mode, pause and resume, streaming events."""

from toolrun.agent._agent import Agent
from toolrun.agent._boundary import OutputLimits
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
from toolrun.agent._extras import PromptSource, make_search_tool
from toolrun.agent._run import (
    AgentRun,
    DecisionRefusedError,
    InvalidRunError,
    PendingCall,
    RunErrorCode,
    RunSignatureError,
    RunStatus,
    ToolCallRecord,
)
from toolrun.approvals import Approve, Deny, InvalidDecisionError  # the same objects: one decision grammar

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Approve",
    "CompactToolResults",
    "ConfirmationRequired",
    "DecisionRefusedError",
    "Deny",
    "HistoryPolicy",
    "InvalidDecisionError",
    "InvalidRunError",
    "OutputLimits",
    "PendingCall",
    "PromptSource",
    "RunErrorCode",
    "RunFinished",
    "RunSignatureError",
    "RunStatus",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallRecord",
    "ToolCallStarted",
    "make_search_tool",
]
