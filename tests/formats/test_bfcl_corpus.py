"""The BFCL corpus (Berkeley Function Calling Leaderboard V4) through toolrun, end to end.

Every function doc is loaded leniently, registered (dotted names get provider-safe aliases), exported to every
format, plain and strict, and checked; every gold call is turned into concrete arguments and validated by the
tool. Gold calls that disagree with their own schema are counted by kind, not hidden (see the corpus README).

The corpus lives outside the repository, beside it: `<repo>/../shared/corpora/bfcl`. Without it these tests
fail (they do not skip): CI must check the shared corpora out next to the repository.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from toolrun import Tool, ToolRegistry
from toolrun.exceptions import ArgumentsError
from toolrun.formats import FORMATS, check, check_request

CORPUS = (Path(__file__).resolve().parents[2] / "../shared/corpora/bfcl").resolve()
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
GOLD_CATEGORIES = CATEGORIES[:-1]  # irrelevance has no gold calls: the right answer is no call
ACCEPTANCE_FLOOR = 0.99
"""Measured: 1,740 of 1,747 gold calls (99.6 %) validate; the rest disagree with their own schema."""
_OMIT = object()


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not (CORPUS / "BFCL_v4_simple_python.json").is_file():
        pytest.fail(
            f"BFCL corpus not found at {CORPUS}. The tests expect the shared corpora checked out beside the "
            "repository (<repo>/../shared/corpora/bfcl, see shared/corpora/README.md); they do not skip."
        )
    return CORPUS


def _records(path: Path) -> list[dict[str, Any]]:
    """JSON Lines, despite the `.json` name."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _registry(record: dict[str, Any]) -> ToolRegistry:
    return ToolRegistry(
        [
            Tool.from_schema(f["name"], f["description"], f["parameters"], lenient=True)
            for f in record["function"]
        ]
    )


# --------------------------------------------------------------------------------------------------------
# Function docs: load, register, export, check


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_function_doc_loads_registers_and_exports_cleanly(corpus: Path, category: str) -> None:
    records = _records(corpus / f"BFCL_v4_{category}.json")
    functions = aliased = exported = 0
    violations: Counter[tuple[str, bool, str, str]] = Counter()
    for record in records:
        registry = _registry(record)
        functions += len(record["function"])
        aliased += sum(1 for t in registry if registry.wire_name(t.name) != t.name)
        for fmt in FORMATS:
            for strict in (False, True):
                definitions = registry.definitions(fmt, strict=strict)
                exported += len(definitions)
                for definition in definitions:
                    for v in check(definition, fmt, strict=strict):
                        violations[(fmt, strict, v.severity, v.rule)] += 1
                for v in check_request(definitions, fmt, strict=strict):
                    if v.path == "":  # request-level limits only; per-definition ones were counted above
                        violations[(fmt, strict, v.severity, v.rule)] += 1
    print(
        f"\n{category}: {len(records)} records, {functions} functions ({aliased} aliased), {exported} exports"
    )
    assert exported == functions * len(FORMATS) * 2
    errors = {k: n for k, n in violations.items() if k[2] == "error"}
    assert errors == {}, errors
    # No warning either, but one: the documented warning classes (Gemini parameter names, MCP ':' names, >500
    # enum values) do not occur in this corpus; a free-form object (a `dict` parameter without properties)
    # makes a strict export non-strict, named by a FREEFORM warning, rather than letting the model send {}.
    freeform = {k: n for k, n in violations.items() if k[3].endswith("-S-FREEFORM")}
    assert all(
        strict and fmt in ("openai", "openai-responses", "anthropic") for fmt, strict, _, _ in freeform
    )
    assert violations - Counter(freeform) == Counter(), violations


def test_dotted_names_get_aliases_and_map_back(corpus: Path) -> None:
    record = next(
        r for r in _records(corpus / "BFCL_v4_simple_python.json") if "." in r["function"][0]["name"]
    )
    registry = _registry(record)
    name = record["function"][0]["name"]
    wire = registry.wire_name(name)
    assert "." not in wire
    assert registry.original_name(wire) == name


# --------------------------------------------------------------------------------------------------------
# Gold calls


def _choose(options: Any) -> Any:
    """The first acceptable value; `""` among the values means the parameter may be omitted."""
    if not isinstance(options, list) or not options or "" in options:
        return _OMIT
    return _concrete(options[0])


def _concrete(value: Any) -> Any:
    """Gold values nest: a dict value maps its keys to lists of acceptable values, recursively."""
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        return {k: c for k, options in value.items() if (c := _choose(options)) is not _OMIT}
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _kind(problem_message: str, expected: str | None, given: str | None) -> str:
    if "unknown field" in problem_message:
        return "unknown parameter"
    if "required field is missing" in problem_message:
        return "gold omits a required parameter"
    if expected and expected.startswith("one of"):
        return "value outside the enum"
    if "is not of type" in problem_message:
        return "null for a non-nullable type" if given == "null" else "type mismatch"
    return "other: " + problem_message[:60]


@dataclass
class GoldReport:
    calls: int = 0
    accepted: int = 0
    rejected: dict[str, list[str]] = field(default_factory=dict)
    """Rejected gold calls by kind of disagreement (a call with several kinds counts under each)."""
    omitted_parameters: int = 0
    """Schema parameters a gold call leaves out (BFCL: "must not be supplied")."""
    null_means_default: int = 0
    """Gold values that are `null` for an optional parameter that cannot be null (read as its default)."""

    def summary(self) -> str:
        rate = self.accepted / self.calls
        kinds = ", ".join(f"{kind}: {len(ids)}" for kind, ids in sorted(self.rejected.items()))
        return (
            f"{self.accepted}/{self.calls} gold calls accepted ({rate:.2%}); "
            f"rejected by kind: {kinds or 'none'}; "
            f"{self.omitted_parameters} schema parameters left out by gold calls; "
            f"{self.null_means_default} nulls read as the default"
        )


def _gold_calls(corpus: Path, category: str) -> list[tuple[str, ToolRegistry, str, dict[str, Any]]]:
    records = {r["id"]: r for r in _records(corpus / f"BFCL_v4_{category}.json")}
    calls = []
    for gold in _records(corpus / "possible_answer" / f"BFCL_v4_{category}.json"):
        registry = _registry(records[gold["id"]])
        for call in gold["ground_truth"]:
            ((name, params),) = call.items()
            calls.append((gold["id"], registry, name, _concrete(params)))
    return calls


@pytest.fixture(scope="module")
def gold(corpus: Path) -> dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]]:
    return {category: _gold_calls(corpus, category) for category in GOLD_CATEGORIES}


def test_gold_calls_validate_above_the_floor(
    gold: dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]],
) -> None:
    report = GoldReport()
    for calls in gold.values():
        for record_id, registry, name, arguments in calls:
            tool = registry.get(name)
            report.calls += 1
            properties = tool.parameters.get("properties", {})
            report.omitted_parameters += len(set(properties) - set(arguments))
            report.null_means_default += sum(
                1 for k, v in arguments.items() if v is None and k not in tool.parameters.get("required", [])
            )
            try:
                tool.validate(arguments)
            except ArgumentsError as exc:
                kinds = {_kind(p.message, p.expected, p.given) for p in exc.problems}
                for kind in kinds:
                    report.rejected.setdefault(kind, []).append(record_id)
            else:
                report.accepted += 1
    print("\nBFCL gold calls:", report.summary())
    for kind, ids in sorted(report.rejected.items()):
        print(f"  {kind}: {', '.join(sorted(set(ids)))}")
    assert report.calls == 1747
    assert report.accepted / report.calls >= ACCEPTANCE_FLOOR, report.summary()
    assert not [kind for kind in report.rejected if kind.startswith(("other", "unknown"))], report.summary()


def test_every_other_acceptable_gold_value_validates_above_the_floor(
    gold: dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]], corpus: Path
) -> None:
    """Each alternative a gold call allows for one parameter, put in place of the first choice."""
    tried = accepted = 0
    rejected: Counter[str] = Counter()
    for category in GOLD_CATEGORIES:
        records = {r["id"]: r for r in _records(corpus / f"BFCL_v4_{category}.json")}
        for record in _records(corpus / "possible_answer" / f"BFCL_v4_{category}.json"):
            registry = _registry(records[record["id"]])
            for call in record["ground_truth"]:
                ((name, params),) = call.items()
                tool, base = registry.get(name), _concrete(params)
                try:
                    tool.validate(base)
                except ArgumentsError:
                    continue  # the first choice already disagrees (counted above)
                for param, options in params.items():
                    for option in options[1:]:
                        if option == "":
                            continue
                        tried += 1
                        try:
                            tool.validate({**base, param: _concrete(option)})
                        except ArgumentsError as exc:
                            for kind in {_kind(p.message, p.expected, p.given) for p in exc.problems}:
                                rejected[kind] += 1
                        else:
                            accepted += 1
    print(f"\nBFCL alternative gold values: {accepted}/{tried} accepted; rejected by kind: {dict(rejected)}")
    assert tried > 1000
    assert accepted / tried >= ACCEPTANCE_FLOOR, rejected


@pytest.mark.parametrize("category", GOLD_CATEGORIES)
def test_a_parameter_the_schema_does_not_have_is_rejected(
    gold: dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]], category: str
) -> None:
    for record_id, registry, name, arguments in gold[category]:
        with pytest.raises(ArgumentsError, match="unknown field") as info:
            registry.get(name).validate({**arguments, "not_a_parameter": 1})
        assert any(p.path == "" and "not_a_parameter" in p.message for p in info.value.problems), record_id


@pytest.mark.parametrize("category", GOLD_CATEGORIES)
def test_strict_shaped_gold_calls_read_null_as_the_default(
    gold: dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]], category: str
) -> None:
    """A strict-mode model must send every parameter; `null` for an optional one means "not given"."""
    for record_id, registry, name, arguments in gold[category]:
        tool = registry.get(name)
        try:
            expected = tool.validate(arguments)
        except ArgumentsError:
            continue  # a gold call that disagrees with its schema (counted above)
        strict = registry.definitions("openai", strict=True)
        wire = registry.wire_name(name)
        schema = next(d["function"]["parameters"] for d in strict if d["function"]["name"] == wire)
        filled = {p: arguments.get(p) for p in schema["required"]}
        assert tool.validate(json.dumps(filled)) == expected, record_id


def _response(fmt: str, wire: str, arguments: dict[str, Any]) -> Any:
    """A minimal provider response carrying one call, in each provider's documented shape."""
    text = json.dumps(arguments)
    openai_call = {"id": "call_1", "type": "function", "function": {"name": wire, "arguments": text}}
    return {
        "openai": {"choices": [{"message": {"role": "assistant", "tool_calls": [openai_call]}}]},
        "openai-responses": {
            "output": [{"type": "function_call", "call_id": "call_1", "name": wire, "arguments": text}]
        },
        "anthropic": {"content": [{"type": "tool_use", "id": "toolu_1", "name": wire, "input": arguments}]},
        "gemini": {
            "candidates": [{"content": {"parts": [{"functionCall": {"name": wire, "args": arguments}}]}}]
        },
        "mcp": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": wire, "arguments": arguments},
        },
    }[fmt]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gold_calls_parse_back_to_registered_names(
    gold: dict[str, list[tuple[str, ToolRegistry, str, dict[str, Any]]]], fmt: str
) -> None:
    for calls in gold.values():
        for record_id, registry, name, arguments in calls:
            definition = FORMATS[fmt].definition(registry.get(name), name=registry.wire_name(name))
            wire = definition.get("name") or definition["function"]["name"]
            [call] = FORMATS[fmt].parse_tool_calls(_response(fmt, wire, arguments), names=registry)
            assert call.name == name, record_id
            decoded = json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments
            assert decoded == arguments, record_id
