"""The pipeline: plan → execute_tools / execute_queries / respond, on LangGraph, gated by toolrun.

The model is toolrun's `ScriptedModel`-style `FunctionModel` below unless `TOOLRUN_MODEL` names a real one
(e.g. `TOOLRUN_MODEL=openai:gpt-4o-mini`): the planner works with any model, native tool calling or not.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from conference_assistant.tools import MISSING_IDENTIFIER, ConferenceBackend, build_registry
from toolrun import ToolContext, ToolExecutor, ToolRegistry
from toolrun.agent._planner import answer_prompt
from toolrun.integrations.langgraph import PlannedCallsNode, PlannerNode, plan_router
from toolrun.models import FunctionModel, Message, Model, ModelRequest, UserMessage, infer_model

logger = logging.getLogger("conference_assistant")

INSTRUCTIONS = (
    "You are the assistant of a developer conference. You help attendees with their registration and "
    "the programme. Never guess an attendee's e-mail address or registration id: ask for it."
)

FRIENDLY_FAILURE = (
    "Sorry, I couldn't reach the conference systems just now. Nothing was changed; please try again in "
    "a few minutes."
)
FRIENDLY_RATE_LIMIT = "I've already sent several e-mails for you recently; please try again a bit later."
ASK_IDENTIFIER = "Could you tell me the e-mail address you registered with, or your registration id?"


class AssistantState(TypedDict, total=False):
    question: str
    intent: str
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    needs_user_input: bool
    input_request: str | None
    plan_error: str | None
    answer: str


# ---------------------------------------------------------------------------------------------------------
# The scripted model (the default): plans with rules, answers from the tool results


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_REG_ID = re.compile(r"\bREG-\d+\b", re.IGNORECASE)


def _plan_for(question: str) -> dict[str, Any]:
    q = question.lower()
    email, reg = _EMAIL.search(question), _REG_ID.search(question)
    ident: dict[str, Any] = {}
    if reg:
        ident["registration_id"] = reg.group(0).upper()
    elif email:
        ident["email"] = email.group(0)
    calls: list[dict[str, Any]] = []
    if any(w in q for w in ("session", "talk", "programme", "schedule")) and "email" not in q:
        topic = q.split("about", 1)[1].strip(" ?.") if "about" in q else ""
        calls.append({"tool": "search_sessions", "args": {"topic": topic}, "reason": "find sessions"})
    elif "registration" in q or "ticket" in q or "registered" in q:
        if not ident:
            return {
                "intent": "registration",
                "tool_calls": [],
                "needs_user_input": True,
                "input_request": ASK_IDENTIFIER,
            }
        if "send" in q or "resend" in q or "e-mail" in q or "email me" in q:
            if "registration_id" not in ident:
                calls.append({"tool": "lookup_registration", "args": ident, "reason": "find the id"})
            else:
                calls.append({"tool": "send_registration_email", "args": ident, "reason": "resend"})
        else:
            calls.append({"tool": "lookup_registration", "args": ident, "reason": "look it up"})
    return {"intent": "help", "tool_calls": calls, "needs_user_input": False, "input_request": None}


def _answer_for(results_text: str) -> str:
    lines = []
    for line in results_text.splitlines():
        if "EXECUTION_FAILED" in line or "TIMEOUT" in line:
            lines.append(FRIENDLY_FAILURE)
        elif "RATE_LIMITED" in line:
            lines.append(FRIENDLY_RATE_LIMIT)
        elif MISSING_IDENTIFIER in line:
            lines.append(ASK_IDENTIFIER)
        elif "NOT_REGISTERED" in line:
            lines.append("I couldn't find a registration with those details; could you check them?")
        elif line.startswith("- lookup_registration ->"):
            data = json.loads(line.split("->", 1)[1])
            lines.append(
                f"Your registration {data['registration_id']} ({data['ticket']}) is {data['status']}."
            )
        elif line.startswith(("- send_registration_email ->", "- send_schedule_email ->")):
            lines.append("Done: the e-mail is on its way to the address you registered with.")
        elif line.startswith("- search_sessions ->"):
            sessions = json.loads(line.split("->", 1)[1])
            lines.append(
                "; ".join(f"{s['time']} {s['title']} (room {s['room']})" for s in sessions)
                or "I found no session on that topic."
            )
    return " ".join(dict.fromkeys(lines)) or "How can I help you with the conference?"


def scripted_reply(messages: list[Message], tools: list[Any]) -> str:
    last = messages[-1].content if messages else ""
    if isinstance(last, str) and last.startswith("The tools ran."):
        body = last.split("Their results:\n", 1)[1].rsplit("\n\nNow answer", 1)[0]
        return _answer_for(body)
    return json.dumps(_plan_for(last if isinstance(last, str) else ""))


def default_model() -> Model:
    """`TOOLRUN_MODEL` (any toolrun model string) if set, else the scripted model."""
    name = os.environ.get("TOOLRUN_MODEL")
    return infer_model(name) if name else FunctionModel(scripted_reply, name="conference-scripted")


# ---------------------------------------------------------------------------------------------------------
# Nodes and graph


def respond_node(model: Model) -> Any:
    """Writes `answer`: the question for the user, a friendly failure, or the model's answer from the
    tool results (never a stack trace or an exception's text)."""

    async def respond(state: AssistantState) -> dict[str, Any]:
        if state.get("needs_user_input"):
            return {"answer": state.get("input_request") or ASK_IDENTIFIER}
        results = state.get("tool_results") or []
        if state.get("plan_error"):
            return {
                "answer": "Sorry, I couldn't work out how to help with that just now. Could you rephrase?"
            }
        if any(r.get("code") == MISSING_IDENTIFIER for r in results):
            return {"answer": ASK_IDENTIFIER, "needs_user_input": True, "input_request": ASK_IDENTIFIER}
        text = "\n".join(f"- {r['tool']} -> {r['content']}" for r in results)
        try:
            reply = await model.request(
                ModelRequest(
                    [UserMessage(content=state.get("question", "")), UserMessage(content=answer_prompt(text))]
                )
            )
            answer = reply.text.strip()
        except Exception as exc:  # the model is down: still answer the user
            logger.warning("answer model failed: %s", type(exc).__name__)
            answer = ""
        if not answer:
            answer = FRIENDLY_FAILURE if any(not r.get("ok") for r in results) else "Done."
        return {"answer": answer}

    return respond


def build_graph(
    *,
    model: Model | None = None,
    backend: ConferenceBackend | None = None,
    registry: ToolRegistry | None = None,
    executor: ToolExecutor | None = None,
    checkpointer: Any = None,
) -> Any:
    """The compiled graph. Tools get `backend` as `ctx.deps`; the user is `configurable.user_id`."""
    model = model or default_model()
    registry = registry or build_registry()
    executor = executor or ToolExecutor(registry)
    deps = backend or ConferenceBackend()

    def context(state: Any, config: Any) -> ToolContext[Any]:
        user = (config.get("configurable") or {}).get("user_id")
        return ToolContext(user_id=str(user) if user else None, deps=deps)

    graph = StateGraph(AssistantState)
    graph.add_node("plan", PlannerNode(model, registry, instructions=INSTRUCTIONS, input_key="question"))
    graph.add_node("execute_tools", PlannedCallsNode(executor, context=context))
    graph.add_node("execute_queries", PlannedCallsNode(executor, context=context))
    graph.add_node("respond", respond_node(model))
    graph.add_edge(START, "plan")
    graph.add_conditional_edges(
        "plan", plan_router(registry), ["execute_tools", "execute_queries", "respond"]
    )
    graph.add_edge("execute_tools", "respond")
    graph.add_edge("execute_queries", "respond")
    graph.add_edge("respond", END)
    return graph.compile(checkpointer=checkpointer)
