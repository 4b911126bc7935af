"""Request and response bodies of the HTTP API (they make the OpenAPI schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from toolrun._unicode import json_problem, text_problem
from toolrun.server._text import MAX_MESSAGE_CHARS, TITLE_PATTERN, message_problem, title_problem

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


def _valid_message(text: str) -> str:
    problem = message_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _valid_text(text: str | None) -> str | None:
    problem = None if text is None else text_problem(text)
    if problem is not None:
        raise PydanticCustomError("invalid_unicode", "The text {problem}.", {"problem": problem})
    return text


def _valid_json(value: dict[str, Any] | None) -> dict[str, Any] | None:
    problem = None if value is None else json_problem(value)
    if problem is not None:
        raise PydanticCustomError("invalid_unicode", "{problem}.", {"problem": problem})
    return value


ClientText = Annotated[str, AfterValidator(_valid_text)]
"""A client's text: valid Unicode, no NUL (see `toolrun._unicode`; 422 naming the field otherwise)."""
ClientArguments = Annotated[dict[str, Any], AfterValidator(_valid_json)]
"""A client's JSON object, every string (keys too) valid Unicode without NUL (422 naming the path)."""


def _valid_title(text: str) -> str:
    problem = title_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


class ChatRequest(BaseModel):
    """A new user message, in a new conversation or an existing one."""

    model_config = ConfigDict(extra="forbid")

    message: Annotated[str, AfterValidator(_valid_message)] = Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="What the user says: not blank, valid Unicode, no NUL character.",
        # the same rule in the schema (checked by _valid_message, which also refuses lone surrogates)
        json_schema_extra={"pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"},
    )
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
    arguments: ClientArguments | None = Field(
        default=None,
        description="Approving only: the person's edited arguments (all of them). Validated and previewed "
        "again; the approval is bound to them and the model is told what changed.",
    )
    reason: ClientText | None = Field(
        default=None,
        max_length=2000,
        description="Declining only: why, in the person's words, for the model.",
    )


class EditRequest(BaseModel):
    """Edited arguments to preview before approving them."""

    model_config = ConfigDict(extra="forbid")

    arguments: ClientArguments = Field(
        description="The call's arguments, all of them, as the person edited them."
    )


class EditPreview(BaseModel):
    """What approving with the edited arguments would do (nothing is decided)."""

    preview: str = Field(description="The text the person would approve.")
    summary: str
    arguments: dict[str, Any] = Field(description="The validated arguments.")
    changes: list[str] = Field(description="One line per changed argument: `name: old → new`.")


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
    interrupted: bool = Field(
        default=False,
        description="An answer the server's crash cut short: what the assistant had said until then.",
    )
    content_items: list[dict[str, Any]] | None = Field(
        default=None,
        description="A tool result's images and files as the stream showed them (`url` under "
        "/api/v1/results/, readable by the owner until the result expires).",
    )
    stopped: bool = Field(
        default=False,
        description="An answer the user stopped (POST /api/v1/conversations/{id}/stop): what the assistant "
        "had said until then.",
    )


class PendingItem(BaseModel):
    """A call held for the user's decision: the server's own record of it."""

    confirmation_id: str
    tool: str
    arguments: Any
    summary: str
    preview: str | None = Field(
        default=None,
        description="What the person approves, written by the tool from the server's records (show it "
        "instead of the summary when present).",
    )
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
        "deadline_exceeded, budget_exceeded, stopped (the user stopped it: POST "
        "/api/v1/conversations/{id}/stop)"
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


class PanelFace(BaseModel):
    title: str
    tool: str


class AppFace(BaseModel):
    """`GET /api/v1/app`: what the page shows of the App served."""

    name: str
    title: str
    intro: str
    starters: list[str]
    panel: PanelFace | None
    demo: bool


class PanelResult(BaseModel):
    """`GET /api/v1/app/panel`: the panel tool's result for this user (as any tool call's)."""

    title: str
    tool: str
    status: str
    value: Any = None
    error: dict[str, Any] | None = None


class Me(BaseModel):
    user_id: str
    name: str
    roles: list[str]
    model: ModelInfo


class StopAccepted(BaseModel):
    """A stop recorded for the conversation's working run; the run ends `stopped` (its stream says when)."""

    conversation_id: str
    run_id: str
    status: Literal["stopping"] = "stopping"


class ConversationRename(BaseModel):
    """A new title for a conversation."""

    model_config = ConfigDict(extra="forbid")

    title: Annotated[str, AfterValidator(_valid_title)] = Field(
        min_length=1,
        max_length=120,
        description="The title a person gave it (trimmed): not blank, no control, zero-width or direction "
        "character.",
        json_schema_extra={"pattern": TITLE_PATTERN},  # the rule `_valid_title` checks
    )
