"""What the person sees and what decides for them: previews written from the application's own records,
standing approval rules, and what an edit changed. The confirmation stage and `ToolExecutor.approve` share
them; the executor runs a preview (`toolrun.runtime._preview`), as it runs a tool.

```
held call ─► the user's rules for this tool (unexpired, constraints equal)
    │           ├─ deny  ─► CONFIRMATION_DENIED (reason "rule"; audited with rule_id)
    │           └─ allow ─► runs (audited with rule_id)
    └─ no rule ─► preview(arguments, ctx) ─► pending confirmation {summary, preview} ─► person decides
                     └─ fails / times out ─► the summary, under a line saying the preview failed
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolrun._json import canonical_json, json_safe
from toolrun.store import ApprovalRule, ApprovalRuleStore
from toolrun.tools import Tool

__all__ = [
    "MAX_PREVIEW_CHARS",
    "clean_preview",
    "describe_changes",
    "find_rule",
    "matching_rule",
    "preview_function",
]

MAX_PREVIEW_CHARS = 2_000
"""A longer preview is cut here, with a visible marker (the full arguments stay one click away)."""


def preview_function(tool: Tool) -> Any:
    """The tool's preview: the `preview` option, or a `preview(arguments, ctx)` method of a `Tool`
    subclass; None without one."""
    fn = tool.options.preview
    if fn is not None:
        return fn
    method = getattr(tool, "preview", None)
    return method if callable(method) else None


def clean_preview(text: str) -> str:
    """The preview as shown: every invisible or control character except newlines escaped (a right-to-left
    override or a zero-width space could otherwise hide part of the action), cut to a bounded length."""
    text = text.strip()
    if len(text) > MAX_PREVIEW_CHARS:
        text = text[:MAX_PREVIEW_CHARS] + " … (preview cut)"
    if all(ch.isprintable() or ch == "\n" for ch in text):
        return text
    return "".join(
        ch
        if ch.isprintable() or ch == "\n"
        else (f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        for ch in text
    )


def _same(a: Any, b: Any) -> bool:
    try:
        return canonical_json(json_safe(a)) == canonical_json(json_safe(b))
    except Exception:  # no JSON form (`ResultNotJSON`) or no canonical one: not the same
        return False


def matching_rule(
    rules: Sequence[ApprovalRule], tool: str, arguments: Mapping[str, Any], now: float
) -> ApprovalRule | None:
    """The rule that decides this call: a matching `deny` rule first, else a matching `allow` rule, else
    None. A rule matches when it is for `tool`, unexpired, and every constrained argument is equal."""
    allow: ApprovalRule | None = None
    for rule in rules:
        if rule.tool != tool or rule.expired(now):
            continue
        constraints = rule.arguments or {}
        if any(
            name not in arguments or not _same(arguments[name], value) for name, value in constraints.items()
        ):
            continue
        if rule.decision == "deny":
            return rule
        if allow is None:
            allow = rule
    return allow


async def find_rule(
    store: ApprovalRuleStore | None, user_id: str | None, tool: str, arguments: Mapping[str, Any], now: float
) -> ApprovalRule | None:
    """`matching_rule` over `user_id`'s rules in `store` (no user, no store, or an empty store: None)."""
    if store is None or not user_id or store.empty() is True:
        return None
    return matching_rule(await store.list_rules(user_id, tool=tool), tool, arguments, now)


def describe_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """One line per argument the person changed: `name: old → new` (added and removed ones too)."""

    def show(value: Any) -> str:
        try:
            text = canonical_json(json_safe(value)).decode("utf-8", "replace")
        except Exception:
            text = f"<{type(value).__name__}>"
        return text if len(text) <= 200 else text[:200] + "…"

    lines: list[str] = []
    for name in dict.fromkeys([*before, *after]):
        if name not in after:
            lines.append(f"{name}: {show(before[name])} → (removed)")
        elif name not in before:
            lines.append(f"{name}: (not set) → {show(after[name])}")
        elif not _same(before[name], after[name]):
            lines.append(f"{name}: {show(before[name])} → {show(after[name])}")
    return lines
