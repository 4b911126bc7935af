"""Conformance checker: does a tool definition, a request's tool list or a tool result meet a provider's
documented rules?

The public entry points and the provider registry. The walker and the shared machinery are in
``_check_base``; each provider's rules (its schema subset, envelope, request-level rules and result shapes)
are in ``_check_openai``, ``_check_anthropic``, ``_check_gemini`` and ``_check_mcp``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from toolrun.exceptions import SchemaError
from toolrun.formats._check_anthropic import AnthropicCheck
from toolrun.formats._check_base import MAX_DEPTH, Provider, Report, Split, Violation, show
from toolrun.formats._check_gemini import GeminiCheck
from toolrun.formats._check_mcp import MCPCheck
from toolrun.formats._check_openai import OpenAIChatCheck, OpenAIResponsesCheck
from toolrun.tools import Tool
from toolrun.tools._tool import PROVIDER_NAME_PATTERN

__all__ = ["MAX_DEPTH", "PROVIDERS", "Violation", "check", "check_request", "check_result"]

_PROVIDERS: dict[str, type[Provider]] = {
    "openai": OpenAIChatCheck,
    "openai-responses": OpenAIResponsesCheck,
    "anthropic": AnthropicCheck,
    "gemini": GeminiCheck,
    "mcp": MCPCheck,
}
#: Provider names accepted by ``check`` and ``check_request``.
PROVIDERS = tuple(_PROVIDERS)


def _provider(provider: str) -> type[Provider]:
    try:
        return _PROVIDERS[provider]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown provider {show(provider)}; expected one of {', '.join(PROVIDERS)}"
        ) from None


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------


def check(definition: Mapping[str, Any] | Tool, provider: str, *, strict: bool = False) -> list[Violation]:
    """Check one tool definition against a provider's rules.

    Args:
        definition: The tool exactly as it would be sent: a Chat Completions tool (``"openai"``), a flat
            Responses tool (``"openai-responses"``), an Anthropic custom tool, one Gemini
            FunctionDeclaration, or an MCP Tool. Untrusted input is fine: nothing is followed or
            recursed into without a bound. Or a `Tool`: it is exported for the provider and checked, and
            what the export had to give up is reported too, as warnings (`SCHEMA-ROOT-UNION`: root
            alternatives stated in the description; `OAI-S-FREEFORM`/`ANT-S-FREEFORM`: a free-form object
            that made a strict export non-strict; `OAI-S-ANY`: "any value" narrowed to scalars).
        provider: One of ``"openai"``, ``"openai-responses"``, ``"anthropic"``, ``"gemini"``, ``"mcp"``.
        strict: Apply the strict-mode subset and size limits (OpenAI, Anthropic). A definition that says
            ``"strict": true`` is checked as strict regardless. Ignored for Gemini and MCP.

    Returns:
        The violations found, in document order; empty when the definition conforms.

    Raises:
        ValueError: If ``provider`` is unknown.
    """
    if isinstance(definition, Tool):
        return _check_tool(definition, provider, strict=strict)
    return _provider(provider)(strict=strict).run(definition).violations


def _check_tool(tool: Tool, provider: str, *, strict: bool) -> list[Violation]:
    from toolrun.formats import get_format  # the formats package imports this module

    _provider(provider)  # an unknown provider is a ValueError, as for definitions
    fmt = get_format(provider)
    name = (
        tool.name
        if PROVIDER_NAME_PATTERN.match(tool.name)
        else re.sub(r"[^a-zA-Z0-9_-]", "_", tool.name)[:64]
    )
    try:
        definition = fmt.definition(tool, strict=strict, name=name)
        losses = getattr(fmt, "findings", None)
        findings: list[tuple[str, str, str]] = losses(tool, strict=strict) if callable(losses) else []
    except SchemaError as exc:
        return [Violation(rule="EXPORT-1", path="", message=str(exc), severity="error")]
    violations = _provider(provider)(strict=strict).run(definition).violations
    reported = {(v.rule, v.path) for v in violations}
    base = getattr(fmt, "schema_path", "")
    for rule, ptr, message in findings:
        if (rule, base + ptr) not in reported:
            violations.append(Violation(rule=rule, path=base + ptr, message=message, severity="warning"))
    return violations


def check_request(
    definitions: Sequence[Mapping[str, Any]],
    provider: str,
    *,
    strict: bool = False,
    tool_choice: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """Check the tool list of one request: every definition plus request-level limits.

    Paths are prefixed with the definition's index (``"/3/function/name"``; a function inside an OpenAI
    namespace: ``"/3/tools/0/name"``); request-level violations (tool counts, Anthropic's strict totals)
    have the path ``""``. The large-tool-set entries and rules (tool search, deferred loading, namespaces,
    ``allowed_callers``, allowed subsets) belong to each provider's module (``split_tools``,
    ``check_choice``).

    Args:
        definitions: The ``tools`` list (for Gemini: the function declarations).
        provider: As for :func:`check`.
        strict: As for :func:`check`, applied to every definition.
        tool_choice: The request's fields that pick a subset, when it has them: ``{"tool_choice": ...}``
            (OpenAI) or ``{"tool_config": ...}`` (Gemini), e.g. what `ToolRegistry.tool_choice` made.

    Returns:
        All violations: per definition, then ``REQ-DUP-NAME``, the tool-set rules and the request limits.

    Raises:
        ValueError: If ``provider`` is unknown.
    """
    cls = _provider(provider)
    split = Split()
    cls.split_tools(definitions, split)
    if tool_choice is not None:
        cls.check_choice(tool_choice, cls.function_names(split), split)
    results = [cls(strict=strict).run(definition) for _, definition in split.functions]
    violations = [
        replace(violation, path=f"{prefix}{violation.path}")
        for (prefix, _), result in zip(split.functions, results, strict=True)
        for violation in result.violations
    ]
    report = Report()
    seen: dict[str, str] = {}
    for (prefix, _), result in zip(split.functions, results, strict=True):
        if result.name is None:
            continue
        if result.name in seen:
            report.error(
                "REQ-DUP-NAME",
                f"{prefix}{result.name_path}",
                f"tool name {show(result.name)} is already used by definition {seen[result.name]}; "
                "names must be unique.",
            )
        else:
            seen[result.name] = prefix.lstrip("/")
    for rule, path, message, severity in split.problems:
        report.add(rule, path, message, severity)  # type: ignore[arg-type]
    if cls.MAX_TOOLS is not None and len(results) > cls.MAX_TOOLS[1]:
        rule, limit = cls.MAX_TOOLS
        report.error(rule, "", f"{len(results)} tools in one request; at most {limit} are supported.")
    cls.request_limits(results, report)
    return violations + report.items


def check_result(message: Any, provider: str, *, followup: bool = False) -> list[Violation]:
    """Check a tool-result message (and what follows it) against the shape `provider` documents.

    ```python
    check_result(message, "anthropic")                   # list[Violation]; empty when it conforms
    check_result(user_message, "openai", followup=True)  # the user message after the tool messages
    ```

    Rules (all errors: the API rejects the request):

    - `RES-SHAPE`: the envelope: a missing or mistyped key (`tool_call_id`, `call_id`, `tool_use_id`,
      `functionResponse.name`, MCP `content`, ...).
    - `RES-PART`: a part or block type the API does not take in that place (Chat Completions tool messages
      take text parts only; Responses `function_call_output` takes `input_text`, `input_image`,
      `input_file`; Anthropic `tool_result` takes `text`, `image`, `document`, `search_result`; MCP takes
      `text`, `image`, `audio`, `resource`, `resource_link`).
    - `RES-MEDIA`: a media type the API does not take there (Anthropic images: PNG, JPEG, GIF, WebP;
      documents: PDF as base64, `text/plain` as text; Gemini function-response parts: PNG, JPEG, WebP, PDF,
      text; Chat Completions audio: `wav` or `mp3`).
    - `RES-DATA`: bytes that are not valid base64, or a URL field that is neither `http(s):` nor a `data:`
      URL of the right kind.

    Args:
        message: What `tool_result_message` (or, with `followup=True`, `content_followups`) gave.
        provider: `"openai"`, `"openai-responses"`, `"anthropic"`, `"gemini"` or `"mcp"`.
        followup: Check one item of `content_followups` (a user message, a Gemini part) instead.

    Raises:
        ValueError: If ``provider`` is unknown (and ``message`` is an object).
    """
    report = Report()
    if not isinstance(message, Mapping):
        report.error("RES-SHAPE", "", "expected an object")
        return report.items
    cls = _PROVIDERS.get(provider) if isinstance(provider, str) else None
    if cls is None:
        raise ValueError(f"Unknown provider {provider!r}.")
    cls.check_result(report, message, followup)
    return report.items
