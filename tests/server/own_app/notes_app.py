"""Notes: an App written the way a team writes its own, on the public contract only (`toolrun.server.App`).

Its tools keep their rows in the service's database (a table its own migration makes), one of them is
destructive (confirmed first), one runs in the background, and a read-only one fills the page's panel.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter

from toolrun import ToolContext, ToolError, tool
from toolrun.server import App, AppResources, Panel
from toolrun.server.deps import CurrentUser, State

NOTES = sa.table("notes_notes", sa.column("id"), sa.column("user_id"), sa.column("text"))


def tools(resources: AppResources) -> list[Any]:
    engine = resources.engine

    @tool
    async def add_note(text: str, *, ctx: ToolContext) -> dict[str, str]:
        """Add a note.

        Args:
            text: What to remember.
        """
        note = {"id": f"note_{uuid.uuid4().hex[:8]}", "user_id": ctx.user_id, "text": text}
        async with engine.begin() as conn:
            await conn.execute(NOTES.insert().values(note))
        return {"id": note["id"], "text": text}

    @tool(read_only=True)
    async def list_notes(*, ctx: ToolContext) -> dict[str, Any]:
        """The user's notes."""
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.select(NOTES.c.id, NOTES.c.text).where(NOTES.c.user_id == ctx.user_id).order_by(NOTES.c.id)
            )
            notes = [{"id": r.id, "text": r.text} for r in rows]
        return {"notes": notes}

    @tool(destructive=True)
    async def delete_note(note_id: str, *, ctx: ToolContext) -> dict[str, str]:
        """Delete a note for good.

        Args:
            note_id: The note's id.
        """
        async with engine.begin() as conn:
            gone = await conn.execute(
                NOTES.delete().where(NOTES.c.id == note_id, NOTES.c.user_id == ctx.user_id)
            )
        if not gone.rowcount:
            raise ToolError("NOT_FOUND", f"No note {note_id}.")
        return {"deleted": note_id}

    @tool(background=True, timeout=30)
    async def export_notes(*, ctx: ToolContext) -> dict[str, Any]:
        """Export every note of the user (slow: runs as a job)."""
        await ctx.report_progress(1, total=2, message="reading")
        async with engine.connect() as conn:
            count = await conn.scalar(
                sa.select(sa.func.count()).select_from(NOTES).where(NOTES.c.user_id == ctx.user_id)
            )
        return {"exported": count}

    return [add_note, list_notes, delete_note, export_notes]


router = APIRouter(tags=["notes"])


@router.get("/notes/count")
async def count_notes(user: CurrentUser, state: State) -> dict[str, int]:
    async with state.engine.connect() as conn:
        count = await conn.scalar(
            sa.select(sa.func.count()).select_from(NOTES).where(NOTES.c.user_id == user.user_id)
        )
    return {"count": int(count or 0)}


app = App(
    name="notes",
    title="Notes",
    description="Keeps your notes.",
    instructions="You keep the user's notes. Today is {today}.",
    tools=tools,
    starters=["Add a note: buy milk", "What are my notes?"],
    panel=Panel(title="Your notes", tool="list_notes"),
    routers=[router],
    migrations=Path(__file__).parent / "migrations",
)
