"""The service's first schema: users and tokens, conversations, messages, runs, the executor's stores,
and the content-free audit trail.

Databases made before the task assistant became an App got its tables from this revision too; they now
belong to the tasks app's own history (`toolrun/apps/tasks/migrations`), whose first revision adopts them.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "toolrun_users",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("roles", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "toolrun_tokens",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("label", sa.String(64), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
    )
    op.create_index("ix_toolrun_tokens_user_id", "toolrun_tokens", ["user_id"])
    op.create_table(
        "toolrun_conversations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("title", sa.String(120), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("pending_run_id", sa.String(40), nullable=True),
        sa.Column("lease_until", sa.Double(), nullable=True),
        sa.Column("lease_owner", sa.String(40), nullable=True),
    )
    op.create_index("toolrun_conversations_user", "toolrun_conversations", ["user_id", "updated_at"])
    op.create_table(
        "toolrun_messages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(40), nullable=False),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("conversation_id", "seq", name="toolrun_messages_conversation_seq"),
    )
    op.create_table(
        "toolrun_runs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("conversation_id", sa.String(40), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
    )
    op.create_index("toolrun_runs_conversation", "toolrun_runs", ["conversation_id", "created_at"])
    op.create_index("toolrun_runs_user", "toolrun_runs", ["user_id"])
    op.create_table(
        "toolrun_run_confirmations",
        sa.Column("confirmation_id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("conversation_id", sa.String(40), nullable=False),
    )
    op.create_index("ix_toolrun_run_confirmations_run_id", "toolrun_run_confirmations", ["run_id"])
    op.create_table(
        "toolrun_audit",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("timestamp", sa.Double(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("tool", sa.String(128), nullable=True),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=True),
        sa.Column("conversation_id", sa.String(128), nullable=True),
        sa.Column("user_id", sa.String(128), nullable=True),
        sa.Column("arguments_hash", sa.String(128), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("code", sa.String(64), nullable=True),
        sa.Column("duration_ms", sa.Double(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("cached", sa.Boolean(), nullable=False),
        sa.Column("error_id", sa.String(64), nullable=True),
        sa.Column("confirmation_id", sa.String(64), nullable=True),
    )
    op.create_index("toolrun_audit_user_time", "toolrun_audit", ["user_id", "timestamp"])

    # The executor's stores (toolrun.store.sql), same shape as their create_tables(); `run_id` binds a
    # confirmation to the run that asked for it (nullable: confirmations made outside a run have none).
    op.create_table(
        "toolrun_confirmations",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("user_id", sa.String(), nullable=False),
        sa.Column("tool_name", sa.String(), nullable=False),
        sa.Column("arguments_hash", sa.String(), nullable=False),
        sa.Column("call", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("conversation_id", sa.String(), nullable=True),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
    )
    op.create_index("toolrun_confirmations_user", "toolrun_confirmations", ["user_id", "created_at"])
    op.create_index("toolrun_confirmations_expiry", "toolrun_confirmations", ["expires_at"])
    op.create_table(
        "toolrun_rate_limits",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("tokens", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("full_at", sa.Double(), nullable=False),
        sa.Column("granted", sa.Boolean(), nullable=False),
    )
    op.create_index("toolrun_rate_limits_full", "toolrun_rate_limits", ["full_at"])
    op.create_table(
        "toolrun_cache",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
    )
    op.create_index("toolrun_cache_expiry", "toolrun_cache", ["expires_at"])


def downgrade() -> None:
    for table in (
        "toolrun_cache",
        "toolrun_rate_limits",
        "toolrun_confirmations",
        "toolrun_audit",
        "toolrun_run_confirmations",
        "toolrun_runs",
        "toolrun_messages",
        "toolrun_conversations",
        "toolrun_tokens",
        "toolrun_users",
    ):
        op.drop_table(table)
