"""Content a tool returned (images, files) as the service shows it: stored once, per user and expiring,
in the executor's artifact store, and referred to by URL (`GET /api/v1/results/{id}`) in every stream, so
megabytes of base64 never travel inside events."""

from __future__ import annotations

import secrets
import time
from typing import Any

from toolrun.content import File, ResourceLink, Text
from toolrun.results import ToolResult
from toolrun.runtime import ToolExecutor
from toolrun.store import Artifact

__all__ = ["RESULTS_PATH", "content_views"]

RESULTS_PATH = "/api/v1/results/"


async def content_views(
    executor: ToolExecutor, result: ToolResult, user_id: str | None
) -> list[dict[str, Any]]:
    """One JSON-safe view per content item: text as text, links as links, bytes stored for the user and
    named by URL."""
    views: list[dict[str, Any]] = []
    for item in result.content:
        if isinstance(item, Text):
            views.append({"type": "text", "text": item.text})
            continue
        if isinstance(item, ResourceLink):
            views.append(
                {"type": "resource_link", "uri": item.uri, "name": item.name, "media_type": item.media_type}
            )
            continue
        view: dict[str, Any] = {"type": item.kind, "media_type": item.media_type, "size": item.size}
        name = item.name if isinstance(item, File) else None
        if name is not None:
            view["name"] = name
        if item.data is None:
            view["url"] = item.url
        else:
            artifact_id = "art_" + secrets.token_urlsafe(12)
            await executor.artifacts.put(
                Artifact(
                    id=artifact_id,
                    owner=user_id,
                    tool_name=result.tool_name,
                    text="",
                    expires_at=time.time() + executor.artifact_ttl,
                    data=item.data,
                    media_type=item.media_type,
                    name=name,
                )
            )
            view["url"] = RESULTS_PATH + artifact_id
        views.append(view)
    return views
