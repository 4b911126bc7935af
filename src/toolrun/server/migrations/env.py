"""Alembic environment: runs the migrations on the connection `toolrun.server.migrate` hands over, with
the version table of the history being migrated (the service's, or one App's own)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through `toolrun db upgrade` (toolrun.server.migrate).")
context.configure(
    connection=connection,
    target_metadata=None,
    render_as_batch=True,
    version_table=context.config.attributes.get("version_table", "alembic_version"),
)
with context.begin_transaction():
    context.run_migrations()
