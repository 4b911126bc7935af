"""A preview that catches its own cancellation is abandoned as a tool is: cancelled when its time is up,
given the executor's `cancel_grace`, then closed; the person is shown the summary, and neither the held
call nor the request waiting on it stays blocked."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from toolrun import ToolContext, tool
from toolrun.runtime import _preview as preview_module

from .conftest import call

pytestmark = pytest.mark.timeout(20)


def stubborn(released: asyncio.Event, seen: dict[str, int]) -> Any:
    async def preview(args: Mapping[str, Any], ctx: ToolContext) -> str:
        try:
            await released.wait()
        except asyncio.CancelledError:  # swallowed: keeps waiting, as a careless preview might
            seen["cancelled"] += 1
            try:
                await released.wait()
            finally:
                seen["closed"] += 1
        return "unreachable"

    return preview


@pytest.fixture
def short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preview_module, "PREVIEW_TIMEOUT", 0.1)


@pytest.mark.usefixtures("short")
async def test_a_preview_swallowing_its_cancellation_is_abandoned_when_the_call_is_held(
    make_executor: Any,
) -> None:
    released, seen = asyncio.Event(), {"cancelled": 0, "closed": 0}

    @tool(destructive=True, preview=stubborn(released, seen))
    async def wipe(target: str) -> str:
        """Wipe a target."""
        return target

    ex = make_executor(wipe, cancel_grace=0.1)
    ctx = ToolContext(user_id="u1")
    try:  # the bound is far above 0.1 s + 0.1 s: what fails here is a preview that holds the call
        held = await asyncio.wait_for(ex.execute(call("wipe", {"target": "disk"}), ctx), 10)
    finally:
        released.set()
    assert held.status == "confirmation_required"
    record = await ex.confirmation.store.get(held.confirmation_id)
    assert record is not None and record.preview is not None
    assert record.preview.startswith("(The preview of this action could not be made")
    assert seen == {"cancelled": 1, "closed": 1}  # cancelled, then closed (its finally ran)


@pytest.mark.usefixtures("short")
async def test_a_preview_of_an_edit_swallowing_its_cancellation_is_abandoned(make_executor: Any) -> None:
    released, seen = asyncio.Event(), {"cancelled": 0, "closed": 0}
    stalls = {"on": False}
    slow = stubborn(released, seen)

    async def preview(args: Mapping[str, Any], ctx: ToolContext) -> str:
        if not stalls["on"]:
            return f"Wipe {args['target']}"
        return await slow(args, ctx)

    @tool(destructive=True, preview=preview)
    async def wipe(target: str) -> str:
        """Wipe a target."""
        return target

    ex = make_executor(wipe, cancel_grace=0.1)
    ctx = ToolContext(user_id="u1")
    held = await ex.execute(call("wipe", {"target": "disk"}), ctx)
    stalls["on"] = True
    try:
        seen_edit = await asyncio.wait_for(ex.preview_edit(held.confirmation_id, ctx, {"target": "tape"}), 10)
    finally:
        released.set()
    assert seen_edit.status == "ok"
    assert seen_edit.value["preview"].startswith("(The preview of this action could not be made")
    assert seen == {"cancelled": 1, "closed": 1}
