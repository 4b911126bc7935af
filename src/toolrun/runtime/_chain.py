"""Several calls at once: `ToolExecutor.execute_many` (concurrently, `sequential` tools alone) and
`ToolExecutor.chain` (steps in order, feeding earlier results into later arguments).

```python
results = await executor.execute_many(calls, ctx, max_concurrency=8)   # in call order
results = await executor.chain([
    {"id": "find", "tool": "search_tasks", "arguments": {"query": "invoice"}},
    {"id": "open", "tool": "get_task", "arguments": {"task_id": "$find.items.0.id"}},
])
```

An argument value that is exactly a string `"$step"` or `"$step.path.to.field"` is replaced by that part
of the value of the earlier step `step` (dict keys and list indexes, negative ones too), keeping its type.
`"$$text"` stands for the literal string `"$text"`. References appear anywhere in nested arguments. The
whole chain is checked before its first step runs (well-formed steps, unique valid ids, references only
to earlier steps): a bad chain runs nothing and returns one error. Every step runs through the whole
pipeline (confirmation included); the chain stops at the first step that does not end `ok`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolrun.results import ErrorCode, ToolResult
from toolrun.runtime import _errors
from toolrun.tools import ToolCall, ToolContext

if TYPE_CHECKING:
    from toolrun.runtime._executor import ToolExecutor

__all__ = ["ChainStep", "run_chain", "run_many"]

_STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_MAX_DEPTH = 64


@dataclass(frozen=True, kw_only=True)
class ChainStep:
    """One step of a chain."""

    id: str
    """The step's name, used in references (`"$id.field"`) and as the call id. Letters, digits, `_`, `-`."""
    tool: str
    """The tool to call."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """The arguments, possibly holding references to earlier steps."""

    @classmethod
    def coerce(cls, value: ChainStep | Mapping[str, Any]) -> ChainStep:
        if isinstance(value, ChainStep):
            return value
        if not isinstance(value, Mapping):
            raise TypeError("a chain step must be a ChainStep or a mapping with 'id', 'tool', 'arguments'")
        arguments = value.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise TypeError("a step's arguments must be an object")
        return cls(id=str(value["id"]), tool=str(value["tool"]), arguments=arguments)


class _BadReference(Exception):
    def __init__(self, ref: str, reason: str) -> None:
        self.ref = ref
        self.reason = reason


def _lookup(ref: str, outputs: Mapping[str, Any]) -> Any:
    step, _, path = ref.partition(".")
    if step not in outputs:
        raise _BadReference(ref, f"there is no earlier step {step!r}")
    current = outputs[step]
    for part in path.split(".") if path else ():
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and re.fullmatch(r"-?\d{1,9}", part):
            index = int(part)
            if not -len(current) <= index < len(current):
                raise _BadReference(ref, f"index {index} is out of range (the list has {len(current)} items)")
            current = current[index]
        else:
            raise _BadReference(ref, f"there is no field {part!r} at that point")
    return current


def _resolve(value: Any, outputs: Mapping[str, Any], depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise _BadReference("", "the arguments are nested too deeply")
    if isinstance(value, str):
        if value.startswith("$$"):
            return value[1:]
        if value.startswith("$"):
            return _lookup(value[1:], outputs)
        return value
    if isinstance(value, Mapping):
        return {k: _resolve(v, outputs, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve(v, outputs, depth + 1) for v in value]
    return value


def _references(value: Any, depth: int = 0) -> list[str]:
    """The step ids that `value` refers to (`"$step..."`), for the check before anything runs."""
    if depth > _MAX_DEPTH:
        raise _BadReference("", "the arguments are nested too deeply")
    if isinstance(value, str):
        if value.startswith("$") and not value.startswith("$$"):
            return [value[1:].partition(".")[0]]
        return []
    if isinstance(value, Mapping):
        return [ref for v in value.values() for ref in _references(v, depth + 1)]
    if isinstance(value, list | tuple):
        return [ref for v in value for ref in _references(v, depth + 1)]
    return []


def _check(steps: Sequence[ChainStep | Mapping[str, Any]]) -> list[ChainStep] | ToolResult:
    """The whole chain, checked before its first step runs: every step well-formed, every id valid and
    unique, every reference naming an earlier step. The first problem found is the error."""
    checked: list[ChainStep] = []
    seen: set[str] = set()
    for index, raw in enumerate(steps):
        try:
            step = ChainStep.coerce(raw)
        except (TypeError, KeyError) as exc:
            return _bad_step(f"step{index}", "", f"Step {index} is malformed: {exc}.")
        if not _STEP_ID.match(step.id) or step.id in seen:
            why = "is used twice" if step.id in seen else "is not a valid step id (letters, digits, _ and -)"
            return _bad_step(f"step{index}", step.tool, f"Step {index}: the id {step.id[:64]!r} {why}.")
        try:
            for ref in _references(step.arguments):
                if ref not in seen:
                    raise _BadReference(ref, f"there is no earlier step {ref[:64]!r}")
        except _BadReference as exc:
            where = "$" + exc.ref[:64] if exc.ref else "a reference"
            return _bad_step(step.id, step.tool, f"Step {step.id!r}: cannot resolve {where}: {exc.reason}.")
        seen.add(step.id)
        checked.append(step)
    return checked


async def run_chain(
    executor: ToolExecutor, steps: Sequence[ChainStep | Mapping[str, Any]], context: ToolContext[Any]
) -> list[ToolResult]:
    checked = _check(steps)
    if isinstance(checked, ToolResult):  # nothing ran
        return [checked]
    results: list[ToolResult] = []
    outputs: dict[str, Any] = {}
    for step in checked:
        try:
            arguments = _resolve(step.arguments, outputs)
        except _BadReference as exc:
            where = "$" + exc.ref if exc.ref else "a reference"
            message = f"Step {step.id!r}: cannot resolve {where}: {exc.reason}."
            results.append(_bad_step(step.id, step.tool, message))
            break
        result = await executor.execute(ToolCall(id=step.id, name=step.tool, arguments=arguments), context)
        results.append(result)
        if result.status != "ok":
            break
        outputs[step.id] = result.value
    return results


def _bad_step(call_id: str, tool: str, message: str) -> ToolResult:
    return _errors.fail(
        call_id,
        tool,
        ErrorCode.INVALID_ARGUMENTS,
        message,
        recover_action="Fix the chain: refer only to earlier steps and to fields their results have.",
        details={"problems": [{"path": "", "message": message, "expected": None, "given": None}]},
    )


async def run_many(
    executor: ToolExecutor,
    calls: Iterable[ToolCall],
    context: ToolContext[Any] | None,
    max_concurrency: int | None,
    context_for: Callable[[ToolCall], ToolContext[Any]] | None,
) -> list[ToolResult]:
    """`ToolExecutor.execute_many`: the calls concurrently (at most `max_concurrency` at a time), a call of
    a `sequential` tool alone; results in call order."""
    items = list(calls)
    ctx = context if context is not None else ToolContext()
    results: list[ToolResult | None] = [None] * len(items)

    async def run(index: int) -> None:
        call = items[index]
        results[index] = await executor.execute(call, ctx if context_for is None else context_for(call))

    await in_call_order(executor, [c.name for c in items], run, max_concurrency)
    return [r for r in results if r is not None]


async def in_call_order(
    executor: ToolExecutor,
    names: Sequence[str],
    run: Callable[[int], Awaitable[None]],
    max_concurrency: int | None,
) -> None:
    """`run(index)` for each call (its tool's name in `names`): concurrently, at most `max_concurrency` at a
    time, but a call of a `sequential` tool alone, after every call before it and before any after it.
    The one grouping rule of `execute_many`, with or without durable steps."""
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError("max_concurrency must be at least 1 (or None for no limit).")
    limiter = asyncio.Semaphore(max_concurrency) if max_concurrency else None

    async def one(index: int) -> None:
        if limiter is None:
            await run(index)
        else:
            async with limiter:
                await run(index)

    async def run_group(group: list[int]) -> None:
        if len(group) == 1:
            await one(group[0])
        elif group:
            async with asyncio.TaskGroup() as tg:
                for index in group:
                    tg.create_task(one(index))

    group: list[int] = []
    for index, name in enumerate(names):
        if executor._is_sequential(name):
            await run_group(group)
            group = []
            await one(index)
        else:
            group.append(index)
    await run_group(group)
