"""What a tool can return beside JSON: text, images, audio, files and links to resources.

```python
from toolrun.content import Image, Text, ToolOutput

@tool
async def chart(q: str) -> ToolOutput:
    png = render_chart(q)
    return ToolOutput(value={"points": 12}, content=[Text("12 points"), Image(data=png)])
```

A tool returns a content item (`-> Image`), a list of them (`-> list[Text | Image]`), or a `ToolOutput`
carrying a JSON value and content together. The executor keeps them in `ToolResult.content`; every wire
format renders them as far as its provider allows (see each `formats` module).

Items are frozen dataclasses and check themselves when built: bytes or a URL (never both, never neither),
and a media type that agrees with the bytes' signature (a PNG declared as `image/jpeg` is refused, and the
media type is read from the bytes when not given). Size limits per item and per result are the executor's
(`MAX_ITEM_BYTES`, `MAX_ITEMS` are the defaults), checked when a result is built: a result past them is
`RESULT_INVALID` with a message naming the limit.

This module imports nothing of toolrun: any part may use it.
"""

from __future__ import annotations

import base64
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeAlias, TypeVar, Union

__all__ = [
    "MAX_ITEMS",
    "MAX_ITEM_BYTES",
    "Audio",
    "Content",
    "ContentError",
    "File",
    "Image",
    "ResourceLink",
    "Text",
    "ToolOutput",
    "content_from_dict",
    "describe",
    "sniff_media_type",
]

MAX_ITEM_BYTES = 20 * 1024 * 1024
"""Default limit of bytes in one content item (20 MiB: what OpenAI and Anthropic take per image)."""
MAX_ITEMS = 32
"""Default limit of content items in one result."""

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image media types every provider with image input takes."""


class ContentError(ValueError):
    """A content item that cannot be right: no data and no URL, both, or bytes that are not what the media
    type says. Raised when the item is built (the developer's mistake, like a bad schema)."""


# Signatures (magic numbers) of the formats providers take: (offset, bytes) that must all match.
_SIGNATURES: tuple[tuple[str, tuple[tuple[int, bytes], ...]], ...] = (
    ("image/png", ((0, b"\x89PNG\r\n\x1a\n"),)),
    ("image/jpeg", ((0, b"\xff\xd8\xff"),)),
    ("image/gif", ((0, b"GIF87a"),)),
    ("image/gif", ((0, b"GIF89a"),)),
    ("image/webp", ((0, b"RIFF"), (8, b"WEBP"))),
    ("audio/wav", ((0, b"RIFF"), (8, b"WAVE"))),
    ("audio/mpeg", ((0, b"ID3"),)),
    ("audio/ogg", ((0, b"OggS"),)),
    ("audio/flac", ((0, b"fLaC"),)),
    ("application/pdf", ((0, b"%PDF-"),)),
    ("application/zip", ((0, b"PK\x03\x04"),)),
)
_MP3_FRAMES = frozenset({b"\xff\xfb", b"\xff\xfa", b"\xff\xf3", b"\xff\xf2"})
_ALIASES = {
    "image/jpg": "image/jpeg",
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
}
_KNOWN = frozenset(name for name, _ in _SIGNATURES) | {"audio/mpeg"}
# Containers that hold other formats (docx, xlsx, epub are zip files; ogg holds opus or vorbis).
_CONTAINED = {"application/zip": "application/vnd.openxmlformats-officedocument", "audio/ogg": "audio/"}


def _normal(media_type: str) -> str:
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes' signature says (PNG, JPEG, GIF, WebP, WAV, MP3, Ogg, FLAC, PDF, zip), or
    None when they carry no signature this module knows."""
    head = bytes(data[:16])
    for name, checks in _SIGNATURES:
        if all(head[at : at + len(magic)] == magic for at, magic in checks):
            return name
    if head[:2] in _MP3_FRAMES:
        return "audio/mpeg"  # an MPEG-1/2 layer III frame without an ID3 tag
    return None


def _check_bytes(kind: str, data: bytes, media_type: str | None) -> str:
    """The media type to keep for `data` (given, or read from the bytes), refusing a mismatch."""
    found = sniff_media_type(data)
    if media_type is None:
        if found is None:
            raise ContentError(
                f"{kind}: give media_type; the bytes carry no signature toolrun knows "
                "(PNG, JPEG, GIF, WebP, WAV, MP3, Ogg, FLAC, PDF)."
            )
        return found
    declared = _normal(media_type)
    if declared in _KNOWN and found != declared:
        said = f"look like {found}" if found else "carry no such signature"
        raise ContentError(f"{kind}: media_type is {media_type!r} but the bytes {said}.")
    if found is not None and declared != found and not _contains(found, declared):
        raise ContentError(f"{kind}: media_type is {media_type!r} but the bytes look like {found}.")
    if declared.startswith("text/") or declared in ("application/json", "application/xml"):
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise ContentError(
                f"{kind}: media_type is {media_type!r} but the bytes are not UTF-8 text."
            ) from None
    return declared


def _contains(found: str, declared: str) -> bool:
    prefix = _CONTAINED.get(found)
    return prefix is not None and declared.startswith(prefix)


def _data_or_url(kind: str, data: bytes | None, url: str | None) -> None:
    if (data is None) == (url is None):
        raise ContentError(f"{kind}: give exactly one of data (bytes) or url.")
    if data is not None and not isinstance(data, bytes | bytearray | memoryview):
        raise ContentError(f"{kind}: data must be bytes, not {type(data).__name__}.")
    if url is not None and (not isinstance(url, str) or not url):
        raise ContentError(f"{kind}: url must be a non-empty string.")


class _Binary:
    """What `Image`, `Audio` and `File` share: bytes or a URL, and a media type."""

    __slots__ = ()
    kind: ClassVar[str]
    data: bytes | None
    url: str | None
    media_type: str | None

    @property
    def size(self) -> int:
        """Bytes held (0 for a URL)."""
        return len(self.data) if self.data is not None else 0

    def base64(self) -> str:
        """The bytes as base64 text (empty for a URL)."""
        return base64.b64encode(self.data).decode("ascii") if self.data is not None else ""

    def data_url(self) -> str:
        """A `data:` URL of the bytes, or the item's own URL."""
        if self.data is None:
            return self.url or ""
        return f"data:{self.media_type};base64,{self.base64()}"

    def _binary_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "media_type": self.media_type}
        if self.data is not None:
            out["data"] = self.base64()
        else:
            out["url"] = self.url
        return out


@dataclass(frozen=True, slots=True)
class Text:
    """Text for the model (one block among others: a caption, a summary of an image)."""

    kind: ClassVar[str] = "text"
    text: str
    """The text."""

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ContentError(f"Text: text must be a string, not {type(self.text).__name__}.")

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8", "surrogatepass"))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, kw_only=True, slots=True)
class Image(_Binary):
    """A picture: PNG, JPEG, GIF or WebP bytes, or a URL the provider can fetch."""

    kind: ClassVar[str] = "image"
    data: bytes | None = None
    """The image's bytes."""
    url: str | None = None
    """Where the provider can fetch it (https, or a `data:` URL)."""
    media_type: str | None = None
    """`image/png`, `image/jpeg`, `image/gif` or `image/webp`; read from the bytes when not given."""

    def __post_init__(self) -> None:
        _data_or_url("Image", self.data, self.url)
        if self.data is not None:
            media = _check_bytes("Image", bytes(self.data), self.media_type)
            if media not in IMAGE_TYPES:
                raise ContentError(
                    f"Image: {media} is not an image type providers take ({sorted(IMAGE_TYPES)})."
                )
            object.__setattr__(self, "data", bytes(self.data))
            object.__setattr__(self, "media_type", media)

    def to_dict(self) -> dict[str, Any]:
        return self._binary_dict()


@dataclass(frozen=True, kw_only=True, slots=True)
class Audio(_Binary):
    """A sound: WAV, MP3, Ogg or FLAC bytes (or a URL)."""

    kind: ClassVar[str] = "audio"
    data: bytes | None = None
    """The audio's bytes."""
    url: str | None = None
    """Where it can be fetched."""
    media_type: str | None = None
    """`audio/wav`, `audio/mpeg`, ...; read from the bytes when not given."""

    def __post_init__(self) -> None:
        _data_or_url("Audio", self.data, self.url)
        if self.data is not None:
            media = _check_bytes("Audio", bytes(self.data), self.media_type)
            if not media.startswith("audio/"):
                raise ContentError(f"Audio: {media} is not an audio type.")
            object.__setattr__(self, "data", bytes(self.data))
            object.__setattr__(self, "media_type", media)

    def to_dict(self) -> dict[str, Any]:
        return self._binary_dict()


@dataclass(frozen=True, kw_only=True, slots=True)
class File(_Binary):
    """A document: a PDF, a text file, a spreadsheet; bytes or a URL, with a file name."""

    kind: ClassVar[str] = "file"
    data: bytes | None = None
    """The file's bytes."""
    url: str | None = None
    """Where it can be fetched."""
    name: str = "file"
    """The file name shown to the model and the user."""
    media_type: str | None = None
    """`application/pdf`, `text/plain`, ...; read from the bytes when not given."""

    def __post_init__(self) -> None:
        _data_or_url("File", self.data, self.url)
        if not isinstance(self.name, str) or not self.name:
            raise ContentError("File: name must be a non-empty string.")
        if self.data is not None:
            object.__setattr__(self, "data", bytes(self.data))
            object.__setattr__(self, "media_type", _check_bytes("File", self.data, self.media_type))

    def to_dict(self) -> dict[str, Any]:
        return {**self._binary_dict(), "name": self.name}


@dataclass(frozen=True, kw_only=True, slots=True)
class ResourceLink:
    """A pointer to a resource the model (or the user) can fetch, not its content (MCP `resource_link`)."""

    kind: ClassVar[str] = "resource_link"
    uri: str
    """The resource's URI."""
    name: str
    """A short name for it."""
    media_type: str | None = None
    """What it is, if known."""
    description: str | None = None
    """What it holds, for the model."""

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri:
            raise ContentError("ResourceLink: uri must be a non-empty string.")

    @property
    def size(self) -> int:
        return 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.media_type is not None:
            out["media_type"] = self.media_type
        if self.description is not None:
            out["description"] = self.description
        return out


Content: TypeAlias = Text | Image | Audio | File | ResourceLink
"""One content item."""

CONTENT_TYPES: tuple[type, ...] = (Text, Image, Audio, File, ResourceLink)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolOutput(Generic[T]):
    """A JSON value and content items, returned together.

    `ToolOutput[Weather]` as a return annotation makes `Weather` the tool's output schema (the value is
    checked against it); a bare `ToolOutput` declares none.
    """

    value: T | None = None
    """The JSON result (what `ToolResult.value` holds)."""
    content: Sequence[Content] = field(default=())
    """The content items, in order (kept as a tuple)."""

    def __post_init__(self) -> None:
        items = tuple(self.content) if isinstance(self.content, Iterable) else (self.content,)
        for item in items:
            if not isinstance(item, CONTENT_TYPES):
                raise ContentError(f"ToolOutput: content holds a {type(item).__name__}, not a content item.")
        object.__setattr__(self, "content", items)


def content_from_dict(data: Mapping[str, Any]) -> Content:
    """Rebuild a content item from its `to_dict()` form."""
    kind = data.get("type")
    if kind == "text":
        return Text(str(data["text"]))
    if kind == "resource_link":
        return ResourceLink(
            uri=data["uri"],
            name=data.get("name", data["uri"]),
            media_type=data.get("media_type"),
            description=data.get("description"),
        )
    raw = base64.b64decode(data["data"]) if data.get("data") is not None else None
    url = data.get("url") if raw is None else None
    if kind == "image":
        return Image(data=raw, url=url, media_type=data.get("media_type"))
    if kind == "audio":
        return Audio(data=raw, url=url, media_type=data.get("media_type"))
    if kind == "file":
        return File(data=raw, url=url, name=data.get("name") or "file", media_type=data.get("media_type"))
    raise ContentError(f"Not a content item: unknown type {kind!r}.")


def describe(item: Content) -> str:
    """A one-line note for text-only places: `[image/png image, 12,345 bytes]`."""
    if isinstance(item, Text):
        return item.text
    if isinstance(item, ResourceLink):
        return f"[resource {item.name}: {item.uri}]"
    label = item.kind if not isinstance(item, File) else f"file {item.name}"
    where = f"{item.size:,} bytes" if item.data is not None else item.url
    return f"[{item.media_type or 'unknown'} {label}, {where}]"


def as_content(value: Any) -> tuple[Any, tuple[Content, ...]] | None:
    """`(json value, content)` when a tool's return value is content (an item, a list of items, a
    `ToolOutput`); None otherwise. A list mixing content and other values is refused."""
    if isinstance(value, ToolOutput):
        return value.value, tuple(value.content)
    if isinstance(value, Text | Image | Audio | File | ResourceLink):
        return None, (value,)
    if type(value) is list and value and isinstance(value[0], CONTENT_TYPES):
        for item in value:
            if not isinstance(item, CONTENT_TYPES):
                raise ContentError(f"A list of content holds a {type(item).__name__}, not a content item.")
        return None, tuple(value)
    return None


def value_annotation(annotation: Any) -> Any:
    """The JSON part of a tool's return annotation: `T` of `ToolOutput[T]`, `None` for content items or
    lists of them (they carry no JSON), the annotation itself otherwise."""
    origin = typing.get_origin(annotation)
    if annotation is ToolOutput:
        return None
    if origin is ToolOutput:
        (arg,) = typing.get_args(annotation)
        return arg
    if _is_content_type(annotation):
        return None
    if origin in (list, tuple, Sequence, Iterable):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if args and all(_is_content_type(a) for a in args):
            return None
    return annotation


def _is_content_type(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, CONTENT_TYPES):
        return True
    origin = typing.get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return all(_is_content_type(a) for a in typing.get_args(annotation))
    return False
