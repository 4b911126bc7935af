"""Tasks and attachments in SQL (SQLite or PostgreSQL), always scoped to one user.

Every method takes the user id first and filters on it: a task of another user is invisible, exactly like
a task that does not exist. The tables are created by the service's Alembic migrations
(`toolrun db upgrade`); `create_tables` exists for tests and embedded use.

Full-text search over title and description: SQLite keeps an FTS5 table (`toolrun_tasks_fts`, external
content on the tasks' rowid, kept in step by triggers); PostgreSQL a generated `tsvector` column with a
GIN index. Both are made by the migration (and by `create_tables`).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = [
    "PRIORITIES",
    "STATUSES",
    "Attachment",
    "Task",
    "TaskQuery",
    "TaskStore",
    "metadata",
    "utcnow",
]

PRIORITIES = ("low", "medium", "high", "critical")
STATUSES = ("pending", "in_progress", "done")
_PRIORITY_RANK = {p: i for i, p in enumerate(PRIORITIES)}

metadata = sa.MetaData()

tasks_table = sa.Table(
    "toolrun_tasks",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column("title", sa.String(255), nullable=False),
    sa.Column("description", sa.Text(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("priority", sa.String(16), nullable=False),
    sa.Column("priority_rank", sa.Integer(), nullable=False),
    sa.Column("eta", sa.String(32), nullable=True),  # ISO 8601 UTC, fixed width: sorts as it reads
    sa.Column("tags", sa.Text(), nullable=False),  # JSON list, in the order given
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Column("updated_at", sa.String(32), nullable=False),
    sa.Index("toolrun_tasks_user_eta", "user_id", "eta"),
    sa.Index("toolrun_tasks_user_created", "user_id", "created_at"),
)

task_tags_table = sa.Table(
    "toolrun_task_tags",
    metadata,
    sa.Column(
        "task_id", sa.String(40), sa.ForeignKey("toolrun_tasks.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("tag", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Index("toolrun_task_tags_user_tag", "user_id", "tag"),
)

attachments_table = sa.Table(
    "toolrun_attachments",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(64), nullable=False),
    sa.Column(
        "task_id", sa.String(40), sa.ForeignKey("toolrun_tasks.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("url", sa.Text(), nullable=False),
    sa.Column("title", sa.Text(), nullable=True),
    sa.Column("kind", sa.String(32), nullable=False),  # "link", "github_pull", "github_issue"
    sa.Column("state", sa.String(32), nullable=True),
    sa.Column("remote_updated_at", sa.String(32), nullable=True),
    sa.Column("refreshed_at", sa.String(32), nullable=True),
    sa.Column("created_at", sa.String(32), nullable=False),
    sa.Index("toolrun_attachments_task", "task_id"),
    sa.Index("toolrun_attachments_user", "user_id"),
)

SQLITE_FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS toolrun_tasks_fts USING fts5("
    "title, description, content='toolrun_tasks', content_rowid='rowid', tokenize='unicode61')",
    "CREATE TRIGGER IF NOT EXISTS toolrun_tasks_fts_ai AFTER INSERT ON toolrun_tasks BEGIN "
    "INSERT INTO toolrun_tasks_fts(rowid, title, description) "
    "VALUES (new.rowid, new.title, new.description); "
    "END",
    "CREATE TRIGGER IF NOT EXISTS toolrun_tasks_fts_ad AFTER DELETE ON toolrun_tasks BEGIN "
    "INSERT INTO toolrun_tasks_fts(toolrun_tasks_fts, rowid, title, description) "
    "VALUES ('delete', old.rowid, old.title, old.description); END",
    "CREATE TRIGGER IF NOT EXISTS toolrun_tasks_fts_au AFTER UPDATE ON toolrun_tasks BEGIN "
    "INSERT INTO toolrun_tasks_fts(toolrun_tasks_fts, rowid, title, description) "
    "VALUES ('delete', old.rowid, old.title, old.description); "
    "INSERT INTO toolrun_tasks_fts(rowid, title, description) "
    "VALUES (new.rowid, new.title, new.description); "
    "END",
)
SQLITE_FTS_DROP = (
    "DROP TRIGGER IF EXISTS toolrun_tasks_fts_au",
    "DROP TRIGGER IF EXISTS toolrun_tasks_fts_ad",
    "DROP TRIGGER IF EXISTS toolrun_tasks_fts_ai",
    "DROP TABLE IF EXISTS toolrun_tasks_fts",
)
POSTGRES_FTS_DDL = (
    "ALTER TABLE toolrun_tasks ADD COLUMN IF NOT EXISTS search tsvector GENERATED ALWAYS AS "
    "(to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(description, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS toolrun_tasks_search ON toolrun_tasks USING gin (search)",
)
POSTGRES_FTS_DROP = (
    "DROP INDEX IF EXISTS toolrun_tasks_search",
    "ALTER TABLE toolrun_tasks DROP COLUMN IF EXISTS search",
)

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_SEARCH_WORDS = 16


def utcnow() -> str:
    """Now, as fixed-width ISO 8601 UTC text with microseconds (sorts as it reads; keeps insertion order)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def iso(value: datetime) -> str:
    """A datetime as `YYYY-MM-DDTHH:MM:SSZ` in UTC, always that width (naive values are taken as UTC).

    Raises:
        OverflowError: the time in UTC falls outside years 1-9999.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    # `%Y` does not pad years before 1000 ("999-12-31"), and these strings are compared as text in SQL.
    return f"{value.year:04d}" + value.strftime("-%m-%dT%H:%M:%SZ")


def search_words(text: str) -> list[str]:
    """The words of a free-text search (punctuation and operators dropped: no query syntax injection)."""
    return _WORD.findall(text.lower())[:MAX_SEARCH_WORDS]


@dataclass(kw_only=True)
class Task:
    """One task, as the tools return it."""

    id: str
    title: str
    description: str | None
    status: str
    priority: str
    eta: str | None
    tags: list[str]
    created_at: str
    updated_at: str
    attachments: list[Attachment] | None = None

    def to_dict(self, format: str = "standard") -> dict[str, Any]:
        if format == "concise":
            return {"id": self.id, "status": self.status}
        data: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "status": self.status,
            "priority": self.priority,
            "eta": self.eta,
            "tags": list(self.tags),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }
        if format == "detailed":
            data["attachments"] = [a.to_dict() for a in self.attachments or ()]
        return data


@dataclass(kw_only=True)
class Attachment:
    """A URL attached to a task; GitHub pull requests and issues carry their remote title and state."""

    id: str
    task_id: str
    url: str
    title: str | None
    kind: str
    state: str | None
    remote_updated_at: str | None
    refreshed_at: str | None
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "url": self.url,
            "title": self.title,
            "kind": self.kind,
            "state": self.state,
            "remote_updated_at": self.remote_updated_at,
            "refreshed_at": self.refreshed_at,
            "created_at": self.created_at,
        }


@dataclass(kw_only=True)
class TaskQuery:
    """What `query_tasks` filters on (all optional; combined with AND)."""

    status: str | None = None
    priority: str | None = None
    due_before: str | None = None
    due_after: str | None = None
    tags: list[str] = field(default_factory=list)
    text: str | None = None
    limit: int = 50
    sort: Literal["eta_asc", "priority_desc", "created_desc"] = "eta_asc"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(6)}"


def _task(row: sa.RowMapping) -> Task:
    return Task(
        id=row["id"],
        title=row["title"],
        description=row["description"],
        status=row["status"],
        priority=row["priority"],
        eta=row["eta"],
        tags=list(json.loads(row["tags"])),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _attachment(row: sa.RowMapping) -> Attachment:
    return Attachment(
        id=row["id"],
        task_id=row["task_id"],
        url=row["url"],
        title=row["title"],
        kind=row["kind"],
        state=row["state"],
        remote_updated_at=row["remote_updated_at"],
        refreshed_at=row["refreshed_at"],
        created_at=row["created_at"],
    )


_TASK_COLUMNS = [c for c in tasks_table.c if c.name != "priority_rank"]

# The statements a chat turn's task tools run, built once at import: building a Core statement (and its
# cache key, which SQLAlchemy memoises on the statement object) costs more CPU than SQLite takes to run
# it. Executed with a parameter dict (the insert) or bound by name (`sa.bindparam`), so every call shares
# the one compiled form in the engine's statement cache.
_bp = sa.bindparam
_INSERT_TASK = tasks_table.insert()
_INSERT_TAGS = task_tags_table.insert()
_INSERT_ATTACHMENT = attachments_table.insert()
_OWN_TASK_WHERE = (tasks_table.c.id == _bp("b_task_id"), tasks_table.c.user_id == _bp("b_user_id"))
_OWN_TASK_ROW = sa.select(*_TASK_COLUMNS).where(*_OWN_TASK_WHERE)
_OWN_TASK_ID = sa.select(tasks_table.c.id).where(*_OWN_TASK_WHERE)


class TaskStore:
    """The user-scoped task and attachment operations the tools (and the HTTP API) call.

    Args:
        engine: The service's async engine (SQLite or PostgreSQL).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name

    async def create_tables(self) -> None:
        """Create the tables and the full-text index if missing (the migrations do this in production)."""
        async with self.engine.begin() as conn:
            await conn.run_sync(metadata.create_all, checkfirst=True)
            await create_fts(conn)

    # -- tasks --------------------------------------------------------------------------------------------

    async def create(
        self,
        user_id: str,
        *,
        title: str,
        description: str | None,
        priority: str,
        eta: str | None,
        tags: Sequence[str],
    ) -> Task:
        now = utcnow()
        task = Task(
            id=_new_id("task"),
            title=title,
            description=description,
            status="pending",
            priority=priority,
            eta=eta,
            tags=list(dict.fromkeys(tags)),
            created_at=now,
            updated_at=now,
        )
        async with self.engine.begin() as conn:
            await conn.execute(
                _INSERT_TASK,
                {
                    "id": task.id,
                    "user_id": user_id,
                    "title": task.title,
                    "description": task.description,
                    "status": task.status,
                    "priority": task.priority,
                    "priority_rank": _PRIORITY_RANK[task.priority],
                    "eta": task.eta,
                    "tags": json.dumps(task.tags),
                    "created_at": now,
                    "updated_at": now,
                },
            )
            await self._write_tags(conn, user_id, task.id, task.tags)
        return task

    async def get(self, user_id: str, task_id: str, *, attachments: bool = False) -> Task | None:
        async with self.engine.connect() as conn:
            row = await _own_task_row(conn, user_id, task_id)
            if row is None:
                return None
            task = _task(row)
            if attachments:
                task.attachments = await self._attachments(conn, user_id, [task.id])
        return task

    async def update(self, user_id: str, task_id: str, changes: dict[str, Any]) -> Task | None:
        """Apply `changes` (only the given fields); None when the user has no such task."""
        values = dict(changes)
        tags = values.pop("tags", None)
        if tags is not None:
            tags = list(dict.fromkeys(tags))
            values["tags"] = json.dumps(tags)
        if "priority" in values:
            values["priority_rank"] = _PRIORITY_RANK[values["priority"]]
        t = tasks_table
        async with self.engine.begin() as conn:
            exists = (await conn.execute(_OWN_TASK_ID, {"b_task_id": task_id, "b_user_id": user_id})).first()
            if exists is None:
                return None
            if values:
                values["updated_at"] = utcnow()
                await conn.execute(
                    t.update().where(t.c.id == task_id, t.c.user_id == user_id).values(**values)
                )
            if tags is not None:
                await conn.execute(task_tags_table.delete().where(task_tags_table.c.task_id == task_id))
                await self._write_tags(conn, user_id, task_id, tags)
            row = (await conn.execute(sa.select(*_TASK_COLUMNS).where(t.c.id == task_id))).mappings().one()
        return _task(row)

    async def delete(self, user_id: str, task_id: str) -> Task | None:
        t = tasks_table
        async with self.engine.begin() as conn:
            row = await _own_task_row(conn, user_id, task_id)
            if row is None:
                return None
            # Children first: SQLite enforces foreign keys only when asked to, so do not rely on CASCADE.
            await conn.execute(attachments_table.delete().where(attachments_table.c.task_id == task_id))
            await conn.execute(task_tags_table.delete().where(task_tags_table.c.task_id == task_id))
            await conn.execute(t.delete().where(t.c.id == task_id, t.c.user_id == user_id))
        return _task(row)

    async def query(self, user_id: str, q: TaskQuery, *, attachments: bool = False) -> tuple[list[Task], int]:
        """The user's tasks matching `q` (at most `q.limit`), and how many match in all."""
        t = tasks_table
        where: list[Any] = [t.c.user_id == user_id]
        if q.status is not None:
            where.append(t.c.status == q.status)
        if q.priority is not None:
            where.append(t.c.priority == q.priority)
        if q.due_before is not None:
            where.append(t.c.eta.is_not(None))
            where.append(t.c.eta < q.due_before)
        if q.due_after is not None:
            where.append(t.c.eta.is_not(None))
            where.append(t.c.eta > q.due_after)
        if q.tags:
            tags = list(dict.fromkeys(q.tags))
            tt = task_tags_table
            having = (
                sa.select(tt.c.task_id)
                .where(tt.c.user_id == user_id, tt.c.tag.in_(tags))
                .group_by(tt.c.task_id)
                .having(sa.func.count(sa.distinct(tt.c.tag)) == len(tags))
            )
            where.append(t.c.id.in_(having))
        if q.text:
            words = search_words(q.text)
            if not words:
                return [], 0
            where.append(self._match(words))
        if q.sort == "priority_desc":
            order = [t.c.priority_rank.desc(), t.c.created_at.desc(), t.c.id]
        elif q.sort == "created_desc":
            order = [t.c.created_at.desc(), t.c.id.desc()]
        else:  # eta_asc: tasks without a due date last
            order = [sa.case((t.c.eta.is_(None), 1), else_=0), t.c.eta, t.c.created_at, t.c.id]
        stmt = sa.select(*_TASK_COLUMNS).where(*where).order_by(*order).limit(q.limit)
        count = sa.select(sa.func.count()).select_from(t).where(*where)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
            total = int((await conn.execute(count)).scalar_one())
            tasks = [_task(r) for r in rows]
            if attachments and tasks:
                found = await self._attachments(conn, user_id, [x.id for x in tasks])
                by_task: dict[str, list[Attachment]] = {}
                for a in found:
                    by_task.setdefault(a.task_id, []).append(a)
                for x in tasks:
                    x.attachments = by_task.get(x.id, [])
        return tasks, total

    def _match(self, words: list[str]) -> Any:
        if self.dialect == "postgresql":
            query = " & ".join(f"{w}:*" for w in words)
            return sa.literal_column("toolrun_tasks.search").op("@@")(
                sa.func.to_tsquery(
                    sa.literal_column("'simple'"), sa.bindparam("fts_q", query, type_=sa.Text())
                )
            )
        match = " ".join(f'"{w}"*' for w in words)
        sub = sa.text("SELECT rowid FROM toolrun_tasks_fts WHERE toolrun_tasks_fts MATCH :fts_q").bindparams(
            fts_q=match
        )
        return sa.literal_column("toolrun_tasks.rowid").in_(sub)

    async def _write_tags(
        self, conn: AsyncConnection, user_id: str, task_id: str, tags: Sequence[str]
    ) -> None:
        if tags:
            await conn.execute(
                _INSERT_TAGS, [{"task_id": task_id, "tag": tag, "user_id": user_id} for tag in tags]
            )

    # -- attachments ----------------------------------------------------------------------------------------

    async def _attachments(
        self, conn: AsyncConnection, user_id: str, task_ids: list[str]
    ) -> list[Attachment]:
        a = attachments_table
        rows = (
            (
                await conn.execute(
                    sa.select(a)
                    .where(a.c.user_id == user_id, a.c.task_id.in_(task_ids))
                    .order_by(a.c.created_at, a.c.id)
                )
            )
            .mappings()
            .all()
        )
        return [_attachment(r) for r in rows]

    async def list_attachments(self, user_id: str, task_id: str) -> list[Attachment]:
        async with self.engine.connect() as conn:
            return await self._attachments(conn, user_id, [task_id])

    async def add_attachment(
        self, user_id: str, task_id: str, *, url: str, title: str | None, kind: str
    ) -> Attachment | None:
        """Attach `url` to the user's task; None when the user has no such task."""
        now = utcnow()
        att = Attachment(
            id=_new_id("att"),
            task_id=task_id,
            url=url,
            title=title,
            kind=kind,
            state=None,
            remote_updated_at=None,
            refreshed_at=None,
            created_at=now,
        )
        async with self.engine.begin() as conn:
            exists = (await conn.execute(_OWN_TASK_ID, {"b_task_id": task_id, "b_user_id": user_id})).first()
            if exists is None:
                return None
            await conn.execute(_INSERT_ATTACHMENT, {"user_id": user_id, **att.to_dict()})
        return att

    async def get_attachment(self, user_id: str, attachment_id: str) -> Attachment | None:
        a = attachments_table
        async with self.engine.connect() as conn:
            row = (
                (await conn.execute(sa.select(a).where(a.c.id == attachment_id, a.c.user_id == user_id)))
                .mappings()
                .first()
            )
        return None if row is None else _attachment(row)

    async def update_attachment(
        self, user_id: str, attachment_id: str, values: dict[str, Any]
    ) -> Attachment | None:
        a = attachments_table
        async with self.engine.begin() as conn:
            await conn.execute(
                a.update().where(a.c.id == attachment_id, a.c.user_id == user_id).values(**values)
            )
            row = (
                (await conn.execute(sa.select(a).where(a.c.id == attachment_id, a.c.user_id == user_id)))
                .mappings()
                .first()
            )
        return None if row is None else _attachment(row)

    async def delete_attachment(self, user_id: str, attachment_id: str) -> Attachment | None:
        a = attachments_table
        async with self.engine.begin() as conn:
            row = (
                (await conn.execute(sa.select(a).where(a.c.id == attachment_id, a.c.user_id == user_id)))
                .mappings()
                .first()
            )
            if row is None:
                return None
            await conn.execute(a.delete().where(a.c.id == attachment_id, a.c.user_id == user_id))
        return _attachment(row)


async def create_fts(conn: AsyncConnection) -> None:
    """Create the full-text index of the dialect (idempotent)."""
    statements = POSTGRES_FTS_DDL if conn.dialect.name == "postgresql" else SQLITE_FTS_DDL
    for ddl in statements:
        await conn.execute(sa.text(ddl))


async def _own_task_row(conn: Any, user_id: str, task_id: str) -> Any:
    """The task's row if `user_id` owns it, else None (another user's id is as unknown as a missing one)."""
    result = await conn.execute(_OWN_TASK_ROW, {"b_task_id": task_id, "b_user_id": user_id})
    return result.mappings().first()
