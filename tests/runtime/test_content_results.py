"""The run stage keeps what a tool returns beside JSON: `-> Image`, `-> list[Text | Image]`, `ToolOutput`,
and a `ToolResult` carrying content. Limits per item and per result are `RESULT_INVALID` naming the limit;
the audit stays content-free; results with content are not cached."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from media_samples import pdf, png
from toolrun import ToolResult, tool
from toolrun.content import File, Image, Text, ToolOutput
from toolrun.runtime import AuditRecord

from .conftest import call


class Summary(TypedDict):
    points: int


@tool
async def picture(size: int = 2) -> Image:
    """A picture."""
    return Image(data=png(size, size))


@tool
def captioned(caption: str) -> list[Text | Image]:
    """A captioned picture (sync: runs in a thread)."""
    return [Text(caption), Image(data=png())]


@tool
async def chart(points: int) -> ToolOutput[Summary]:
    """A chart with its data."""
    return ToolOutput(value={"points": points}, content=[Image(data=png()), File(data=pdf(), name="r.pdf")])


@tool
async def wrong_chart() -> ToolOutput[Summary]:
    """Returns a value that breaks its declared type."""
    return ToolOutput(value={"points": "many"}, content=[Image(data=png())])  # type: ignore[typeddict-item]


@tool
async def mixed() -> list[Any]:
    """A list mixing content and plain values."""
    return [Text("a"), 3]


@tool
async def whole() -> ToolResult:
    """Returns a whole ToolResult with content."""
    return ToolResult.ok({"n": 1}, content=(Text("t"), Image(data=png())))


async def test_an_image_return_is_kept_as_content(make_executor) -> None:  # type: ignore[no-untyped-def]
    ex = make_executor(picture)
    result = await ex.execute(call("picture"))
    assert result.status == "ok" and result.value is None
    assert [type(c) for c in result.content] == [Image]
    assert result.content[0].data == png(2, 2)


async def test_a_list_of_content_from_a_sync_tool(make_executor) -> None:  # type: ignore[no-untyped-def]
    ex = make_executor(captioned)
    result = await ex.execute(call("captioned", {"caption": "red"}))
    assert result.content[0] == Text("red") and isinstance(result.content[1], Image)


async def test_tool_output_value_is_checked_against_its_type(make_executor) -> None:  # type: ignore[no-untyped-def]
    ex = make_executor(chart, wrong_chart)
    good = await ex.execute(call("chart", {"points": 12}))
    assert good.status == "ok" and good.value == {"points": 12} and len(good.content) == 2
    assert (
        chart.output_schema is not None and chart.output_schema["properties"]["points"]["type"] == "integer"
    )
    bad = await ex.execute(call("wrong_chart"))
    assert bad.status == "error" and bad.error.code == "RESULT_INVALID" and not bad.content


async def test_a_mixed_list_is_refused_with_a_clear_message(make_executor) -> None:  # type: ignore[no-untyped-def]
    result = await make_executor(mixed).execute(call("mixed"))
    assert result.error.code == "RESULT_INVALID"
    assert "holds a int, not a content item" in result.error.message


async def test_limits_per_item_and_per_result(make_executor) -> None:  # type: ignore[no-untyped-def]
    ex = make_executor(picture, captioned, max_content_bytes=100, max_content_items=1)
    big = await ex.execute(call("picture", {"size": 40}))
    assert big.error.code == "RESULT_INVALID"
    assert "more than the limit of 100" in big.error.message and "content[0] (image)" in big.error.message
    many = await ex.execute(call("captioned", {"caption": "x"}))
    assert "2 content items, more than the limit of 1" in many.error.message


async def test_a_returned_tool_result_keeps_its_content(make_executor) -> None:  # type: ignore[no-untyped-def]
    result = await make_executor(whole).execute(call("whole"))
    assert result.value == {"n": 1} and result.content[0] == Text("t")


async def test_plain_results_carry_no_content(make_executor) -> None:  # type: ignore[no-untyped-def]
    @tool
    async def plain(n: int) -> dict[str, int]:
        """Plain."""
        return {"n": n}

    result = await make_executor(plain).execute(call("plain", {"n": 1}))
    assert result.content == () and result.value == {"n": 1}


async def test_the_audit_holds_no_content_and_content_is_not_cached(make_executor) -> None:  # type: ignore[no-untyped-def]
    records: list[AuditRecord] = []

    class Sink:
        def write(self, record: AuditRecord) -> None:
            records.append(record)

    runs = 0

    @tool(read_only=True, cache_ttl=60)
    async def snapshot() -> Image:
        """A cached picture."""
        nonlocal runs
        runs += 1
        return Image(data=png(3, 3))

    ex = make_executor(snapshot, audit=Sink())
    first = await ex.execute(call("snapshot"))
    second = await ex.execute(call("snapshot"))
    assert first.content and second.content and runs == 2 and not second.cached
    assert records and all(png(3, 3) not in repr(r.to_dict()).encode() for r in records)
