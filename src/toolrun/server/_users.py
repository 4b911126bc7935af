"""Users and their API tokens. A token is shown once, when made; only its SHA-256 is stored.

Tokens are 256-bit random strings, so a plain SHA-256 is enough to make the stored hash useless to a
reader of the database (no password stretching needed), and it does not depend on the secret key: rotating
the key does not sign everyone out.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from toolrun.server._db import tokens, users
from toolrun.server._fixed import Fixed, transaction

__all__ = ["TOKEN_PREFIX", "Principal", "UserExistsError", "UserStore", "hash_token"]

TOKEN_PREFIX = "trk_"
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")


_PRINCIPAL = Fixed(
    sa.select(users.c.id, users.c.name, users.c.roles)
    .select_from(tokens.join(users, users.c.id == tokens.c.user_id))
    .where(
        tokens.c.token_hash == sa.bindparam("b_digest"),
        tokens.c.revoked_at.is_(None),
        users.c.disabled.is_(False),
    )
)
"""A token's principal: built once, and on the service's SQLite run straight on its connection (`_fixed`):
every request whose token is not in the cache asks it."""


class UserExistsError(ValueError):
    """A user of that name exists already."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who a request acts for: the user's id, name and roles."""

    user_id: str
    name: str
    roles: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class UserInfo:
    id: str
    name: str
    roles: tuple[str, ...]
    created_at: float
    disabled: bool
    active_tokens: int


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_name(name: str) -> str:
    if not 1 <= len(name) <= 64 or not set(name) <= _NAME_CHARS:
        raise ValueError("A user name is 1-64 letters, digits and _ . - @.")
    return name


class UserStore:
    """Add users, issue and revoke tokens, and resolve a bearer token to a `Principal`.

    Args:
        engine: The service's engine.
        cache_seconds: How long a resolved token is trusted without asking the database again.
    """

    def __init__(self, engine: AsyncEngine, *, cache_seconds: float = 5.0) -> None:
        self.engine = engine
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Principal | None]] = {}

    async def add(self, name: str, roles: Sequence[str] = ("member",)) -> tuple[Principal, str]:
        """Create a user and a first token; returns the principal and the token (shown once)."""
        check_name(name)
        user_id = "usr_" + secrets.token_hex(8)
        clean_roles = tuple(dict.fromkeys(r.strip() for r in roles if r.strip())) or ("member",)
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    users.insert().values(
                        id=user_id,
                        name=name,
                        roles=json.dumps(clean_roles),
                        created_at=time.time(),
                        disabled=False,
                    )
                )
        except IntegrityError:
            raise UserExistsError(f"A user named {name!r} exists already.") from None
        principal = Principal(user_id=user_id, name=name, roles=clean_roles)
        token = await self.issue_token(user_id)
        return principal, token

    async def issue_token(self, user_id: str, *, label: str | None = None) -> str:
        """A new token for the user (the only time it is visible)."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        async with self.engine.begin() as conn:
            await conn.execute(
                tokens.insert().values(
                    id="tok_" + secrets.token_hex(8),
                    user_id=user_id,
                    token_hash=hash_token(token),
                    label=label,
                    created_at=time.time(),
                )
            )
        return token

    async def get_by_name(self, name: str) -> Principal | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(users).where(users.c.name == name))).mappings().first()
        if row is None:
            return None
        return Principal(user_id=row["id"], name=row["name"], roles=tuple(json.loads(row["roles"])))

    async def list(self) -> list[UserInfo]:
        active = (
            sa.select(sa.func.count())
            .select_from(tokens)
            .where(tokens.c.user_id == users.c.id, tokens.c.revoked_at.is_(None))
            .scalar_subquery()
        )
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(sa.select(users, active.label("active")).order_by(users.c.name))
            ).mappings()
            return [
                UserInfo(
                    id=r["id"],
                    name=r["name"],
                    roles=tuple(json.loads(r["roles"])),
                    created_at=r["created_at"],
                    disabled=bool(r["disabled"]),
                    active_tokens=int(r["active"]),
                )
                for r in rows
            ]

    async def revoke(self, name: str) -> int:
        """Revoke every token of the user `name` and disable the user; returns how many tokens were revoked.

        Raises:
            LookupError: no such user.
        """
        user = await self.get_by_name(name)
        if user is None:
            raise LookupError(f"No user named {name!r}.")
        async with self.engine.begin() as conn:
            result = await conn.execute(
                tokens.update()
                .where(tokens.c.user_id == user.user_id, tokens.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            await conn.execute(users.update().where(users.c.id == user.user_id).values(disabled=True))
        self._cache.clear()
        return max(0, result.rowcount)

    async def authenticate(self, token: str) -> Principal | None:
        """The principal of a valid, unrevoked token of an enabled user; None otherwise."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        digest = hash_token(token)
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        async with transaction(self.engine) as conn:
            rows = await _PRINCIPAL.rows(conn, {"b_digest": digest})
        row = rows[0] if rows else None
        principal = (
            None if row is None else Principal(user_id=row[0], name=row[1], roles=tuple(json.loads(row[2])))
        )
        if self.cache_seconds > 0:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now + self.cache_seconds, principal)
        return principal
