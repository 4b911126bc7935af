"""A tool returning every kind of content (also served over stdio: `content_tools:content_registry`)."""

from __future__ import annotations

from media_samples import pdf, png, wav
from toolrun import ToolRegistry, tool
from toolrun.content import Audio, File, Image, ResourceLink, Text, ToolOutput


@tool(read_only=True)
async def chart(title: str) -> ToolOutput[dict[str, int]]:
    """A chart as an image, with its numbers, a sound, a report file and a link to the full data."""
    return ToolOutput(
        value={"points": 12},
        content=[
            Text(title),
            Image(data=png(2, 2)),
            Audio(data=wav(4)),
            File(data=pdf(), name="report.pdf"),
            File(data=b"a,b\n1,2\n", name="data.csv", media_type="text/csv"),
            ResourceLink(uri="https://example.org/full.csv", name="full data", media_type="text/csv"),
        ],
    )


content_registry = ToolRegistry([chart])
