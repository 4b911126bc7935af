"""What a user's message must be to enter a conversation, the same at every door (JSON chat, SSE, AG-UI,
AI SDK, the service itself): some text, not too long, valid Unicode, no NUL.

NUL cannot be stored in a PostgreSQL text column, and a lone surrogate (a JSON `"\\ud83d"` escape with no
pair) cannot be encoded as UTF-8 at all: either would fail the turn after it was accepted. Refusing them
up front gives the client a clear 422 (or its protocol's error event) instead (the rule for every
client door: `toolrun._unicode`).
"""

from __future__ import annotations

import re

from toolrun._unicode import text_problem

__all__ = ["MAX_MESSAGE_CHARS", "TITLE_PATTERN", "conversation_title", "message_problem", "title_problem"]

MAX_MESSAGE_CHARS = 32_000


def message_problem(text: str) -> str | None:
    """Why `text` cannot be a user's message, or None."""
    if not text.strip():
        return "The message is empty."
    if len(text) > MAX_MESSAGE_CHARS:
        return f"The message is longer than {MAX_MESSAGE_CHARS} characters."
    problem = text_problem(text)
    return None if problem is None else f"The message {problem}."


MAX_TITLE_CHARS = 120
_TITLE_WORDS = 7
_TITLE_CHARS = 48
_MARKUP = re.compile(
    r"```.*?(```|$)|`|\*\*?|__|~~|(?m:^\s*(?:#{1,6}|>|[-+*]|\d+[.)])\s)|!?\[([^\]]*)\]\([^)]*\)|<[^>]{0,200}>",
    re.DOTALL,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
TITLE_PATTERN = (
    "^[^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u2028-\\u202e\\u2066-\\u2069]*"
    "[^\\s\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u2028-\\u202e\\u2066-\\u2069]"
    "[^\\u0000-\\u001f\\u007f-\\u009f\\u200b-\\u200f\\u2028-\\u202e\\u2066-\\u2069]*$"
)
"""`title_problem`'s rule as a JSON Schema pattern: not blank; no control, zero-width or direction mark."""


def _plain(text: str) -> str:
    def keep(match: re.Match[str]) -> str:
        if match.group(2) is not None:  # a link: its words
            return f" {match.group(2)} "
        return " "

    text = _MARKUP.sub(keep, text)
    return " ".join(_CONTROL.sub(" ", text).split())


def conversation_title(message: str) -> str:
    """A title a person would give a conversation, from its first message: its first words, without
    markdown or markup, cut at a word boundary (`…` when cut); "Conversation" when nothing is left."""
    words = _plain(message).split()
    if not words:
        return "Conversation"
    title, used = "", 0
    for word in words[:_TITLE_WORDS]:
        candidate = f"{title} {word}" if title else word
        if len(candidate) > _TITLE_CHARS:
            if not title:
                title = word[: _TITLE_CHARS - 1]
            break
        title, used = candidate, used + 1
    if used < len(words):
        title = title.rstrip(".,;:!?-–—") + "…"
    return (title[:1].upper() + title[1:]) or "Conversation"


def title_problem(title: str) -> str | None:
    """Why `title` cannot be a conversation's title (after trimming), or None."""
    if not title.strip():
        return "The title is empty."
    if len(title) > MAX_TITLE_CHARS:
        return f"The title is longer than {MAX_TITLE_CHARS} characters."
    if _CONTROL.search(title):
        return "The title holds a control character (a line break, a tab, NUL); remove it."
    return message_problem(title)
