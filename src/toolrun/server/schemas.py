"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

__all__ = [
    "ChatRequest",
    "ChatResponse",
    "ConversationDetail",
    "ConversationSummary",
    "DecisionRequest",
    "MessageView",
    "ModelInfo",
    "PendingItem",
]

MAX_MESSAGE_CHARS = 32_000


class ChatRequest(BaseModel):
    """A new user message, in a new conversation or an existing one."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="What the user says.")
    conversation_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Continue this conversation (omit for a new one).",
    )


class DecisionRequest(BaseModel):
    """The user's decision on a pending confirmation. `approve` must be a JSON boolean."""

    model_config = ConfigDict(extra="forbid")

    approve: StrictBool = Field(description="true runs the held call (once); false declines it.")


class ToolCallView(BaseModel):
    id: str | None
    name: str | None
    arguments: Any


class MessageView(BaseModel):
    """One message of a conversation: the user's, the assistant's (text, tool calls) or a tool result."""

    seq: int
    run_id: str
    role: Literal["user", "assistant", "tool", "system"]
    content: str
    tool_calls: list[ToolCallView] | None = None
    call_id: str | None = None
    tool_name: str | None = None
    is_error: bool | None = None


class PendingItem(BaseModel):
    """A call held for the user's decision: the server's own record of it."""

    confirmation_id: str
    tool: str
    arguments: Any
    summary: str
    expires_at: str = Field(description="ISO 8601 UTC.")
    run_id: str | None
    conversation_id: str | None


class ModelInfo(BaseModel):
    name: str
    demo: bool = Field(description="True for the offline demo model (not an LLM).")


class ChatResponse(BaseModel):
    """Where a run stands after a message or a decision, with the whole conversation."""

    conversation_id: str
    run_id: str
    status: str = Field(
        description="completed, awaiting_confirmation, needs_user_input, failed, max_steps, "
        "deadline_exceeded, budget_exceeded"
    )
    output: str | None
    error: str | None = None
    messages: list[MessageView]
    pending: list[PendingItem]
    model: ModelInfo


class PendingList(BaseModel):
    pending: list[PendingItem]


class ConversationSummary(BaseModel):
    id: str
    title: str
    created_at: str
    updated_at: str
    awaiting_confirmation: bool


class ConversationList(BaseModel):
    conversations: list[ConversationSummary]


class LastRun(BaseModel):
    run_id: str
    status: str


class ConversationDetail(ConversationSummary):
    last_run: LastRun | None
    messages: list[MessageView]
    pending: list[PendingItem]


class ToolList(BaseModel):
    format: str
    tools: list[dict[str, Any]]


class TaskView(BaseModel):
    id: str
    status: str
    title: str | None = None
    description: str | None = None
    priority: str | None = None
    eta: str | None = None
    tags: list[str] | None = None
    created_at: str | None = None
    updated_at: str | None = None
    attachments: list[dict[str, Any]] | None = None


class TaskList(BaseModel):
    tasks: list[TaskView]
    total: int
    applied_filters: dict[str, Any]


class Me(BaseModel):
    user_id: str
    name: str
    roles: list[str]
    model: ModelInfo
