"""Planner mode: the model answers with a JSON plan instead of native tool calls.

For models without native tool calling (and for teams who want one explicit planning step). The model
sees the tool descriptions and must answer with one JSON object:

```json
{"intent": "what the user wants",
 "tool_calls": [{"tool": "search_tasks", "args": {"query": "milk"}, "reason": "find the task"}],
 "needs_user_input": false,
 "input_request": null}
```

A plan that does not parse or validate gets one repair request that quotes the problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "PlanError",
    "PlannedCall",
    "PlannerOutput",
    "answer_prompt",
    "parse_plan",
    "planner_prompt",
    "repair_prompt",
]


class PlannedCall(BaseModel):
    """One tool call in a plan."""

    model_config = ConfigDict(extra="forbid")
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class PlannerOutput(BaseModel):
    """What the model intends: tool calls to make, or a question for the user."""

    model_config = ConfigDict(extra="forbid")
    intent: str = ""
    tool_calls: list[PlannedCall] = Field(default_factory=list)
    needs_user_input: bool = False
    input_request: str | None = None

    @model_validator(mode="after")
    def _question_needs_text(self) -> PlannerOutput:
        if self.needs_user_input and not (self.input_request or "").strip():
            raise ValueError("needs_user_input is true, so input_request must say what to ask the user")
        return self


class PlanError(ValueError):
    """The model's answer is not a valid plan; the message says why, for the repair request."""


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_object(text: str) -> Any:
    """The JSON object in a model's answer: the whole text, a fenced block, or the outermost braces."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    last: Exception | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError) as exc:
            last = exc
    raise PlanError(f"the answer is not a JSON object ({last})")


def parse_plan(text: str) -> PlannerOutput:
    """Parse and validate a plan, or raise `PlanError` saying what is wrong."""
    data = _json_object(text)
    if not isinstance(data, dict):
        raise PlanError(f"the answer must be a JSON object, not {type(data).__name__}")
    try:
        return PlannerOutput.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(plan)'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:10]
        )
        raise PlanError(problems) from None


PLAN_FORMAT = """Answer with ONE JSON object and nothing else, of this form:
{"intent": "<what the user wants, in a few words>",
 "tool_calls": [{"tool": "<tool name>", "args": {<arguments>}, "reason": "<why>"}],
 "needs_user_input": false,
 "input_request": null}
Rules:
- Use only the tools listed above, with the parameters they declare.
- If a required value is missing (an email, an id, a date the user did not give), do not guess: set
  "needs_user_input": true, put the question in "input_request", and leave "tool_calls" empty.
- If no tool is needed, leave "tool_calls" empty."""


def planner_prompt(instructions: str | None, tools_description: str) -> str:
    """The system prompt for the planning request."""
    head = f"{instructions.strip()}\n\n" if instructions else ""
    return f"{head}You can use these tools:\n{tools_description or '(no tools)'}\n\n{PLAN_FORMAT}"


def repair_prompt(problem: str) -> str:
    """The follow-up asking the model to fix an invalid plan."""
    return (
        f"That plan is not valid: {problem}.\nReply again with only the corrected JSON object.\n{PLAN_FORMAT}"
    )


def answer_prompt(results_text: str) -> str:
    """The request for the final answer, given the tools' results."""
    return (
        "The tools ran. Their results:\n"
        f"{results_text or '(no tools were called)'}\n\n"
        "Now answer the user in plain language, using these results. Do not output JSON."
    )
