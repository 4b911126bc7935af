"""The task assistant's tables: tasks, their tags and attachments, and full-text search on the title and
description (FTS5 on SQLite, a generated tsvector with a GIN index on PostgreSQL).

On a database made before the task assistant became an App, the service's first revision already made
these tables: this revision then adopts them as they are (nothing is created, no row is touched), so that
an existing database upgrades cleanly. Self-contained: it imports no live table definition.

Revision ID: tasks_0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "tasks_0001"
down_revision = None
branch_labels = None
depends_on = None

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


def upgrade() -> None:
    bind = op.get_bind()
    if "toolrun_tasks" not in sa.inspect(bind).get_table_names():
        _create_tables()
    ddl = POSTGRES_FTS_DDL if bind.dialect.name == "postgresql" else SQLITE_FTS_DDL
    for statement in ddl:  # IF NOT EXISTS throughout: also on an adopted database
        op.execute(statement)


def _create_tables() -> None:
    op.create_table(
        "toolrun_tasks",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("title", sa.String(255), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("priority_rank", sa.Integer(), nullable=False),
        sa.Column("eta", sa.String(32), nullable=True),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
    )
    op.create_index("toolrun_tasks_user_eta", "toolrun_tasks", ["user_id", "eta"])
    op.create_index("toolrun_tasks_user_created", "toolrun_tasks", ["user_id", "created_at"])
    op.create_table(
        "toolrun_task_tags",
        sa.Column(
            "task_id", sa.String(40), sa.ForeignKey("toolrun_tasks.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("tag", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(64), nullable=False),
    )
    op.create_index("toolrun_task_tags_user_tag", "toolrun_task_tags", ["user_id", "tag"])
    op.create_table(
        "toolrun_attachments",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column(
            "task_id", sa.String(40), sa.ForeignKey("toolrun_tasks.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state", sa.String(32), nullable=True),
        sa.Column("remote_updated_at", sa.String(32), nullable=True),
        sa.Column("refreshed_at", sa.String(32), nullable=True),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_index("toolrun_attachments_task", "toolrun_attachments", ["task_id"])
    op.create_index("toolrun_attachments_user", "toolrun_attachments", ["user_id"])


def downgrade() -> None:
    drop = POSTGRES_FTS_DROP if op.get_bind().dialect.name == "postgresql" else SQLITE_FTS_DROP
    for statement in drop:
        op.execute(statement)
    for table in ("toolrun_attachments", "toolrun_task_tags", "toolrun_tasks"):
        op.drop_table(table)
