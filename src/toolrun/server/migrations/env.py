"""Alembic environment: runs the migrations on the connection `toolrun.server.migrate` hands over."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through `toolrun db upgrade` (toolrun.server.migrate).")
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
