"""What a user's message must be to enter a conversation, the same at every door (JSON chat, SSE, AG-UI,
AI SDK, the service itself): some text, not too long, valid Unicode, no NUL.

NUL cannot be stored in a PostgreSQL text column, and a lone surrogate (a JSON `"\\ud83d"` escape with no
pair) cannot be encoded as UTF-8 at all: either would fail the turn after it was accepted. Refusing them
up front gives the client a clear 422 (or its protocol's error event) instead (the rule for every
client door: `toolrun._unicode`).
"""

from __future__ import annotations

from toolrun._unicode import text_problem

__all__ = ["MAX_MESSAGE_CHARS", "message_problem"]

MAX_MESSAGE_CHARS = 32_000


def message_problem(text: str) -> str | None:
    """Why `text` cannot be a user's message, or None."""
    if not text.strip():
        return "The message is empty."
    if len(text) > MAX_MESSAGE_CHARS:
        return f"The message is longer than {MAX_MESSAGE_CHARS} characters."
    problem = text_problem(text)
    return None if problem is None else f"The message {problem}."
