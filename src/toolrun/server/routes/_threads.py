"""Threads of front-end protocols (AG-UI `threadId`, AI SDK chat `id`) as the user's conversations.

A client names its thread itself; the server keeps conversations under its own ids. A thread id that is
one of the user's conversation ids is that conversation; any other maps to a conversation id derived from
(user, thread id), created on the thread's first message. Another user's thread can never land in this
user's conversation: the user is part of the derivation, and every lookup is by user too.

The client resends the whole history on every request; the stored conversation is what counts. Only the
client's last message can be new, and a resend of the last message the server already has is refused
instead of being answered twice.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from toolrun.models._history import clean_text
from toolrun.server import _db
from toolrun.server._service import ChatService
from toolrun.server._text import MAX_MESSAGE_CHARS, message_problem
from toolrun.server._users import Principal

__all__ = ["Thread", "check_text", "find_thread", "open_thread"]

MAX_TEXT = MAX_MESSAGE_CHARS


class Thread:
    """A client's thread as the server knows it."""

    def __init__(self, conversation_id: str, *, exists: bool, detail: dict[str, Any] | None) -> None:
        self.conversation_id = conversation_id
        self.exists = exists
        self.detail = detail
        """`ChatService.thread_state`: the stored user texts and the pending confirmations."""

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The conversation's pending confirmations (the server's records)."""
        return list((self.detail or {}).get("pending") or [])

    def user_texts(self) -> list[str]:
        return list((self.detail or {}).get("user_texts") or ())

    def is_resend(self, client_user_texts: list[str]) -> bool:
        """Whether the client's last user message is the last one this conversation already answered."""
        stored = self.user_texts()
        return (
            bool(stored) and len(client_user_texts) <= len(stored) and client_user_texts[-1:] == stored[-1:]
        )


def _derived_id(user_id: str, thread_id: str) -> str:
    digest = hashlib.sha256(f"{user_id}\0{thread_id}".encode()).hexdigest()
    return f"conv_t{digest[:24]}"


async def find_thread(chat: ChatService, user: Principal, thread_id: str) -> Thread:
    """The conversation behind a client's thread id (it may not exist yet)."""
    for candidate in (thread_id, _derived_id(user.user_id, thread_id)):
        if not candidate.startswith("conv_") or len(candidate) > 40:
            continue
        detail = await chat.thread_state(user, candidate)
        if detail is not None:
            return Thread(candidate, exists=True, detail=detail)
    return Thread(_derived_id(user.user_id, thread_id), exists=False, detail=None)


async def open_thread(chat: ChatService, user: Principal, thread: Thread, first_message: str) -> None:
    """Create the conversation of a new thread (a racing request that created it first is fine)."""
    if thread.exists:
        return
    now = time.time()
    title = clean_text(" ".join(first_message.split()))[:80] or "Conversation"
    try:
        async with chat.engine.begin() as conn:
            await conn.execute(
                sa.insert(_db.conversations).values(
                    id=thread.conversation_id,
                    user_id=user.user_id,
                    title=title,
                    created_at=now,
                    updated_at=now,
                )
            )
    except IntegrityError:
        pass  # created meanwhile; start_message checks it is this user's
    thread.exists = True


def check_text(text: str) -> str | None:
    """Why a user message cannot be sent, or None (the same rule as every other door)."""
    return message_problem(text)
