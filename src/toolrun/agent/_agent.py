"""`Agent`: the loop from a user message to an answer, through tools.

One loop, written once as an async generator of events: `run()` drains it and returns the `AgentRun`,
`stream()` hands the events out as they happen. Native mode sends tool definitions and runs the calls the
model makes; planner mode asks for a JSON plan, runs it, then asks for the answer. Each model request
goes through `_requests` and each turn's calls through `_turn`; a paused run resumes through `_resume`,
and one kept in a run store through `_decide`. The public methods here stay thin.

```
messages + tools ─► model ─► tool calls? ── no ──► completed (output = text)
                     ▲            │ yes
                     │            ▼
                     │      execute_many ─► confirmation required? ── yes ──► awaiting_confirmation
                     │            │ no                                        (resume() continues)
                     └── results appended (in the model's call order)
```
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from toolrun.agent._boundary import (
    OutputLimits,
)
from toolrun.agent._compact import HistoryPolicy
from toolrun.agent._decide import decide_events, kept
from toolrun.agent._events import (
    AgentEvent,
    RunFinished,
)
from toolrun.agent._extras import PromptSource, compose, visible_tools
from toolrun.agent._planner import PlanError, answer_prompt, parse_plan, planner_prompt, repair_prompt
from toolrun.agent._requests import Stop, ask, ask_quietly, describe_failure
from toolrun.agent._resume import abandon_run, bind_pending, pending_entry, resume_events
from toolrun.agent._run import AgentRun, PendingCall, RunErrorCode
from toolrun.agent._turn import after_results, checked_calls, run_calls
from toolrun.approvals._decisions import Approve, Decision, Deny
from toolrun.models import (
    AssistantMessage,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    UserMessage,
    infer_model,
)
from toolrun.registry import ToolRegistry, ToolSet
from toolrun.results import ToolResult
from toolrun.runtime import ToolExecutor
from toolrun.store import RunStore
from toolrun.tools import Tool, ToolBudget, ToolCall, ToolContext

__all__ = ["Agent"]

logger = logging.getLogger("toolrun.agent")


class LoopExecutor(Protocol):
    """What the loop asks of its executor: run a turn's calls, and decide a held call. A `ToolExecutor` is
    one; a `DurableAgent` gives the loop one that makes each of these a DBOS step."""

    async def execute_many(
        self,
        calls: Iterable[ToolCall],
        context: ToolContext[Any] | None = None,
        *,
        max_concurrency: int | None = None,
        context_for: Callable[[ToolCall], ToolContext[Any]] | None = None,
    ) -> list[ToolResult]: ...

    async def approve(
        self, confirmation_id: str, context: ToolContext[Any], *, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult: ...

    async def preview_edit(
        self, confirmation_id: str, context: ToolContext[Any], arguments: Mapping[str, Any]
    ) -> ToolResult: ...

    async def deny(
        self, confirmation_id: str, context: ToolContext[Any], reason: str | None = None
    ) -> ToolResult: ...


class Agent:
    """Runs a conversation with a model, executing the tool calls it makes, until an answer or a limit.

    ```python
    agent = Agent("openai:gpt-4o-mini", registry, instructions="You manage the user's tasks.")
    run = await agent.run("Delete task t1", context=ToolContext(user_id="u1"))
    if run.status == "awaiting_confirmation":
        run = await agent.resume(run, approvals={run.pending[0].confirmation_id: True}, context=...)
    print(run.output)
    ```

    Args:
        model: A `Model`, or a model string for `infer_model` (`"openai:gpt-4o-mini"`, ...).
        tools: A registry or view, or tools/functions to put in a new registry. Defaults to the executor's.
        instructions: The system prompt.
        mode: `"native"` (provider tool calling) or `"planner"` (a JSON plan; for models without tools).
        max_steps: Most model requests in one run (a repair request in planner mode counts).
        executor: Runs the calls; defaults to a `ToolExecutor` over `tools`.
        settings: Model settings for every request of this agent.
        max_concurrency: Most calls of one turn run at once.
        max_tool_errors: A tool that fails this many times in a row ends the run (`failed`): the model
            keeps sending a call that cannot work.
        timeout: Seconds a run may take (combined with the context's own deadline).
        max_tool_calls: Tool calls allowed per run (a budget; the run ends with `budget_exceeded`).
        max_tokens: Tokens (input + output, all requests) allowed per run (`budget_exceeded`).
        prompt: A `toolrun.prompts.Prompt` (or any `PromptSource`): its tools join the agent's, and its
            instructions are re-rendered for every model request (replaces `instructions`).
        tool_search: Show the model only a `search_tools` meta-tool (plus the prompt's tools) and load
            the tools it finds into view; for agents with too many tools to send them all.
        tool_limits: Calls allowed per run for some tools (`{"send_email": 2}`), on top of each tool's
            own `max_calls`: past it the model gets `BUDGET_EXCEEDED` for that tool and the run goes on.
        output_limits: How much of a model's response is taken (text, arguments, calls); see
            `toolrun.agent.OutputLimits`. Every response passes the model boundary (docs/security.md).
        progress_interval: Least seconds between two `ToolCallProgress` events of one call (reports in
            between are dropped; the final one always passes).
        compact_history: What the model is sent of old tool results (e.g. `CompactToolResults()`); the
            run and its stored messages keep everything.
        runs: Where paused runs wait for a decision (`toolrun.store.RunStore`: in memory, or SQL shared by
            every process): `run`/`stream`/`resume` save a run there when it pauses, and `decide` continues
            it from any process by confirmation id.
    """

    def __init__(
        self,
        model: Model | str,
        tools: ToolSet | Iterable[Tool | Callable[..., Any]] | None = None,
        *,
        instructions: str | None = None,
        mode: Literal["native", "planner"] = "native",
        max_steps: int = 10,
        executor: ToolExecutor | None = None,
        settings: ModelSettings | None = None,
        max_concurrency: int = 8,
        progress_interval: float = 0.1,
        compact_history: HistoryPolicy | None = None,
        max_tool_errors: int = 3,
        timeout: float | None = None,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        prompt: PromptSource | None = None,
        tool_search: bool = False,
        tool_limits: Mapping[str, int] | None = None,
        output_limits: OutputLimits | None = None,
        runs: RunStore | None = None,
    ) -> None:
        if mode not in ("native", "planner"):
            raise ValueError(f"mode must be 'native' or 'planner', not {mode!r}.")
        if tool_search and mode == "planner":
            raise ValueError("tool_search needs native tool calling: planner mode shows every tool.")
        if max_steps < 1 or max_concurrency < 1 or max_tool_errors < 1:
            raise ValueError("max_steps, max_concurrency and max_tool_errors must be at least 1.")
        self.model: Model = infer_model(model) if isinstance(model, str) else model
        if tools is None:
            self.tools: ToolSet = executor.registry if executor is not None else ToolRegistry()
        elif isinstance(tools, ToolSet):
            self.tools = tools
        else:
            self.tools = ToolRegistry(tools)
        self.prompt = prompt
        self.tool_search = tool_search
        self._read_result_tools: tuple[tuple[int, int], ToolSet] | None = None
        self.progress_interval = progress_interval
        self.compact_history = compact_history
        self.tools, self._pinned, instructions = compose(
            self.tools, executor, prompt, tool_search, instructions
        )
        self.executor = executor if executor is not None else ToolExecutor(self.tools)
        self.instructions = instructions
        self.mode: Literal["native", "planner"] = mode
        self.max_steps = max_steps
        self.settings = settings
        self.max_concurrency = max_concurrency
        self.max_tool_errors = max_tool_errors
        self.timeout = timeout
        self.max_tool_calls = max_tool_calls
        self.max_tokens = max_tokens
        self.tool_limits = dict(tool_limits or {})
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in self.tool_limits.values()):
            raise ValueError("tool_limits maps tool names to whole numbers of calls >= 1.")
        self.output_limits = output_limits if output_limits is not None else OutputLimits()
        self.runs = runs

    # ----------------------------------------------------------------------------------------------------
    # Public API

    async def run(
        self, message: str | Sequence[Message], *, context: ToolContext[Any] | None = None
    ) -> AgentRun:
        """Run until an answer, a pause or a limit; never raises for model or tool failures (`failed`)."""
        run = self._start(message)
        async for _ in kept(self, run, context, self._events(run, context, streaming=False)):
            pass
        return run

    async def stream(
        self, message: str | Sequence[Message], *, context: ToolContext[Any] | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Like `run`, yielding events as they happen; the last event is `RunFinished`."""
        run = self._start(message)
        async for event in kept(self, run, context, self._events(run, context, streaming=True)):
            yield event

    async def resume(
        self,
        run: AgentRun,
        approvals: Mapping[str, Decision],
        *,
        context: ToolContext[Any] | None = None,
    ) -> AgentRun:
        """Continue a run paused with `awaiting_confirmation`.

        What runs is decided by the executor's confirmation store, never by `run`: every pending entry
        must match its stored record (same run, user — or "no user" —, conversation, call, arguments and
        summary; argument hash under this executor's `hash_key`), and each entry's call, summary and
        arguments are taken from the record. If any entry does not match or is unknown to the store
        (already decided, purged, someone else's, or a store/`hash_key` this executor does not share),
        nothing of this resume runs or is consumed, and the run ends `failed` with the reason in
        `run.error`. See docs/agent-resume.md.

        Args:
            run: The paused run (possibly rebuilt with `AgentRun.from_json`, or `load_run`, in another
                process).
            approvals: `{confirmation_id: True}` to approve, `False` to deny; `Approve(arguments=...)`
                to approve the person's edited arguments, `Deny(reason=...)` to deny with a reason the
                model receives. Each decision reaches its own call (by confirmation id, never by position).
                Nothing else decides: a form value passed through (`"no"`, `{"approve": False}`, `1`)
                is refused, so it can never approve.
                Calls not mentioned stay pending, and the run stays paused until every one is decided.
            context: Who decides: the user who was asked (no user id for a run that had none).

        Raises:
            InvalidDecisionError: a decision is not `True`, `False`, `Approve` or `Deny` (nothing ran).
            ValueError: the run is not awaiting confirmation, `approvals` names an id that is not
                pending in it, or an edit's arguments are not valid for its tool (nothing ran).
        """
        events = self._resume(run, approvals, context, streaming=False)
        async for _ in kept(self, run, context, events, resumed=True):
            pass
        return run

    async def stream_resume(
        self,
        run: AgentRun,
        approvals: Mapping[str, Decision],
        *,
        context: ToolContext[Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Like `resume`, yielding events; the last event is `RunFinished`."""
        events = self._resume(run, approvals, context, streaming=True)
        async for event in kept(self, run, context, events, resumed=True):
            yield event

    async def decide(
        self,
        confirmation_id: str,
        decision: bool | Approve | Deny,
        *,
        context: ToolContext[Any] | None = None,
    ) -> AgentRun:
        """Decide one confirmation of a paused run kept in the agent's run store, from any process, and
        continue the run: a later request needs only the confirmation id and who decides.

        The run is loaded from the store (`Agent(runs=...)`), never from the caller, and claimed
        atomically: of two decisions at once (a double click reaching two processes) exactly one goes on,
        the other is refused. Then it resumes as `resume` does, and is saved again if it pauses again (its
        other confirmations still pending, or a new one), or forgotten when it ends. A decision that takes the
        run over from a decider that died mid-decision (its claim lapsed after consuming the confirmation)
        closes the run instead: `failed`, `error_code` `DECISION_INTERRUPTED`, the held call's result
        `RESULT_UNKNOWN`; nothing is run again.

        ```python
        run = await agent.decide(confirmation_id, True, context=ToolContext(user_id="u1"))
        ```

        Args:
            confirmation_id: The confirmation being decided (`run.pending[i].confirmation_id`).
            decision: `True`/`Approve(...)` approves, `False`/`Deny(...)` denies (as in `resume`).
            context: Who decides: the user who was asked. Its `conversation_id` defaults to the paused
                run's.

        Raises:
            DecisionRefusedError: nothing ran; `code` says why: `CONFIRMATION_UNKNOWN` (unknown, already
                decided, or another user's), `DECIDED_ELSEWHERE` (another decision holds the run now),
                `RUN_MISMATCH`, `STORE_UNAVAILABLE`.
            InvalidDecisionError: `decision` is none of the above (nothing ran).
            ValueError: the agent has no run store, or edited arguments are refused by the tool (nothing
                ran; the run waits for a decision still).
        """
        last: AgentRun | None = None
        async for event in decide_events(self, confirmation_id, decision, context, streaming=False):
            if isinstance(event, RunFinished):
                last = event.run
        assert last is not None  # _decide ends with RunFinished or raises
        return last

    async def stream_decide(
        self,
        confirmation_id: str,
        decision: bool | Approve | Deny,
        *,
        context: ToolContext[Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Like `decide`, yielding the continued run's events (text, tool progress, ...); the last event is
        `RunFinished`. Refusals raise before the first event."""
        async for event in decide_events(self, confirmation_id, decision, context, streaming=True):
            yield event

    async def abandon(
        self, run: AgentRun, reason: str, *, context: ToolContext[Any] | None = None
    ) -> AgentRun:
        """End a run paused with `awaiting_confirmation` without deciding its held calls.

        Every held call is withdrawn from the confirmation store (it can no longer be approved) and gets a
        result saying it did not run because the run ended (`CONFIRMATION_EXPIRED`, reason `run_ended`,
        with `reason`); the paused turn's results are appended to the history (so every tool call of the
        turn has exactly one result, and the history stays valid for every provider), and the run ends
        `failed` with `reason` in `run.error`.

        Raises:
            ValueError: the run is not awaiting confirmation.
        """
        return await abandon_run(self, run, reason, context)

    def dump_run(self, run: AgentRun) -> str:
        """`run` as JSON text signed with this agent's executor key (see `load_run`).

        Use it for runs that leave the process (a browser, a queue, a file): `load_run` refuses any
        change made to them in between.
        """
        return run.to_json(signing_key=self._signing_key())

    def load_run(self, text: str | bytes) -> AgentRun:
        """A run from `dump_run` output, its signature checked with the executor's key.

        Every process that loads runs must share the executor's `hash_key` (as it must to share
        confirmations).

        Raises:
            RunSignatureError: the run was changed after it was signed, signed with another key, or not
                signed at all.
            InvalidRunError: the text is not a run (names the field).
        """
        return AgentRun.from_json(text, signing_key=self._signing_key())

    def _signing_key(self) -> bytes:
        # A subkey of the executor's hash key, for this one purpose: argument hashes and run signatures
        # are never interchangeable.
        return self.executor.hasher.digest(b"toolrun: AgentRun signing key, v1").encode()

    def _resume(
        self,
        run: AgentRun,
        approvals: Mapping[str, Decision],
        context: ToolContext[Any] | None,
        *,
        streaming: bool,
    ) -> AsyncIterator[AgentEvent]:
        """The events of a resume (`_resume.resume_events`); `decide` and the DBOS workflow resume here."""
        return resume_events(self, run, approvals, context, streaming=streaming)

    async def _bind_pending(self, run: AgentRun, ctx: ToolContext[Any]) -> str | None:
        """Bind `run`'s pending entries to the confirmation store's records (`_resume.bind_pending`); the
        reason for refusing the resume, or None. A hook: `DurableAgent` makes it a step."""
        return await bind_pending(self, run, ctx)

    async def _pending_entry(self, run: AgentRun, call: ToolCall, result: ToolResult) -> PendingCall:
        """The run's entry for a held call, as the confirmation store has it (`_resume.pending_entry`). A
        hook: `DurableAgent` makes it a step."""
        return await pending_entry(self, run, call, result)

    # ----------------------------------------------------------------------------------------------------
    # The loop

    @property
    def _calls(self) -> LoopExecutor:
        """What runs the loop's tool calls and decisions: the executor itself (see `DurableAgent`)."""
        return self.executor

    def _start(self, message: str | Sequence[Message]) -> AgentRun:
        messages: list[Message] = (
            [UserMessage(content=message)] if isinstance(message, str) else list(message)
        )
        system = (
            planner_prompt(self.instructions, self.tools.describe())
            if self.mode == "planner"
            else self.instructions
        )
        if system and not (messages and isinstance(messages[0], SystemMessage)):
            messages.insert(0, SystemMessage(content=system))
        return AgentRun(mode=self.mode, messages=messages)

    def _context(self, run: AgentRun, context: ToolContext[Any] | None) -> ToolContext[Any]:
        ctx = context if context is not None else ToolContext()
        changes: dict[str, Any] = {}
        if ctx.conversation_id is None:
            changes["conversation_id"] = run.run_id
        if ctx.run_id != run.run_id:
            changes["run_id"] = run.run_id
        if ctx.state is None:
            changes["state"] = run.state  # the run's own state: kept in its JSON, back on resume
        else:
            run.state = ctx.state
        if ctx.budget is None:  # every run counts its calls: max_tool_calls, tool_limits, tools' max_calls
            ran = [r.call.name for r in run.tool_calls if r.result.attempts > 0]
            per_tool: dict[str, int] = {}
            for name in ran:
                per_tool[name] = per_tool.get(name, 0) + 1
            changes["budget"] = ToolBudget(
                max_calls=self.max_tool_calls,
                calls_used=len(ran),
                tool_limits=dict(self.tool_limits),
                tool_calls=per_tool,
            )
        if self.timeout is not None:
            deadline = time.time() + self.timeout
            changes["deadline"] = deadline if ctx.deadline is None else min(ctx.deadline, deadline)
        return ctx.evolve(**changes) if changes else ctx

    async def _events(
        self, run: AgentRun, context: ToolContext[Any] | None, *, streaming: bool
    ) -> AsyncIterator[AgentEvent]:
        ctx = self._context(run, context)
        async for event in self._loop(run, ctx, streaming=streaming):
            yield event

    async def _loop(
        self, run: AgentRun, ctx: ToolContext[Any], *, streaming: bool
    ) -> AsyncIterator[AgentEvent]:
        try:
            if run.mode == "planner":
                async for event in self._planner_steps(run, ctx, streaming=streaming):
                    yield event
            else:
                async for event in self._native_steps(run, ctx, streaming=streaming):
                    yield event
        except Stop as stop:
            run.status, run.error, run.error_code = stop.status, stop.error, stop.code
        except Exception as exc:  # a provider failure, or a bug: the run ends readable, never half-raised
            run.status, run.error = "failed", describe_failure(self, run, exc)
            run.error_code = RunErrorCode.MODEL_FAILED
        yield RunFinished(run=run)

    async def _native_steps(
        self, run: AgentRun, ctx: ToolContext[Any], *, streaming: bool
    ) -> AsyncIterator[AgentEvent]:
        while run.status == "running":
            request = ModelRequest(
                self._sent(run), tools=self._request_tools(run, ctx), settings=self.settings
            )
            response: ModelResponse | None = None
            async for event in self._ask(run, ctx, request, streaming=streaming):
                if isinstance(event, ModelResponse):
                    response = event
                else:
                    yield event
            assert response is not None  # _ask always ends with the response
            checked = checked_calls(self, run, response.tool_calls)
            # The provider's own blocks go back to it only for a turn the boundary kept as it came.
            kept = None if checked.refused or checked.renamed else response.provider_data
            run.messages.append(
                AssistantMessage(content=response.text, tool_calls=checked.calls, provider_data=kept)
            )
            if not checked.calls:
                run.output = response.text
                run.status = "completed"
                return
            async for event in run_calls(self, run, ctx, checked):
                yield event

    async def _planner_steps(
        self, run: AgentRun, ctx: ToolContext[Any], *, streaming: bool
    ) -> AsyncIterator[AgentEvent]:
        if run.plan is None:
            response = await ask_quietly(
                self, run, ctx, ModelRequest(self._sent(run), settings=self.settings)
            )
            run.messages.append(AssistantMessage(content=response.text))
            try:
                plan = parse_plan(response.text)
            except PlanError as first:
                run.messages.append(UserMessage(content=repair_prompt(str(first))))
                response = await ask_quietly(
                    self, run, ctx, ModelRequest(self._sent(run), settings=self.settings)
                )
                run.messages.append(AssistantMessage(content=response.text))
                try:
                    plan = parse_plan(response.text)
                except PlanError as second:
                    run.status, run.error = "failed", f"The model did not produce a valid plan: {second}"
                    run.error_code = RunErrorCode.INVALID_PLAN
                    return
            run.plan = plan.model_dump()
            if plan.needs_user_input:
                run.status, run.output = "needs_user_input", plan.input_request
                return
            if plan.tool_calls:
                calls = [ToolCall(name=c.tool, arguments=c.args) for c in plan.tool_calls]
                async for event in run_calls(self, run, ctx, checked_calls(self, run, calls)):
                    yield event
                if run.status != "running":
                    return
        lines = [f"- {r.call.name}({r.call.arguments!s:.500}) -> {r.result.render()}" for r in run.tool_calls]
        run.messages.append(UserMessage(content=answer_prompt("\n".join(lines))))
        request = ModelRequest(self._sent(run), settings=self.settings)
        answer: ModelResponse | None = None
        async for item in self._ask(run, ctx, request, streaming=streaming):
            if isinstance(item, ModelResponse):
                answer = item
            else:
                yield item
        assert answer is not None
        run.messages.append(AssistantMessage(content=answer.text))
        run.output = answer.text
        run.status = "completed"

    # ----------------------------------------------------------------------------------------------------
    # Pieces

    def _request_tools(self, run: AgentRun, ctx: ToolContext[Any]) -> ToolSet:
        """Per request: re-render the prompt into the system message; the tools the model is shown."""
        if self.prompt is not None:
            system = SystemMessage(content=self.prompt.render(ctx).instructions)
            if run.messages and isinstance(run.messages[0], SystemMessage):
                run.messages[0] = system
            else:
                run.messages.insert(0, system)
        tools = visible_tools(self.tools, self._pinned, ctx.state) if self.tool_search else self.tools
        return self._with_read_result(tools)

    def _sent(self, run: AgentRun) -> list[Message]:
        """What the model is sent of the conversation: all of it, or what `compact_history` makes of it
        (the run keeps every message whole)."""
        policy = self.compact_history
        return run.messages if policy is None else policy(run.messages)

    def _with_read_result(self, tools: ToolSet) -> ToolSet:
        """`tools`, plus the executor's built-in `read_result` once some result was cut to an output budget
        (so the model can page what was left out), unless a tool of that name is there already."""
        executor = self.executor
        if not executor.artifacts_made or tools.find("read_result") is not None:
            return tools
        reader = executor.builtin_tool("read_result")
        if reader is None:  # pragma: no cover - the executor always has it
            return tools
        key = (id(tools), tools.version)
        cached = self._read_result_tools
        if cached is None or cached[0] != key:
            cached = self._read_result_tools = (key, ToolRegistry([*tools.tools(), reader]))
        return cached[1]

    def _ask(
        self, run: AgentRun, ctx: ToolContext[Any], request: ModelRequest, *, streaming: bool
    ) -> AsyncIterator[AgentEvent | ModelResponse]:
        """One model request (`_requests.ask`): text deltas, then the response. A hook: `DurableAgent`
        delivers finished jobs' results into the request first."""
        return ask(self, run, ctx, request, streaming=streaming)

    def _after_results(self, run: AgentRun, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        """Feed a turn's results back; stop on a spent budget or a hopeless tool (`_turn.after_results`)."""
        after_results(self, run, calls, results)
