"""An index on the held calls' conversation: every AG-UI and AI SDK request asks whether its thread holds a
call awaiting approval (`_reads.thread_state`), by conversation and user, before it asks the confirmation
store; without the index that question scans every held call of every user.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "toolrun_run_confirmations_conversation",
        "toolrun_run_confirmations",
        ["conversation_id", "user_id"],
    )


def downgrade() -> None:
    op.drop_index("toolrun_run_confirmations_conversation", table_name="toolrun_run_confirmations")
