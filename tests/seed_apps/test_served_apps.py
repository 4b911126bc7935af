"""The seed apps as `App`s, served by the service as any App is (`toolrun serve
conference_assistant.assistant:app`, `toolrun serve fastapi_agent.assistant:app`): their face, their tools
and their offline demo through the chat API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from toolrun.server import Settings, create_app, load_app
from toolrun.server.migrate import upgrade


async def _chat(spec: str, tmp_path: Path, *messages: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    served = load_app(spec)  # by name, as `toolrun serve` loads it
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=f"sqlite+aiosqlite:///{tmp_path}/s.db", data_dir=tmp_path / "d"
    )
    await upgrade(settings.database_url, app=served)
    app = create_app(settings, app=served)
    _, token = await app.state.toolrun.users.add("ada")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers={"Authorization": f"Bearer {token}"}
        ) as http:
            face = (await http.get("/api/v1/app")).json()
            replies = [(await http.post("/api/v1/chat", json={"message": m})).json() for m in messages]
            tools = {
                t["name"] for t in (await http.get("/api/v1/tools", params={"format": "mcp"})).json()["tools"]
            }
            face["tools"] = tools
            if face["panel"]:
                face["panel_value"] = (await http.get("/api/v1/app/panel")).json()["value"]
    return face, replies


@pytest.mark.timeout(60)
async def test_the_conference_assistant_is_served_as_an_app(tmp_path: Path) -> None:
    face, (registration, sessions) = await _chat(
        "conference_assistant.assistant:app",
        tmp_path,
        "Where is my registration? REG-1001",
        "Which sessions are about privacy?",
    )
    assert face["title"] == "Conference assistant" and face["demo"] is True
    assert face["tools"] == {
        "lookup_registration",
        "send_registration_email",
        "send_schedule_email",
        "search_sessions",
    }
    assert len(face["panel_value"]) == 3  # every session
    assert registration["output"] == "Your registration REG-1001 (Full pass) is confirmed."
    assert sessions["output"] == "14:00 Privacy by design (room A)"


@pytest.mark.timeout(60)
async def test_the_fastapi_agent_is_served_as_an_app(tmp_path: Path) -> None:
    face, (weather, me) = await _chat(
        "fastapi_agent.assistant:app", tmp_path, "What's the weather in Paris?", "Who am I?"
    )
    assert face["title"] == "Weather, sums and you" and face["panel"] is None
    assert face["tools"] == {"get_weather", "calculate", "whoami"}
    assert weather["output"] == "The weather in Paris is sunny, 21 °C."
    assert me["output"].startswith("You are usr_")
