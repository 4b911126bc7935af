"""`ToolContext.report_progress`: goes to the transport's reporter; advisory, never fails the tool."""

from __future__ import annotations

from toolrun import ToolContext


async def test_reports_go_to_the_reporter() -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def reporter(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    ctx = ToolContext(progress=reporter)
    await ctx.report_progress(1, 4, "a quarter")
    await ctx.report_progress(2)
    assert seen == [(1, 4, "a quarter"), (2, None, None)]


async def test_no_reporter_and_a_failing_reporter_are_harmless() -> None:
    async def broken(progress: float, total: float | None, message: str | None) -> None:
        raise ConnectionError("client gone")

    await ToolContext().report_progress(1)
    await ToolContext(progress=broken).report_progress(1)
