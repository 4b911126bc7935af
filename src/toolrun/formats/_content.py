"""What every format needs to render a result's content items (`ToolResult.content`).

A result with content is rendered as a list of parts: first the *lead* text (the result's message, or its
value as JSON, when there is one), then each item in order. Each format maps the items its provider takes
to its own blocks and the others to a one-line text note (`toolrun.content.describe`), so the model always
learns that something was there.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolrun.content import Audio, File, Image, ResourceLink, Text
from toolrun.results import ToolResult

__all__ = ["follows", "has_content", "is_text_file", "lead_text", "parts", "text_of"]


def lead_text(result: ToolResult) -> str | None:
    """The text before the content: the message, the value as JSON, or None when there is neither."""
    if result.message is not None:
        return result.message
    if result.exclude_value_from_context:
        return "Done. (The result was delivered to the user and is not shown here.)"
    if result.value is None:
        return None
    return ToolResult(value=result.value).render()


def parts(result: ToolResult) -> Iterator[Text | Image | Audio | File | ResourceLink]:
    """The lead text (as a `Text`) and then every content item, for an `ok` result with content."""
    lead = lead_text(result)
    if lead is not None:
        yield Text(lead)
    yield from result.content


def has_content(result: ToolResult) -> bool:
    """Whether the result is rendered with its content (only `ok` results carry any)."""
    return bool(result.content) and result.status == "ok"


def is_text_file(item: File) -> bool:
    """A file whose bytes are text (sent as text where a provider takes text documents)."""
    media = item.media_type or ""
    textual = media.startswith("text/") or media in ("application/json", "application/xml")
    return item.data is not None and textual


def text_of(item: File) -> str:
    return (item.data or b"").decode("utf-8", "replace")


def follows(call_id: str, tool_name: str) -> str:
    """The text that opens a message carrying a call's content after its result (Chat Completions)."""
    return (
        f"Content returned by the tool call {call_id} ({tool_name}), "
        "attached here because tool messages take text only:"
    )
