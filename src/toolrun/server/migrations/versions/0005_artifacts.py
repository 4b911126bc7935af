"""Artifacts in the database: whole results cut by an output budget and stored content (images, files)
served by `GET /api/v1/results/{id}`, shared by every process and kept across restarts (they lived in one
process's memory before, so another worker, or the same one after a restart, answered 404).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "toolrun_artifacts",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("owner", sa.String(), nullable=True),
        sa.Column("tool_name", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("media_type", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("expires_at", sa.Double(), nullable=False),
    )
    op.create_index("toolrun_artifacts_expiry", "toolrun_artifacts", ["expires_at"])


def downgrade() -> None:
    op.drop_index("toolrun_artifacts_expiry", "toolrun_artifacts")
    op.drop_table("toolrun_artifacts")
