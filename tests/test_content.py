"""`toolrun.content`: items check themselves (data xor url, media type against the bytes' signature),
round-trip through `to_dict`, and return annotations made of content declare no JSON output type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from media_samples import pdf, png, wav
from toolrun import ToolResult, tool
from toolrun.content import (
    Audio,
    ContentError,
    File,
    Image,
    ResourceLink,
    Text,
    ToolOutput,
    content_from_dict,
    describe,
    sniff_media_type,
    value_annotation,
)


def test_the_media_type_is_read_from_the_bytes() -> None:
    assert Image(data=png()).media_type == "image/png"
    assert Audio(data=wav()).media_type == "audio/wav"
    assert File(data=pdf(), name="a.pdf").media_type == "application/pdf"
    assert sniff_media_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_media_type(b"GIF89a....") == "image/gif"
    assert sniff_media_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_media_type(b"ID3\x04rest") == "audio/mpeg"
    assert sniff_media_type(b"plain words") is None


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: Image(data=png(), media_type="image/jpeg"), "look like image/png"),
        (lambda: Image(data=b"not an image", media_type="image/png"), "no such signature"),
        (lambda: Image(data=wav()), "not an image type"),
        (lambda: Image(data=b"no signature"), "give media_type"),
        (lambda: Image(), "exactly one of data"),
        (lambda: Image(data=png(), url="https://example.org/a.png"), "exactly one of data"),
        (lambda: Image(data="text"), "must be bytes"),  # type: ignore[arg-type]
        (lambda: Audio(data=png()), "not an audio type"),
        (lambda: File(data=pdf(), name="a.txt", media_type="text/plain"), "look like application/pdf"),
        (lambda: File(data=b"\xff\xfe\xfa", name="a.txt", media_type="text/plain"), "not UTF-8"),
        (lambda: File(data=b"x", name="", media_type="text/plain"), "name"),
        (lambda: ResourceLink(uri="", name="x"), "uri"),
        (lambda: ToolOutput(value=1, content=["text"]), "not a content item"),  # type: ignore[list-item]
    ],
)
def test_items_that_cannot_be_right_are_refused_when_built(build, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ContentError, match=needle):
        build()


def test_aliases_and_containers_are_accepted() -> None:
    assert Image(data=b"\xff\xd8\xff\xe0", media_type="image/jpg").media_type == "image/jpeg"
    docx = File(
        data=b"PK\x03\x04rest",
        name="a.docx",
        media_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    assert docx.media_type.startswith("application/vnd.openxmlformats")
    assert File(data=b"a,b\n1,2\n", name="t.csv", media_type="text/csv").media_type == "text/csv"
    assert Image(url="https://example.org/a.png").size == 0


items = st.one_of(
    st.builds(Text, st.text()),
    st.builds(lambda w, h: Image(data=png(w, h)), st.integers(1, 4), st.integers(1, 4)),
    st.builds(lambda u: Image(url=u, media_type="image/png"), st.text(min_size=1)),
    st.builds(lambda n: Audio(data=wav(n)), st.integers(0, 50)),
    st.builds(
        lambda t, n: File(data=t.encode(), name=n, media_type="text/plain"), st.text(), st.text(min_size=1)
    ),
    st.builds(
        lambda u, n, m: ResourceLink(uri=u, name=n, media_type=m),
        st.text(min_size=1),
        st.text(),
        st.none() | st.just("text/plain"),
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(items, max_size=5), st.none() | st.integers() | st.dictionaries(st.text(), st.integers()))
def test_results_with_content_round_trip_through_json_data(content: list, value: object) -> None:  # type: ignore[type-arg]
    result = ToolResult(call_id="c", tool_name="t", value=value, content=tuple(content))
    assert ToolResult.from_dict(result.to_dict()) == result
    for item in content:
        assert content_from_dict(item.to_dict()) == item


def test_render_shows_text_and_notes_for_what_text_cannot_hold() -> None:
    result = ToolResult(
        value={"n": 1}, content=(Text("caption"), Image(data=png()), File(data=pdf(), name="r.pdf"))
    )
    lines = result.render().splitlines()
    assert lines[0] == '{"n":1}'
    assert lines[1] == "caption"
    assert lines[2].startswith("[image/png image, ") and "bytes]" in lines[2]
    assert "file r.pdf" in lines[3]
    assert describe(ResourceLink(uri="file:///a", name="a")) == "[resource a: file:///a]"


def test_content_annotations_declare_no_json_output() -> None:
    class Weather(dict):  # type: ignore[type-arg]
        pass

    assert value_annotation(Image) is None
    assert value_annotation(list[Text | Image]) is None
    assert value_annotation(ToolOutput) is None
    assert value_annotation(ToolOutput[int]) is int
    assert value_annotation(dict[str, int]) == dict[str, int]

    @tool
    def chart(q: str) -> list[Text | Image]:
        """A chart."""
        return [Text(q)]

    @tool
    def count(q: str) -> ToolOutput[int]:
        """A count."""
        return ToolOutput(value=1)

    assert chart.output_schema is None and not chart.has_output_type
    assert count.output_schema == {"type": "integer"}
