"""Approvals 2.0: the preview a person approves, stored with each confirmation; standing approval rules;
the rule that decided a call, in the audit trail.

Revision ID: 0003
Revises: 0001
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: confirmations made before previews existed (or of tools without one) have none.
    with op.batch_alter_table("toolrun_confirmations") as batch:
        batch.add_column(sa.Column("preview", sa.Text(), nullable=True))
    with op.batch_alter_table("toolrun_audit") as batch:
        batch.add_column(sa.Column("rule_id", sa.String(64), nullable=True))
    # Same shape as toolrun.store.sql.SQLApprovalRuleStore's table.
    op.create_table(
        "toolrun_approval_rules",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("decision", sa.String(8), nullable=False),
        sa.Column("arguments", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
    )
    op.create_index("toolrun_approval_rules_user_tool", "toolrun_approval_rules", ["user_id", "tool"])


def downgrade() -> None:
    op.drop_index("toolrun_approval_rules_user_tool", table_name="toolrun_approval_rules")
    op.drop_table("toolrun_approval_rules")
    with op.batch_alter_table("toolrun_audit") as batch:
        batch.drop_column("rule_id")
    with op.batch_alter_table("toolrun_confirmations") as batch:
        batch.drop_column("preview")
