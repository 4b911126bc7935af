"""`Session`: typed values in a `ToolContext.state`, each kept by a reducer, so they travel with the state.

```python
session = Session.of(ctx)            # a view over ctx.state; nothing is copied
session[Plan].latest()               # the current plan, or None
session[Plan].update(new_plan)       # reducer(latest, new_plan) becomes the latest value
```

Each value is stored as JSON text under one key of the state (`"toolrun.session"`): a string, so the
executor's copy of the state before every call costs next to nothing however large the plan, and what the
executor already does for the state covers sessions too: its snapshot before a call and rollback when the
call fails, and a paused `AgentRun`'s JSON (the run keeps the state it gave its tools). Values are rebuilt
from that data on read; hold on to a value, never to the stored data.

A kind of value is a Pydantic model. Its reducer decides how an update combines with the latest value; the
default replaces it. Register another with `register_kind(Kind, key=..., reducer=...)`. toolrun's own kinds
(`Plan`) are declared here and looked up on first use: importing toolrun registers nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from toolrun.tools import ToolContext

__all__ = ["Channel", "Kind", "Session", "register_kind"]

STATE_KEY = "toolrun.session"
"""The key of the state under which every session value is stored."""

M = TypeVar("M", bound=BaseModel)


def replace(current: Any, update: Any) -> Any:
    """The default reducer: the update becomes the latest value."""
    return update


@dataclass(frozen=True, slots=True)
class Kind(Generic[M]):
    """How one kind of value is kept in a session."""

    type: type[M]
    """The Pydantic model of the values."""
    key: str
    """Where under the session they are stored (stable across versions: it is in saved runs)."""
    reducer: Callable[[M | None, M], M]
    """Combines the latest value (None at first) with an update into the new latest value."""
    history: int = 0
    """How many earlier values are kept besides the latest (each is a string in the state)."""


_KINDS: dict[type[BaseModel], Kind[Any]] = {}
"""The kinds registered with `register_kind` (they take precedence over toolrun's own)."""


@functools.cache
def _own_kinds() -> dict[type[BaseModel], Kind[Any]]:
    """toolrun's own kinds, built on first use (nothing is registered at import)."""
    from toolrun.planning._plan import Plan

    return {Plan: Kind(type=Plan, key="toolrun.plan", reducer=replace)}


def register_kind(
    kind: type[M],
    *,
    key: str | None = None,
    reducer: Callable[[M | None, M], M] | None = None,
    history: int = 0,
) -> Kind[M]:
    """Declare how values of `kind` are kept (its storage key and reducer); returns the `Kind`.

    Unregistered models work too: they are stored under their qualified name and replaced on update.
    """
    if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
        raise TypeError(f"A session kind must be a Pydantic model class, not {kind!r}.")
    if history < 0:
        raise ValueError("history must be >= 0.")
    spec: Kind[M] = Kind(
        type=kind,
        key=key or f"{kind.__module__}.{kind.__qualname__}",
        reducer=reducer or replace,
        history=history,
    )
    taken = {k.key: t for t, k in {**_own_kinds(), **_KINDS}.items()}
    if taken.get(spec.key, kind) is not kind:
        raise ValueError(f"Session key {spec.key!r} is already used by {taken[spec.key].__qualname__}.")
    _KINDS[kind] = spec
    return spec


def _kind(kind: type[M]) -> Kind[M]:
    spec = _KINDS.get(kind)
    if spec is None:
        spec = _own_kinds().get(kind)
    return spec if spec is not None else register_kind(kind)


class Channel(Generic[M]):
    """The values of one kind in one session: the latest, a short history, and updates through the reducer."""

    __slots__ = ("_session", "kind")

    def __init__(self, session: Session, kind: Kind[M]) -> None:
        self._session = session
        self.kind = kind

    def _slot(self) -> dict[str, Any] | None:
        root = self._session.state.get(STATE_KEY)
        return None if root is None else root.get(self.kind.key)

    def _write(self, values: list[str], revision: int) -> None:
        # Copy on write: the top-level key gets a new object and nothing already in the state is changed
        # in place, so a snapshot, a rollback or a per-call overlay of the state sees every write as a
        # write of `state["toolrun.session"]` (none leaks past a shallow copy).
        root = dict(self._session.state.get(STATE_KEY) or {})
        root[self.kind.key] = {"revision": revision, "values": values}
        self._session.state[STATE_KEY] = root

    @property
    def revision(self) -> int:
        """How many updates this channel has taken (0 before the first)."""
        slot = self._slot()
        return int(slot["revision"]) if slot is not None else 0

    def latest(self) -> M | None:
        """The current value, or None if there is none yet."""
        slot = self._slot()
        if slot is None or not slot["values"]:
            return None
        return self.kind.type.model_validate_json(slot["values"][-1])

    def history(self) -> list[M]:
        """The kept values, oldest first, the latest last."""
        slot = self._slot()
        return [self.kind.type.model_validate_json(v) for v in slot["values"]] if slot is not None else []

    def update(self, value: M) -> M:
        """Combine `value` with the latest through the reducer, store and return the result.

        The read and the write happen with no await between them, so concurrent coroutines sharing one
        state cannot interleave inside an update.
        """
        if not isinstance(value, self.kind.type):
            raise TypeError(f"Expected a {self.kind.type.__qualname__}, got {type(value).__qualname__}.")
        new = self.kind.reducer(self.latest(), value)
        slot = self._slot() or {"revision": 0, "values": []}
        values = [*slot["values"], new.model_dump_json()][-(self.kind.history + 1) :]
        self._write(values, int(slot["revision"]) + 1)
        return new

    def clear(self) -> None:
        """Forget every value of this kind (the revision keeps counting)."""
        slot = self._slot()
        if slot is not None:
            self._write([], int(slot["revision"]))


class Session:
    """Typed, reducer-kept values over a state mapping (usually `ToolContext.state`).

    Args:
        state: The mapping the values live in; it is changed in place.
    """

    __slots__ = ("state",)

    def __init__(self, state: MutableMapping[str, Any]) -> None:
        self.state = state

    @classmethod
    def of(cls, context: ToolContext[Any]) -> Session:
        """The session of a tool context. Raises `ValueError` when the context carries no state."""
        if context.state is None:
            raise ValueError(
                "This context has no session state: run under an Agent (each run has a state), or pass "
                "ToolContext(state={})."
            )
        return cls(context.state)

    def __getitem__(self, kind: type[M]) -> Channel[M]:
        return Channel(self, _kind(kind))

    def __repr__(self) -> str:
        root = self.state.get(STATE_KEY) or {}
        return f"<Session {sorted(root)}>"
