"""Stop requests: `toolrun_runs.stop_requested_at`, set by `POST /api/v1/conversations/{id}/stop`.

The stop may reach a process other than the one running the turn (several processes share PostgreSQL):
the request is recorded on the run's row, and the running process sees it at its next lease heartbeat
(`_leases`), or at once when the run is its own.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_runs") as batch:
        batch.add_column(sa.Column("stop_requested_at", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("toolrun_runs") as batch:
        batch.drop_column("stop_requested_at")
