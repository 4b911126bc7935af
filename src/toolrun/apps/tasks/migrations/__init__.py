"""The task assistant's own Alembic history (its version table: `alembic_version_tasks`)."""
