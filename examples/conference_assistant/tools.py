"""The assistant's tools and the (in-memory) conference back end they talk to.

`lookup_registration` needs an e-mail or a registration id and returns private data; the two e-mail tools
share one rate limit (key `email_send`) and are private too. Nothing here logs an argument value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolrun import ToolContext, ToolError, ToolRegistry
from toolrun.tools import RateLimit

EMAIL_LIMIT = RateLimit(limit=3, period=3600.0, key="email_send")
"""At most 3 e-mails per user per hour, whichever e-mail tool sends them."""


@dataclass
class ConferenceBackend:
    """Registrations, sessions and an outbox; `failing=True` makes every call raise (an outage)."""

    registrations: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "REG-1001": {
                "name": "Ada Lovelace",
                "email": "ada@example.org",
                "ticket": "Full pass",
                "status": "confirmed",
            },
            "REG-1002": {
                "name": "Alan Turing",
                "email": "alan@example.org",
                "ticket": "Day 1",
                "status": "awaiting payment",
            },
        }
    )
    sessions: list[dict[str, str]] = field(
        default_factory=lambda: [
            {"title": "Tool calling in production", "room": "A", "time": "09:30"},
            {"title": "Graphs for agents", "room": "B", "time": "11:00"},
            {"title": "Privacy by design", "room": "A", "time": "14:00"},
        ]
    )
    outbox: list[dict[str, str]] = field(default_factory=list)
    failing: bool = False

    def check(self) -> None:
        if self.failing:
            raise ConnectionError("registration database unreachable at db.internal:5432")

    def find(self, email: str | None, registration_id: str | None) -> tuple[str, dict[str, Any]] | None:
        self.check()
        if registration_id:
            reg = self.registrations.get(registration_id.strip().upper())
            return (registration_id.strip().upper(), reg) if reg else None
        for rid, reg in self.registrations.items():
            if email and reg["email"].lower() == email.strip().lower():
                return rid, reg
        return None


def _deps_backend(ctx: ToolContext[Any]) -> ConferenceBackend:
    if not isinstance(ctx.deps, ConferenceBackend):
        raise ToolError("NOT_CONFIGURED", "The conference back end is not configured.")
    return ctx.deps


MISSING_IDENTIFIER = "MISSING_IDENTIFIER"


def build_registry(backend: ConferenceBackend | None = None) -> ToolRegistry:
    """The assistant's tools (a new registry each time: duplicate names are an error). With `backend`,
    every call uses it; without, each call's `ctx.deps` (the graph passes its own)."""
    registry = ToolRegistry()

    def _backend(ctx: ToolContext[Any]) -> ConferenceBackend:
        return backend if backend is not None else _deps_backend(ctx)

    @registry.register(read_only=True, private=True)
    def lookup_registration(
        ctx: ToolContext, email: str | None = None, registration_id: str | None = None
    ) -> dict[str, Any]:
        """Look up an attendee's registration (status, ticket). Needs the attendee's e-mail address or
        registration id; if the user gave neither, ask for one instead of calling this tool.

        Args:
            email: The e-mail address used to register, e.g. "ada@example.org".
            registration_id: The registration id, e.g. "REG-1001".
        """
        if not (email or "").strip() and not (registration_id or "").strip():
            raise ToolError(
                MISSING_IDENTIFIER,
                "An e-mail address or a registration id is needed to find a registration.",
                recover_action="Ask the user for the e-mail address they registered with, or their "
                "registration id.",
            )
        found = _backend(ctx).find(email, registration_id)
        if found is None:
            raise ToolError(
                "NOT_REGISTERED",
                "No registration matches these details.",
                recover_action="Ask the user to check the e-mail address or registration id.",
            )
        rid, reg = found
        return {"registration_id": rid, "name": reg["name"], "ticket": reg["ticket"], "status": reg["status"]}

    @registry.register(private=True, rate_limit=EMAIL_LIMIT, open_world=True)
    def send_registration_email(ctx: ToolContext, registration_id: str) -> dict[str, Any]:
        """Send the registration confirmation again, to the address the attendee registered with.

        Args:
            registration_id: The registration id, e.g. "REG-1001".
        """
        backend = _backend(ctx)
        found = backend.find(None, registration_id)
        if found is None:
            raise ToolError("NOT_REGISTERED", "No registration has this id.")
        rid, reg = found
        backend.outbox.append({"to": reg["email"], "subject": f"Your registration {rid}"})
        return {"sent": True, "registration_id": rid}

    @registry.register(private=True, rate_limit=EMAIL_LIMIT, open_world=True)
    def send_schedule_email(ctx: ToolContext, registration_id: str) -> dict[str, Any]:
        """E-mail the conference schedule to a registered attendee.

        Args:
            registration_id: The registration id, e.g. "REG-1001".
        """
        backend = _backend(ctx)
        found = backend.find(None, registration_id)
        if found is None:
            raise ToolError("NOT_REGISTERED", "No registration has this id.")
        rid, reg = found
        backend.outbox.append({"to": reg["email"], "subject": "The schedule"})
        return {"sent": True, "registration_id": rid}

    @registry.register(read_only=True)
    def search_sessions(ctx: ToolContext, topic: str = "") -> list[dict[str, str]]:
        """Find conference sessions by topic (all sessions when the topic is empty).

        Args:
            topic: A word from the session title, e.g. "privacy".
        """
        backend = _backend(ctx)
        backend.check()
        words = topic.lower().split()
        return [s for s in backend.sessions if all(w in s["title"].lower() for w in words)]

    return registry
