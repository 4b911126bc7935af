"""Conformance checker for tool *results*: does a result message (and what follows it) have the shape each
provider documents? The definition checker (`_check.py`) checks tools; this one checks what answers them.

```python
check_result(message, "anthropic")                 # list[Violation]; empty when it conforms
check_result(user_message, "openai", followup=True)  # the Chat Completions user message after tool messages
```

Rules (all errors: the API rejects the request):

- `RES-SHAPE`: the envelope: a missing or mistyped key (`tool_call_id`, `call_id`, `tool_use_id`,
  `functionResponse.name`, MCP `content`, ...).
- `RES-PART`: a part or block type the API does not take in that place (Chat Completions tool messages
  take text parts only; Responses `function_call_output` takes `input_text`, `input_image`, `input_file`;
  Anthropic `tool_result` takes `text`, `image`, `document`, `search_result`; MCP takes `text`, `image`,
  `audio`, `resource`, `resource_link`).
- `RES-MEDIA`: a media type the API does not take there (Anthropic images: PNG, JPEG, GIF, WebP; documents:
  PDF as base64, `text/plain` as text; Gemini function-response parts: PNG, JPEG, WebP, PDF, text; Chat
  Completions audio: `wav` or `mp3`).
- `RES-DATA`: bytes that are not valid base64, or a URL field that is neither `http(s):` nor a `data:` URL
  of the right kind.

Sources: OpenAI API reference (Chat Completions messages, Responses `function_call_output`), Anthropic
Messages API (`tool_result` content, image and document blocks), Gemini API `FunctionResponse` (multimodal
function responses), the MCP specification 2025-06-18 (`CallToolResult`, content blocks).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from toolrun.formats._check import Violation

__all__ = ["check_result"]

_ANT_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_GEMINI_RESPONSE = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"})


class _Report:
    def __init__(self) -> None:
        self.found: list[Violation] = []

    def error(self, rule: str, path: str, message: str) -> None:
        self.found.append(Violation(rule=rule, path=path, message=message, severity="error"))

    def string(self, holder: Any, key: str, path: str) -> str | None:
        value = holder.get(key) if isinstance(holder, Mapping) else None
        if not isinstance(value, str):
            self.error("RES-SHAPE", f"{path}/{key}", f"expected a string at {key!r}")
            return None
        return value

    def mapping(self, holder: Any, key: str, path: str) -> Mapping[str, Any] | None:
        value = holder.get(key) if isinstance(holder, Mapping) else None
        if not isinstance(value, Mapping):
            self.error("RES-SHAPE", f"{path}/{key}", f"expected an object at {key!r}")
            return None
        return value

    def base64(self, holder: Any, key: str, path: str) -> None:
        value = self.string(holder, key, path)
        if value is None:
            return
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            self.error("RES-DATA", f"{path}/{key}", "not valid base64")

    def url(self, holder: Any, key: str, path: str, data_prefix: str) -> None:
        value = self.string(holder, key, path)
        if value is None:
            return
        if value.startswith(("https://", "http://")):
            return
        if not value.startswith(data_prefix) or ";base64," not in value:
            self.error(
                "RES-DATA", f"{path}/{key}", f"expected an http(s) URL or a {data_prefix}...;base64, URL"
            )
            return
        try:
            base64.b64decode(value.split(";base64,", 1)[1], validate=True)
        except (binascii.Error, ValueError):
            self.error("RES-DATA", f"{path}/{key}", "the data URL's payload is not valid base64")


def _parts(
    report: _Report, value: Any, path: str, *, empty: bool = False
) -> list[tuple[str, Mapping[str, Any]]]:
    if not isinstance(value, list) or not (value or empty):
        report.error("RES-SHAPE", path, "expected a non-empty list of parts")
        return []
    out = []
    for index, part in enumerate(value):
        where = f"{path}/{index}"
        if not isinstance(part, Mapping):
            report.error("RES-SHAPE", where, "expected an object")
            continue
        out.append((where, part))
    return out


def _openai_chat(report: _Report, message: Mapping[str, Any], followup: bool) -> None:
    if followup:
        if message.get("role") != "user":
            report.error("RES-SHAPE", "/role", "the message after tool messages must be a user message")
        for where, part in _parts(report, message.get("content"), "/content"):
            kind = part.get("type")
            if kind == "text":
                report.string(part, "text", where)
            elif kind == "image_url":
                image = report.mapping(part, "image_url", where)
                if image is not None:
                    report.url(image, "url", f"{where}/image_url", "data:image/")
            elif kind == "file":
                file = report.mapping(part, "file", where)
                if file is not None:
                    report.string(file, "filename", f"{where}/file")
                    report.url(file, "file_data", f"{where}/file", "data:")
            elif kind == "input_audio":
                audio = report.mapping(part, "input_audio", where)
                if audio is not None:
                    report.base64(audio, "data", f"{where}/input_audio")
                    if audio.get("format") not in ("wav", "mp3"):
                        report.error(
                            "RES-MEDIA", f"{where}/input_audio/format", "audio format must be wav or mp3"
                        )
            else:
                report.error("RES-PART", f"{where}/type", f"a user message takes no {kind!r} part")
        return
    if message.get("role") != "tool":
        report.error("RES-SHAPE", "/role", "a tool result is a message with role 'tool'")
    report.string(message, "tool_call_id", "")
    content = message.get("content")
    if isinstance(content, str):
        return
    for where, part in _parts(report, content, "/content"):
        if part.get("type") != "text":
            report.error("RES-PART", f"{where}/type", "tool messages take text parts only")
        report.string(part, "text", where)


def _openai_responses(report: _Report, item: Mapping[str, Any]) -> None:
    if item.get("type") != "function_call_output":
        report.error("RES-SHAPE", "/type", "expected a 'function_call_output' item")
    report.string(item, "call_id", "")
    output = item.get("output")
    if isinstance(output, str):
        return
    for where, part in _parts(report, output, "/output"):
        kind = part.get("type")
        if kind == "input_text":
            report.string(part, "text", where)
        elif kind == "input_image":
            if "file_id" not in part:
                report.url(part, "image_url", where, "data:image/")
            if part.get("detail", "auto") not in ("low", "high", "auto"):
                report.error("RES-SHAPE", f"{where}/detail", "detail must be low, high or auto")
        elif kind == "input_file":
            if not any(k in part for k in ("file_data", "file_id", "file_url")):
                report.error("RES-SHAPE", where, "input_file needs file_data, file_id or file_url")
            if "file_data" in part:
                report.url(part, "file_data", where, "data:")
                report.string(part, "filename", where)
        else:
            report.error("RES-PART", f"{where}/type", f"function_call_output takes no {kind!r} part")


def _anthropic(report: _Report, block: Mapping[str, Any]) -> None:
    if block.get("type") != "tool_result":
        report.error("RES-SHAPE", "/type", "expected a 'tool_result' block")
    report.string(block, "tool_use_id", "")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        report.error("RES-SHAPE", "/is_error", "is_error must be a boolean")
    content = block.get("content")
    if isinstance(content, str):
        return
    for where, part in _parts(report, content, "/content"):
        kind = part.get("type")
        if kind == "text":
            report.string(part, "text", where)
        elif kind in ("image", "document"):
            source = report.mapping(part, "source", where)
            if source is None:
                continue
            at = f"{where}/source"
            kind_of_source = source.get("type")
            if kind_of_source == "url":
                report.url(source, "url", at, "https://")
            elif kind_of_source == "base64":
                media = source.get("media_type")
                allowed = _ANT_IMAGES if kind == "image" else frozenset({"application/pdf"})
                if media not in allowed:
                    report.error(
                        "RES-MEDIA", f"{at}/media_type", f"{kind} base64 sources take {sorted(allowed)}"
                    )
                report.base64(source, "data", at)
            elif kind_of_source == "text" and kind == "document":
                if source.get("media_type") != "text/plain":
                    report.error("RES-MEDIA", f"{at}/media_type", "text document sources are text/plain")
                report.string(source, "data", at)
            else:
                report.error("RES-SHAPE", f"{at}/type", f"unknown {kind} source type {kind_of_source!r}")
        elif kind != "search_result":
            report.error("RES-PART", f"{where}/type", f"tool_result takes no {kind!r} block")


def _gemini(report: _Report, part: Mapping[str, Any], followup: bool) -> None:
    if followup:
        if not any(k in part for k in ("text", "inlineData", "fileData")):
            report.error("RES-PART", "", "a following part must be text, inlineData or fileData")
        if "inlineData" in part:
            blob = report.mapping(part, "inlineData", "")
            if blob is not None:
                report.string(blob, "mimeType", "/inlineData")
                report.base64(blob, "data", "/inlineData")
        return
    response = report.mapping(part, "functionResponse", "")
    if response is None:
        return
    report.string(response, "name", "/functionResponse")
    report.mapping(response, "response", "/functionResponse")
    if "parts" not in response:
        return
    for where, item in _parts(report, response["parts"], "/functionResponse/parts"):
        blob = report.mapping(item, "inlineData", where)
        if blob is None:
            continue
        if blob.get("mimeType") not in _GEMINI_RESPONSE:
            report.error(
                "RES-MEDIA",
                f"{where}/inlineData/mimeType",
                f"function responses take {sorted(_GEMINI_RESPONSE)}",
            )
        report.base64(blob, "data", f"{where}/inlineData")


def _mcp(report: _Report, result: Mapping[str, Any]) -> None:
    if "isError" in result and not isinstance(result["isError"], bool):
        report.error("RES-SHAPE", "/isError", "isError must be a boolean")
    if "structuredContent" in result and not isinstance(result["structuredContent"], Mapping):
        report.error("RES-SHAPE", "/structuredContent", "structuredContent must be an object")
    for where, block in _parts(report, result.get("content"), "/content", empty=True):
        kind = block.get("type")
        if kind == "text":
            report.string(block, "text", where)
        elif kind in ("image", "audio"):
            report.string(block, "mimeType", where)
            report.base64(block, "data", where)
        elif kind == "resource":
            resource = report.mapping(block, "resource", where)
            if resource is not None:
                report.string(resource, "uri", f"{where}/resource")
                if "blob" in resource:
                    report.base64(resource, "blob", f"{where}/resource")
                else:
                    report.string(resource, "text", f"{where}/resource")
        elif kind == "resource_link":
            report.string(block, "uri", where)
            report.string(block, "name", where)
        else:
            report.error("RES-PART", f"{where}/type", f"MCP has no {kind!r} content block")


def check_result(message: Any, provider: str, *, followup: bool = False) -> list[Violation]:
    """Violations of `provider`'s documented shape in a tool-result message (see the module docstring).

    Args:
        message: What `tool_result_message` (or, with `followup=True`, `content_followups`) gave.
        provider: `"openai"`, `"openai-responses"`, `"anthropic"`, `"gemini"` or `"mcp"`.
        followup: Check one item of `content_followups` (a user message, a Gemini part) instead.
    """
    report = _Report()
    if not isinstance(message, Mapping):
        report.error("RES-SHAPE", "", "expected an object")
        return report.found
    if provider == "openai":
        _openai_chat(report, message, followup)
    elif provider == "openai-responses":
        _openai_responses(report, message)
    elif provider == "anthropic":
        _anthropic(report, message)
    elif provider == "gemini":
        _gemini(report, message, followup)
    elif provider == "mcp":
        _mcp(report, message)
    else:
        raise ValueError(f"Unknown provider {provider!r}.")
    return report.found
