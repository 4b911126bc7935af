"""The process that holds a conversation's lease: `toolrun_conversations.lease_holder` (`_holder`).

A restarted service on the same host sees that the process holding a conversation is gone and takes the
conversation at once, instead of waiting up to a lease for it to lapse.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("toolrun_conversations") as batch:
        batch.add_column(sa.Column("lease_holder", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("toolrun_conversations") as batch:
        batch.drop_column("lease_holder")
