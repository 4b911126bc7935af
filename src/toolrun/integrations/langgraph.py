"""LangGraph nodes that run tool calls through toolrun's executor (extra `langgraph`).

`ToolrunNode(executor)` replaces `langgraph.prebuilt.ToolNode`: it answers every tool call of the last AI
message with exactly one `ToolMessage`, in call order, failures included, and runs nothing twice on a
resume. Calls that need a person's approval are held by the executor first and asked for in ONE
`interrupt()` shaped like LangChain's human-in-the-loop request; `Command(resume=...)` approves, edits or
rejects them, and an answer that does not fit exactly runs nothing and interrupts again. Progress reports
go to LangGraph's custom stream. `PlannerNode`, `plan_router` and `PlannedCallsNode` give graphs without
native tool calling toolrun's JSON plan.

The whole contract (interrupt and answer shapes, exactly-once, who is calling, progress): docs/langgraph.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import interrupt

from toolrun._sync import run_sync
from toolrun.agent._planner import PlanError, PlannerOutput, parse_plan, planner_prompt, repair_prompt
from toolrun.integrations.langchain import progress_to_stream, stream_writer, tool_message
from toolrun.models import AssistantMessage, Model, ModelRequest, UserMessage
from toolrun.models import SystemMessage as TRSystemMessage
from toolrun.registry import ToolSet
from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import ToolExecutor, _errors
from toolrun.store import PendingConfirmation
from toolrun.tools import ToolCall, ToolContext
from toolrun.tools._context import ProgressThrottle

__all__ = [
    "NodeContext",
    "PlannedCallsNode",
    "PlannerNode",
    "ToolrunNode",
    "plan_router",
    "run_batch",
]

_logger = logging.getLogger("toolrun.integrations.langgraph")

NodeContext = ToolContext[Any] | Callable[[Mapping[str, Any], RunnableConfig], ToolContext[Any]] | None
"""A fixed `ToolContext`, a function of (state, config) returning one, or None for
`config["configurable"]["user_id"]`. Its `conversation_id` defaults to the LangGraph thread id."""

_DECISIONS = ("approve", "edit", "reject")


def _thread_id(config: RunnableConfig | None) -> str | None:
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id")
    return str(thread) if thread is not None else None


def resolve_context(
    source: NodeContext, state: Mapping[str, Any], config: RunnableConfig
) -> ToolContext[Any]:
    """The `ToolContext` for one node run, its `conversation_id` defaulting to the thread id."""
    if isinstance(source, ToolContext):
        ctx = source
    elif source is not None:
        ctx = source(state, config)
    else:
        user = ((config or {}).get("configurable") or {}).get("user_id")
        ctx = ToolContext(user_id=str(user) if user is not None else None)
    thread = _thread_id(config)
    if ctx.conversation_id is None and thread is not None:
        ctx = ctx.evolve(conversation_id=thread, metadata={**ctx.metadata, "langgraph_thread_id": thread})
    return ctx


# ------------------------------------------------------------------------------------------------------
# The batch: hold every gated call, one interrupt, then run everything once


@dataclass(slots=True)
class _Held:
    index: int
    call: ToolCall
    confirmation_id: str
    summary: str
    preview: str | None = None
    """The text the person approves (the tool's preview from the application's records), if any."""
    fresh: bool = False
    """Held by this run of the node: no request listing this confirmation was shown before it, so an
    answer that names no confirmation id (a positional one) cannot have been given for it."""


def _needs_confirmation(executor: ToolExecutor, name: Any) -> bool:
    try:
        tool = executor.registry.find(name) if isinstance(name, str) else None
    except Exception:  # the executor reports a broken registry as the call's result
        return False
    return tool is not None and tool.options.requires_confirmation


def _same_arguments(stored: Any, sent: Any) -> bool:
    return bool(stored == (dict(sent) if isinstance(sent, Mapping) else sent))


async def _hold(
    executor: ToolExecutor, ctx: ToolContext[Any], calls: Sequence[ToolCall], gated: Sequence[int]
) -> tuple[list[_Held], dict[int, ToolResult]]:
    """Confirmations for the gated calls: the ones this node already holds (a re-run after resume), else
    new ones from the executor. Calls the executor refuses outright (access, arguments) are results."""
    existing: dict[str, PendingConfirmation] = {}
    listed: list[PendingConfirmation] = []
    try:  # without a user id, the executor lists those of "no user" held in this thread (conversation)
        listed = await executor.pending_confirmations(ctx)
    except Exception as exc:  # the store failed: hold the calls anew (nothing a resume answered runs)
        _logger.warning("Listing pending confirmations failed: %s", type(exc).__name__)
    for pending in listed:
        if pending.conversation_id != ctx.conversation_id:
            continue
        call_id = str(pending.call.get("id", ""))
        best = existing.get(call_id)
        if best is None or pending.created_at > best.created_at:
            existing[call_id] = pending
    held: list[_Held] = []
    done: dict[int, ToolResult] = {}
    for index in gated:
        call = calls[index]
        found = existing.get(call.id)
        if (
            found is not None
            and found.tool_name == call.name
            and _same_arguments(found.call.get("arguments"), call.arguments)
        ):
            held.append(_Held(index, call, found.id, found.summary, found.preview))
            continue
        result = await executor.execute(call, ctx)
        if result.status == "confirmation_required" and result.confirmation_id:
            try:
                record = await executor.confirmations.record(result.confirmation_id)
            except Exception:  # the summary is still there to show
                record = None
            preview = record.preview if record is not None else None
            summary = result.message or call.name
            held.append(_Held(index, call, result.confirmation_id, summary, preview, fresh=True))
        else:
            done[index] = result
    return held, done


def approval_request(held: Sequence[_Held], thread_id: str | None) -> dict[str, Any]:
    """The interrupt value: LangChain's HITL request shape, plus toolrun's ids."""
    return {
        "type": "toolrun.approval",
        "thread_id": thread_id,
        "action_requests": [
            {
                "name": h.call.name,
                "args": dict(h.call.arguments) if isinstance(h.call.arguments, Mapping) else h.call.arguments,
                "description": h.preview if h.preview is not None else h.summary,
                "summary": h.summary,
                "preview": h.preview,
                "confirmation_id": h.confirmation_id,
                "tool_call_id": h.call.id,
            }
            for h in held
        ],
        "review_configs": [{"action_name": h.call.name, "allowed_decisions": list(_DECISIONS)} for h in held],
    }


def _positional(answer: Any) -> bool:
    """Whether a resume value is LangChain's list of decisions (one per action, in order, no ids)."""
    return (
        isinstance(answer, Mapping) and set(answer) == {"decisions"} and isinstance(answer["decisions"], list)
    )


def read_decisions(
    answer: Any, held: Sequence[_Held], edits: dict[str, dict[str, Any]] | None = None
) -> tuple[dict[str, tuple[bool, str | None]], str | None]:
    """`{confirmation_id: (approved, message)}` from a resume value, or an error saying what is wrong; an
    edit reads as an approval, its arguments put in `edits` (`{confirmation_id: arguments}`) when given
    (without `edits`, an edit is refused).

    Strict on purpose: the value crosses a trust boundary (a client sends it), so anything that does not
    answer exactly the held calls, each with a boolean or an approve/edit/reject decision, is refused whole.
    """
    ids = [h.confirmation_id for h in held]
    names = {h.confirmation_id: h.call.name for h in held}
    decisions: dict[str, tuple[bool, str | None]] = {}
    found: dict[str, dict[str, Any]] = {}

    def one(value: Any, where: str, cid: str) -> tuple[bool, str | None] | str:
        if type(value) is bool:
            return value, None
        if isinstance(value, Mapping):
            kind = value.get("type")
            if kind == "edit" and edits is not None:
                got = _edited_arguments(value, names[cid], where)
                if isinstance(got, str):
                    return got
                found[cid] = got
                return True, None
            extra = set(value) - {"type", "message"}
            message = value.get("message")
            if kind in ("approve", "reject") and not extra and (message is None or isinstance(message, str)):
                return kind == "approve", message
            if kind in ("edit", "respond"):
                return (
                    f"{where}: '{kind}' is not accepted (an approval is bound to the exact call); "
                    "approve or reject"
                )
        return f"{where}: a decision must be true/false or {{'type': 'approve' | 'edit' | 'reject'}}"

    if _positional(answer):
        items = answer["decisions"]
        if len(items) != len(ids):
            return {}, f"expected {len(ids)} decisions (one per action request, in order), got {len(items)}"
        for i, (cid, item) in enumerate(zip(ids, items, strict=True)):
            got = one(item, f"decisions[{i}]", cid)
            if isinstance(got, str):
                return {}, got
            decisions[cid] = got
        if edits is not None:
            edits.update(found)
        return decisions, None
    if (
        isinstance(answer, Mapping)
        and set(answer) == {"decisions"}
        and isinstance(answer["decisions"], Mapping)
    ):
        answer = answer["decisions"]
    if isinstance(answer, Mapping) and answer:
        keys = set(answer)
        if keys != set(ids):
            unknown = len(keys - set(ids))
            missing = len(set(ids) - keys)
            return {}, (
                f"the decisions must name exactly the confirmation ids of this request "
                f"({unknown} unknown, {missing} missing)"
            )
        for cid in ids:
            got = one(answer[cid], f"decision for {cid}", cid)
            if isinstance(got, str):
                return {}, got
            decisions[cid] = got
        if edits is not None:
            edits.update(found)
        return decisions, None
    return {}, "expected {'decisions': [...]} or {confirmation_id: true | false}"


def _edited_arguments(value: Mapping[str, Any], name: Any, where: str) -> dict[str, Any] | str:
    """The arguments of LangChain's edit decision (`{"type": "edit", "edited_action": {"name", "args"}}`),
    or what is wrong with it. The tool cannot change, and nothing but a name and arguments is taken."""
    action = value.get("edited_action")
    if set(value) != {"type", "edited_action"} or not isinstance(action, Mapping):
        return f"{where}: an edit is {{'type': 'edit', 'edited_action': {{'name': ..., 'args': {{...}}}}}}"
    if not set(action) <= {"name", "args"} or not isinstance(action.get("args"), Mapping):
        return (
            f"{where}: 'edited_action' takes the tool's 'name' and all its 'args' (an object), nothing else"
        )
    if action.get("name", name) != name:
        return f"{where}: an edit cannot change the tool ({str(name)[:80]!r}); reject it instead"
    args = action["args"]
    if not all(isinstance(key, str) for key in args):
        return f"{where}: argument names must be strings"
    return dict(args)


async def _check_edits(
    executor: ToolExecutor, ctx: ToolContext[Any], held: Sequence[_Held], edits: Mapping[str, Any]
) -> str | None:
    """Validate and preview each edit again before anything runs: the error of the first one the tool
    refuses, else None. (A used or expired confirmation is left to its approval, which says so.)"""
    for i, h in enumerate(held):
        if h.confirmation_id not in edits:
            continue
        checked = await executor.preview_edit(h.confirmation_id, ctx, edits[h.confirmation_id])
        if checked.error is not None and checked.error.code == ErrorCode.INVALID_ARGUMENTS:
            return f"the edit of action {i} ({str(h.call.name)[:80]}) was refused: {checked.error.message}"
    return None


async def _withdraw(executor: ToolExecutor, ctx: ToolContext[Any], h: _Held) -> ToolResult:
    """End a held call that a positional answer was not given for: its confirmation (held by this run of
    the node, never shown) is consumed unused, so no later answer can take it, and the call does not run.
    The result carries the code and reason the executor gives an approval of a used id
    (`CONFIRMATION_NOT_FOUND`, `unknown_or_used`), and is audited as a refusal."""
    try:
        await executor.confirmations.withdraw(h.confirmation_id, ctx)
    except Exception as exc:  # it expires on its own; the call still does not run
        _logger.warning("Withdrawing an unshown confirmation failed: %s", type(exc).__name__)
    name = str(h.call.name)
    result = _errors.fail(
        h.call.id,
        name,
        ErrorCode.CONFIRMATION_NOT_FOUND,
        f"The user's decision answered an earlier approval request for {name!r} that is no longer open "
        "(already decided, expired, or answered again from an earlier checkpoint): it did not run.",
        recover_action="Call the tool again if it is still needed; the user will be asked anew.",
        details={"reason": "unknown_or_used"},
    )
    executor.audit_refusals([result], ctx)
    return result


async def run_batch(
    executor: ToolExecutor,
    calls: Sequence[ToolCall],
    ctx: ToolContext[Any],
    *,
    max_concurrency: int | None = None,
    thread_id: str | None = None,
    context_for: Callable[[ToolCall], ToolContext[Any]] | None = None,
) -> list[ToolResult]:
    """Run a batch of calls inside a LangGraph node: one result per call, in call order.

    If some calls need approval, nothing runs until one `interrupt()` listing them all is answered (see
    the module docstring); must then be called from a node of a graph with a checkpointer.
    `context_for(call)`, when given, is the context each call runs under (the same principal as `ctx`,
    e.g. with a progress reporter naming the call).
    """
    gated = [i for i, call in enumerate(calls) if _needs_confirmation(executor, call.name)]
    held, results = await _hold(executor, ctx, calls, gated) if gated else ([], {})
    decisions: dict[str, tuple[bool, str | None]] = {}
    edits: dict[str, dict[str, Any]] = {}
    unshown: set[str] = set()
    if held:
        request = approval_request(held, thread_id)
        error: str | None = None
        while True:
            answer = interrupt(request if error is None else {**request, "error": error})
            edits = {}
            decisions, error = read_decisions(answer, held, edits)
            if error is None and edits:
                error = await _check_edits(executor, ctx, held, edits)
            if error is None:
                break
            _logger.info("A resume value for %d held call(s) was refused: nothing ran", len(held))
        if _positional(answer):
            # A positional answer names no confirmation, so it is bound here to the ones that were shown:
            # those this node found still held. One held anew by this run (the shown one was used, decided
            # elsewhere or expired: a time-travelled or replayed resume) was never shown to anybody.
            unshown = {h.confirmation_id for h in held if h.fresh}
            if unshown:
                _logger.info("A positional resume answered %d call(s) no longer held: not run", len(unshown))

    async def decide(h: _Held) -> None:
        if h.confirmation_id in unshown:
            results[h.index] = await _withdraw(executor, ctx, h)
            return
        approved, message = decisions[h.confirmation_id]
        if approved:
            own = ctx if context_for is None else context_for(h.call)
            result = await executor.approve(h.confirmation_id, own, arguments=edits.get(h.confirmation_id))
        else:
            result = await executor.deny(h.confirmation_id, ctx, message)
        if not result.call_id:  # used, expired or someone else's: say so under this call's id
            result.call_id, result.tool_name = h.call.id, result.tool_name or str(h.call.name)
        results[h.index] = result

    free = [i for i in range(len(calls)) if i not in results and i not in {h.index for h in held}]

    async def run_free() -> None:
        out = await executor.execute_many(
            [calls[i] for i in free], ctx, max_concurrency=max_concurrency, context_for=context_for
        )
        for i, result in zip(free, out, strict=True):
            results[i] = result

    if held:
        async with asyncio.TaskGroup() as tg:
            for h in held:
                tg.create_task(decide(h))
            if free:
                tg.create_task(run_free())
    elif free:
        await run_free()
    return [results[i] for i in range(len(calls))]


# ------------------------------------------------------------------------------------------------------
# Nodes


def _pending_tool_calls(messages: Sequence[BaseMessage]) -> list[ToolCall]:
    """The last AI message's tool calls (and invalid ones) that no `ToolMessage` answers yet."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AIMessage):
            calls = [
                ToolCall(id=str(c.get("id") or ""), name=c["name"], arguments=c.get("args") or {})
                for c in message.tool_calls
            ]
            calls += [
                ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""), arguments=c.get("args"))
                for c in message.invalid_tool_calls
            ]
            return [c for c in calls if c.id not in answered]
    return []


class _ProgressStream:
    """Per-call progress reporters that write to LangGraph's custom stream, throttled; closed (silent)
    once the batch is over, so a call still running after its timeout reports to nobody."""

    def __init__(self, ctx: ToolContext[Any], writer: Callable[[Any], None], interval: float) -> None:
        self._ctx = ctx
        self._writer = writer
        self._interval = interval
        self._throttles: list[ProgressThrottle] = []

    def context_for(self, call: ToolCall) -> ToolContext[Any]:
        throttle = progress_to_stream(self._writer, call, self._ctx, self._interval)
        self._throttles.append(throttle)
        return self._ctx.evolve(progress=throttle)

    async def aclose(self) -> None:
        """The batch is over: each call's last report goes out, then nothing more."""
        for throttle in self._throttles:
            await throttle.aclose()


class _Node(Runnable[Any, dict[str, Any]]):
    """A graph node usable from async graphs (`ainvoke`, `astream`) and sync ones (`invoke`: the async
    code runs in a fresh event loop, so stores bound to another loop, such as SQL engines, do not fit)."""

    progress_interval: float = 0.1

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        raise NotImplementedError

    async def _run_batch(
        self,
        executor: ToolExecutor,
        calls: Sequence[ToolCall],
        ctx: ToolContext[Any],
        config: RunnableConfig,
        max_concurrency: int | None,
    ) -> list[ToolResult]:
        """`run_batch`, each call's progress written to the graph's custom stream."""
        writer = stream_writer()
        stream = _ProgressStream(ctx, writer, self.progress_interval) if writer is not None else None
        try:
            return await run_batch(
                executor,
                calls,
                ctx,
                max_concurrency=max_concurrency,
                thread_id=_thread_id(config),
                context_for=stream.context_for if stream is not None else None,
            )
        finally:
            if stream is not None:
                await stream.aclose()

    async def __call__(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return await self._arun(state, config)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self._arun(input, config or {})

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = run_sync(self._arun(input, config or {}))
        return result


class ToolrunNode(_Node):
    """An `execute_tools` node for message graphs: the last AI message's tool calls through a
    `ToolExecutor`, one `ToolMessage` each (see the module docstring).

    Args:
        executor: The executor (its registry holds the tools the model may call).
        context: Who is calling (see `NodeContext`).
        messages_key: The state key holding the messages (`"messages"`).
        max_concurrency: Most calls running at once (None: no limit; `sequential` tools run alone).
        progress_interval: Least seconds between two progress chunks of one call on the custom stream.
    """

    def __init__(
        self,
        executor: ToolExecutor,
        *,
        context: NodeContext = None,
        messages_key: str = "messages",
        max_concurrency: int | None = None,
        progress_interval: float = 0.1,
    ) -> None:
        self.executor = executor
        self.context = context
        self.messages_key = messages_key
        self.max_concurrency = max_concurrency
        self.progress_interval = progress_interval

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = state if isinstance(state, list) else state[self.messages_key]
        calls = _pending_tool_calls(messages)
        if not calls:
            return {self.messages_key: []}
        ctx = resolve_context(self.context, state if isinstance(state, Mapping) else {}, config)
        results = await self._run_batch(self.executor, calls, ctx, config, self.max_concurrency)
        return {self.messages_key: [tool_message(r) for r in results]}


class PlannedCallsNode(_Node):
    """Runs the planner's `tool_calls` (`[{"tool", "args", ...}]`) and writes `tool_results`:
    `[{"tool", "call_id", "status", "ok", "content", "code"}]`, one per call, failures included
    (`content` is toolrun's rendering for the model; `code` the error code). Same gates and confirmation
    interrupts as `ToolrunNode`.

    Args:
        executor: The executor.
        context: Who is calling (see `NodeContext`).
        calls_key: The state key holding the planned calls.
        results_key: The state key the results are written to.
        max_concurrency: Most calls running at once (None: no limit).
        progress_interval: Least seconds between two progress chunks of one call on the custom stream.
    """

    def __init__(
        self,
        executor: ToolExecutor,
        *,
        context: NodeContext = None,
        calls_key: str = "tool_calls",
        results_key: str = "tool_results",
        max_concurrency: int | None = None,
        progress_interval: float = 0.1,
    ) -> None:
        self.executor = executor
        self.context = context
        self.calls_key = calls_key
        self.results_key = results_key
        self.max_concurrency = max_concurrency
        self.progress_interval = progress_interval

    async def _arun(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        planned = list(state.get(self.calls_key) or [])
        calls = [
            ToolCall(
                id=str(p.get("id") or f"plan_{i}"),
                name=str(p.get("tool") or p.get("name") or ""),
                arguments=p.get("args", p.get("arguments")),
            )
            for i, p in enumerate(planned)
        ]
        if not calls:
            return {self.results_key: []}
        ctx = resolve_context(self.context, state, config)
        results = await self._run_batch(self.executor, calls, ctx, config, self.max_concurrency)
        return {
            self.results_key: [
                {
                    "tool": r.tool_name or c.name,
                    "call_id": c.id,
                    "status": r.status,
                    "ok": r.status == "ok",
                    "content": r.render(),
                    "code": r.error.code if r.error is not None else None,
                }
                for c, r in zip(calls, results, strict=True)
            ]
        }


def _toolrun_messages(state: Mapping[str, Any], input_key: str) -> list[Any]:
    raw = state.get(input_key)
    if isinstance(raw, str):
        return [UserMessage(content=raw)]
    out: list[Any] = []
    for message in raw or []:
        text = message.text if isinstance(message, BaseMessage) else str(message)
        if isinstance(message, HumanMessage):
            out.append(UserMessage(content=text))
        elif isinstance(message, AIMessage):
            out.append(AssistantMessage(content=text))
        elif isinstance(message, SystemMessage):
            out.append(TRSystemMessage(content=text))
        elif not isinstance(message, BaseMessage):
            out.append(UserMessage(content=text))
    return out


class PlannerNode:
    """Asks the model for a toolrun JSON plan (planner mode) and writes it into the state.

    Writes `intent`, `tool_calls` (`[{"id", "tool", "args", "reason"}]`), `needs_user_input`,
    `input_request`, and `plan_error` (None, or why no valid plan came after one repair request, or why
    the model could not be asked: the pipeline goes on to `respond` instead of crashing).

    Args:
        model: Any toolrun `Model` (`ScriptedModel` / `FunctionModel` in tests).
        tools: The tools the plan may use (described in the system prompt).
        instructions: Your own instructions, put before the tool list.
        input_key: The state key holding the conversation: a list of LangChain messages, or a string.
    """

    def __init__(
        self, model: Model, tools: ToolSet, *, instructions: str | None = None, input_key: str = "messages"
    ) -> None:
        self.model = model
        self.tools = tools
        self.instructions = instructions
        self.input_key = input_key

    async def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        messages: list[Any] = [
            TRSystemMessage(content=planner_prompt(self.instructions, self.tools.describe())),
            *_toolrun_messages(state, self.input_key),
        ]
        plan: PlannerOutput | None = None
        problem: str | None = None
        try:
            for attempt in range(2):
                response = await self.model.request(ModelRequest(messages))
                try:
                    plan = parse_plan(response.text)
                    break
                except PlanError as exc:
                    problem = f"The model did not produce a valid plan: {exc}"
                    if attempt == 0:
                        messages += [response.to_message(), UserMessage(content=repair_prompt(str(exc)))]
        except Exception as exc:  # a provider failure must not crash the graph: respond says so
            _logger.warning("The planner's model request failed: %s", type(exc).__name__)
            problem = f"The model could not be asked ({type(exc).__name__})."
        if plan is None:
            return {
                "intent": "",
                "tool_calls": [],
                "needs_user_input": False,
                "input_request": None,
                "plan_error": problem,
            }
        return {
            "intent": plan.intent,
            "tool_calls": [
                {"id": f"plan_{i}", "tool": c.tool, "args": c.args, "reason": c.reason}
                for i, c in enumerate(plan.tool_calls)
            ],
            "needs_user_input": plan.needs_user_input,
            "input_request": plan.input_request,
            "plan_error": None,
        }


def plan_router(
    tools: ToolSet,
    *,
    tools_node: str = "execute_tools",
    queries_node: str = "execute_queries",
    respond_node: str = "respond",
) -> Callable[[Mapping[str, Any]], str]:
    """The conditional edge after `PlannerNode`: `respond` when the user must be asked something, the
    plan failed or there is nothing to call; `execute_queries` when every planned call is a `read_only`
    tool; `execute_tools` otherwise (unknown names included: the executor answers them `NOT_FOUND`)."""

    def route(state: Mapping[str, Any]) -> str:
        calls = state.get("tool_calls") or []
        if state.get("needs_user_input") or state.get("plan_error") or not calls:
            return respond_node
        for call in calls:
            tool = tools.find(str(call.get("tool") or ""))
            if tool is None or not tool.options.read_only:
                return tools_node
        return queries_node

    return route
