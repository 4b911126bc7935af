"""Crash truth: the answer a working run has so far (`toolrun_runs.partial`, saved by its heartbeat, kept
as an interrupted message when a crash cuts the run), and consumed confirmations kept as such
(`toolrun_confirmations.consumed_at`: an approval taken by a run is recorded before its call runs, so a
run closed after a crash can tell "it was approved and started" from "it never ran").

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_runs") as batch:
        batch.add_column(sa.Column("partial", sa.Text(), nullable=True))
    with op.batch_alter_table("toolrun_confirmations") as batch:
        batch.add_column(sa.Column("consumed_at", sa.Double(), nullable=True))
    # Closing a run after a crash asks the audit trail about a confirmation.
    op.create_index("toolrun_audit_confirmation", "toolrun_audit", ["confirmation_id"])


def downgrade() -> None:
    op.drop_index("toolrun_audit_confirmation", "toolrun_audit")
    # Consumed confirmations were deleted before this revision: keep that meaning.
    op.execute("DELETE FROM toolrun_confirmations WHERE consumed_at IS NOT NULL")
    with op.batch_alter_table("toolrun_confirmations") as batch:
        batch.drop_column("consumed_at")
    with op.batch_alter_table("toolrun_runs") as batch:
        batch.drop_column("partial")
