"""The `toolrun.formats` surface: the registry of formats, the convenience export, the re-exported checker."""

from __future__ import annotations

import pytest

import toolrun.formats
from toolrun import ToolRegistry
from toolrun.exceptions import SchemaError, ToolrunError, UnknownFormatError
from toolrun.formats import FORMATS, ToolCallParseError, WireFormat, definitions, get_format
from toolrun.formats import _check as checker

from .conftest import ALL_EXPORTS, errors, search_tasks, weather_tool


def test_public_surface() -> None:
    assert sorted(toolrun.formats.__all__) == sorted(
        [
            "FORMATS",
            "AnthropicFormat",
            "GeminiFormat",
            "MCPFormat",
            "OpenAIChatFormat",
            "OpenAIResponsesFormat",
            "ToolCallParseError",
            "Violation",
            "WireFormat",
            "check",
            "check_request",
            "check_result",
            "definitions",
            "get_format",
        ]
    )
    for name in toolrun.formats.__all__:
        assert getattr(toolrun.formats, name) is not None


def test_checker_names_are_re_exported_as_they_are() -> None:
    assert toolrun.formats.check is checker.check
    assert toolrun.formats.check_request is checker.check_request
    assert toolrun.formats.Violation is checker.Violation


def test_every_format_is_registered_under_its_name_and_is_a_wire_format() -> None:
    assert list(FORMATS) == ["openai", "openai-responses", "anthropic", "gemini", "mcp"]
    for name, fmt in FORMATS.items():
        assert fmt.name == name
        assert isinstance(fmt, WireFormat)
        assert get_format(name) is fmt
    with pytest.raises(TypeError):
        FORMATS["x"] = FORMATS["openai"]  # type: ignore[index]


def test_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(UnknownFormatError, match=r"'openai'.*'mcp'") as info:
        get_format("openai-chat")
    assert isinstance(info.value, ToolrunError)
    assert isinstance(info.value, ValueError)


def test_parse_error_is_a_value_error() -> None:
    assert issubclass(ToolCallParseError, ValueError)


@pytest.mark.parametrize(("fmt", "strict"), ALL_EXPORTS)
def test_definitions_from_a_registry_use_aliases(fmt: str, strict: bool, registry: ToolRegistry) -> None:
    exported = definitions(registry, fmt, strict=strict)
    assert exported == registry.definitions(fmt, strict=strict)
    for definition in exported:
        assert errors(definition, fmt, strict=strict) == []


def test_definitions_from_plain_tools() -> None:
    exported = definitions([search_tasks], "anthropic")
    assert [d["name"] for d in exported] == ["search_tasks"]
    with pytest.raises(SchemaError, match="not accepted by the openai API"):
        definitions([weather_tool()], "openai")
    assert definitions([weather_tool()], "mcp")[0]["name"] == "weather.current"
    with pytest.raises(UnknownFormatError):
        definitions([search_tasks], "bedrock")


def test_registry_exports_go_through_the_formats(registry: ToolRegistry) -> None:
    names = [d["function"]["name"] for d in registry.definitions("openai", strict=True)]
    assert names == ["search_tasks", "delete_task", "ship", "weather_current"]
