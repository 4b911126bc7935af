"""Output budgets: a result longer than the model may be shown is cut where its structure allows, kept
whole as an artifact, and paged with the built-in `read_result` tool.

The cut, by the shape of the value:

- a string keeps its head and its tail, with `[… N characters left out …]` between them;
- a list keeps whole items from the start (as many as fit) and says how many were left out;
- an object cuts its largest list or string member the same way (the others stay whole);
- anything else, or a cut that would break the tool's output type, drops to text: the head and tail of
  the value's JSON, given to the model as the result's message, with no value (nothing invalid leaves).

The model reads the cut value followed by a note saying what was left out and how to read the rest:
`read_result(artifact_id=..., offset=..., length=...)` pages through the whole result's text (the string
itself, or the value's compact JSON). Artifacts belong to the user whose call made them (`ToolContext.
user_id`; calls without one share the "no user" owner and only they can read them) and expire: a read by
anyone else, or after expiry, is `NOT_FOUND` — the same answer as for an id that never existed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

from toolrun.results import ErrorCode, ToolError, ToolResult
from toolrun.store import Artifact, ArtifactStore, InMemoryArtifactStore
from toolrun.tools import Tool, ToolContext
from toolrun.tools._options import OutputBudget

__all__ = [
    "READ_RESULT",
    "Artifact",
    "ArtifactStore",
    "InMemoryArtifactStore",
    "apply_budget",
    "read_result_tool",
]

READ_RESULT = "read_result"
"""The built-in tool's name."""

_DEFAULT_PAGE = 4000
_MAX_PAGE = 16_000  # below the executor's default max_result_chars, so a page is never truncated


def _text(value: Any) -> str:
    return ToolResult(value=value).render()


def _note(left_out: str, artifact_id: str, total: int, page: int) -> str:
    return (
        f"\n[Cut to fit the output budget: {left_out}. Whole result ({total:,} characters): "
        f'read_result(artifact_id="{artifact_id}", offset=0, length={page})]'
    )


def _fit(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in 0..n with fits(k) (fits is monotone: true up to some k, false after)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut_text(text: str, fits: Callable[[str], bool]) -> tuple[str, str]:
    def build(k: int) -> str:
        head = k - k // 3
        tail = k // 3
        left = len(text) - head - tail
        return text[:head] + f"\n[… {left:,} characters left out …]\n" + (text[-tail:] if tail else "")

    k = _fit(len(text) - 1, lambda k: fits(build(k)))
    return build(k), f"{len(text) - k:,} of {len(text):,} characters left out"


def _cut(value: Any, fits: Callable[[Any], bool], depth: int = 0) -> tuple[Any, str] | None:
    """The value cut to fit (see the module docstring) and what was left out; None when no structural
    cut exists."""
    if isinstance(value, str):
        return _cut_text(value, fits)
    if isinstance(value, list):
        n = _fit(len(value) - 1, lambda k: fits(value[:k]))
        return value[:n], f"{len(value) - n:,} of {len(value):,} items left out"
    if isinstance(value, dict) and depth < 4:
        sizes = [(len(_text(v)), k) for k, v in value.items() if isinstance(v, list | str | dict)]
        if not sizes:
            return None
        _, key = max(sizes)
        inner = _cut(value[key], lambda v: fits({**value, key: v}), depth + 1)
        if inner is None:
            return None
        cut, left_out = inner
        return {**value, key: cut}, f"{key}: {left_out}"
    return None


async def apply_budget(
    result: ToolResult,
    tool: Tool,
    budget: OutputBudget,
    context: ToolContext[Any],
    store: ArtifactStore,
    ttl: float,
    *,
    check_output: bool,
) -> ToolResult:
    """`result` as it is when its text fits `budget`; otherwise cut, with the note, the whole kept."""
    text = result.render()
    counter = budget.counter
    if counter(text) <= budget.limit:
        return result
    artifact_id = "art_" + secrets.token_urlsafe(12)
    page = min(budget.limit, _MAX_PAGE) if counter is len else _DEFAULT_PAGE
    widest = _note("9" * 40, artifact_id, len(text), page)
    room = budget.limit - counter(widest)

    def fits_text(candidate: str) -> bool:
        return counter(candidate) <= room

    cut: tuple[Any, str] | None = None
    if result.message is None:
        cut = _cut(result.value, lambda v: fits_text(_text(v)))
        if cut is not None and not fits_text(_text(cut[0])):
            cut = None  # even the smallest cut of that shape is too long: drop to text
        if cut is not None and check_output and tool.output_problems(cut[0]):
            cut = None  # no valid cut: drop to text
    await store.put(
        Artifact(
            id=artifact_id,
            owner=context.user_id,
            tool_name=tool.name,
            text=text,
            expires_at=time.time() + ttl,
        )
    )
    metadata = {**result.metadata, "truncated": True, "original_chars": len(text), "artifact_id": artifact_id}
    if cut is not None:
        value, left_out = cut
        shown = _text(value)
    else:
        value = None
        shown, left_out = _cut_text(text, fits_text)
        if not fits_text(shown):
            shown, left_out = "", "everything left out"
    message = shown + _note(left_out, artifact_id, len(text), page)
    return ToolResult(
        call_id=result.call_id,
        tool_name=result.tool_name,
        status=result.status,
        value=value,
        message=message,
        attempts=result.attempts,
        exclude_value_from_context=result.exclude_value_from_context,
        metadata=metadata,
        content=result.content,
    )


def read_result_tool(store: ArtifactStore) -> Tool:
    """The built-in `read_result` tool over `store`: pages of a result that was cut to fit a budget."""

    async def read_result(
        artifact_id: str, offset: int = 0, length: int = _DEFAULT_PAGE, *, ctx: ToolContext[Any]
    ) -> dict[str, Any]:
        """Read part of a tool result that was cut to fit the output budget.

        Use when a tool result says it was cut and you need what was left out.

        Args:
            artifact_id: The id the cut result names, e.g. "art_x1y2".
            offset: The first character to read (0 for the start).
            length: How many characters to read (at most 16000).
        """
        if offset < 0 or length < 1:
            raise ToolError(
                ErrorCode.INVALID_ARGUMENTS,
                "offset must be >= 0 and length >= 1.",
                recover_action="Call read_result again with offset >= 0 and length >= 1.",
            )
        artifact = await store.get(artifact_id, ctx.user_id)
        if artifact is None:
            raise ToolError(
                ErrorCode.NOT_FOUND,
                f"No result {artifact_id[:80]!r} to read: it never existed, has expired, or is not yours.",
                recover_action="Call the original tool again if you still need its result.",
            )
        length = min(length, _MAX_PAGE)
        text = artifact.text[offset : offset + length]
        end = offset + len(text)
        return {
            "artifact_id": artifact.id,
            "tool": artifact.tool_name,
            "offset": offset,
            "text": text,
            "total": len(artifact.text),
            "next_offset": end if end < len(artifact.text) else None,
        }

    return Tool.from_function(read_result, name=READ_RESULT, read_only=True)
