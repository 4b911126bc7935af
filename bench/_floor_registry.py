"""Registry benchmark, floor's and peers' half: register 1,000 tools and export their OpenAI schemas.

Inputs are built deterministically by :func:`build_specs`: 1,000 distinct tool signatures, 1-6 parameters
each, of types ``str``/``int``/``float``/``bool``/``list[str]``/``Optional[...]``/``Literal[...]``, with
defaults and a description per parameter. A spec is plain data (:class:`ToolSpec` of :class:`Param`
tuples, each type spelled as annotation source such as ``"Optional[int]"``), so any approach can build
what it needs from it; :func:`make_function` turns a spec into a real Python function (annotations,
defaults, Google-style docstring with an ``Args:`` section) for the libraries that register functions.

* ``floor``: :func:`floor_register_and_export`, from the specs: ``create_model`` with ``Field(default,
  description=...)`` per parameter + ``model_json_schema()``, wrapped in ``{"type": "function",
  "function": {...}}``. It gets types and descriptions already parsed, so it is a lower bound: no
  signature introspection, no docstring parsing.
* peers, from the functions (each parses the docstring for the parameter descriptions):
  LangChain ``convert_to_openai_tool(StructuredTool.from_function(f, parse_docstring=True))``;
  Agents SDK ``function_tool(f)`` (strict schema) -> ``params_json_schema``; Pydantic AI ``Tool(f)`` ->
  ``tool_def.parameters_json_schema``; FastMCP ``FunctionTool.from_function(f)`` -> ``parameters``.

Every timed batch gets freshly built specs and functions (untimed ``prepare``) whose descriptions carry
a new salt, so no cache keyed on a function object or a docstring can make a later round cheaper than
registering new tools would be. Peak and retained memory of one registration of the 1,000 tools are
measured separately with ``tracemalloc`` (:func:`_harness.peak_memory`).

toolrun's half plugs in with :func:`run`::

    import _floor_registry

    def toolrun_register_and_export(functions: list[FunctionType]) -> list[dict]:
        ...  # register every function, return the OpenAI tool envelopes

    _floor_registry.run(toolrun={"toolrun": toolrun_register_and_export})

Run the floor and peers alone: ``python bench/_floor_registry.py [--quick]``.
"""

import asyncio
import functools
import inspect
import random
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Optional

import _harness
import pydantic
from _harness import Candidate, Kind

REQUIRED: Any = ...
"""``Param.default`` of a parameter without a default (Pydantic's spelling of "required")."""

N_TOOLS = 1_000


class Param(NamedTuple):
    name: str
    type: str
    """Annotation source, evaluated with ``typing.Optional`` and ``typing.Literal`` in scope."""
    default: Any
    """The default value, or :data:`REQUIRED`."""
    description: str


class ToolSpec(NamedTuple):
    name: str
    description: str
    params: tuple[Param, ...]


Registered = tuple[Any, list[dict[str, Any]]]
"""What a registration returns: (the registry: whatever the library keeps to call the tools later,
one OpenAI tool envelope per tool). The registry is held while memory is measured, so "retained" is
what keeping 1,000 registered tools costs."""

Registrar = Callable[[list[types.FunctionType]], Registered]
"""Registers functions (toolrun and peers)."""

# --------------------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------------------

_VERBS = ("search", "get", "list", "create", "update", "delete", "archive", "export", "sync", "count")
_NOUNS = (
    "invoices",
    "customers",
    "orders",
    "tickets",
    "files",
    "events",
    "users",
    "reports",
    "messages",
    "products",
)
_PARAM_NAMES = (
    "query",
    "limit",
    "offset",
    "verbose",
    "tags",
    "mode",
    "threshold",
    "user_id",
    "region",
    "output_format",
    "sort_order",
    "include_archived",
    "since",
    "priority",
    "page_size",
    "labels",
    "timeout_s",
    "dry_run",
    "owner",
    "score",
)
_LITERALS = (
    ("asc", "desc"),
    ("low", "medium", "high"),
    ("json", "text", "markdown"),
    ("eu", "us", "apac", "latam"),
    ("draft", "open", "closed"),
)
_TYPES = (
    "str",
    "int",
    "float",
    "bool",
    "list[str]",
    "Optional[str]",
    "Optional[int]",
    "Optional[float]",
    "Optional[list[str]]",
    "Literal",
)


def _param(rng: random.Random, name: str) -> Param:
    kind = rng.choice(_TYPES)
    with_default = rng.random() < 0.4
    tail = rng.choice(("if any", "as given", "for filtering", "in full"))
    desc = f"The {name.replace('_', ' ')} to use, {tail}."
    if kind == "Literal":
        choices = rng.choice(_LITERALS)
        src = f"Literal[{', '.join(repr(c) for c in choices)}]"
        return Param(name, src, choices[0] if with_default else REQUIRED, desc)
    if kind.startswith("Optional["):
        return Param(name, kind, None, desc)
    if kind == "list[str]" or not with_default:
        return Param(name, kind, REQUIRED, desc)
    default = {
        "str": "",
        "int": rng.randint(1, 100),
        "float": round(rng.random(), 2),
        "bool": rng.random() < 0.5,
    }
    return Param(name, kind, default[kind], desc)


def build_specs(n: int = N_TOOLS, *, seed: int = 0, salt: str = "") -> list[ToolSpec]:
    """``n`` distinct tool specs, deterministic for a given ``seed``; ``salt`` only changes descriptions."""
    rng = random.Random(seed)
    specs = []
    for i in range(n):
        verb, noun = _VERBS[i % len(_VERBS)], _NOUNS[(i // len(_VERBS)) % len(_NOUNS)]
        names = rng.sample(_PARAM_NAMES, i % 6 + 1)
        params = [_param(rng, name) for name in names]
        params.sort(key=lambda p: p.default is not REQUIRED)  # required parameters first
        specs.append(
            ToolSpec(
                name=f"{verb}_{noun}_{i:04d}",
                description=f"{verb.capitalize()} {noun} matching the given filters (variant {i}){salt}.",
                params=tuple(params),
            )
        )
    return specs


# --------------------------------------------------------------------------------------------------------
# Specs -> real functions
# --------------------------------------------------------------------------------------------------------

TYPE_NAMESPACE: dict[str, Any] = {"Optional": Optional, "Literal": Literal}


@functools.cache
def resolve_type(src: str) -> Any:
    """The annotation object for a ``Param.type`` (cached: the floor gets resolved types for free)."""
    return eval(src, dict(TYPE_NAMESPACE))


def function_source(spec: ToolSpec) -> str:
    """Python source of the function for ``spec``; defaults are the names ``_d_<param>``."""
    args = ", ".join(
        f"{p.name}: {p.type}" + ("" if p.default is REQUIRED else f" = _d_{p.name}") for p in spec.params
    )
    doc_args = "\n".join(f"        {p.name}: {p.description}" for p in spec.params)
    return (
        f"def {spec.name}({args}) -> str:\n"
        f'    """{spec.description}\n'
        f"\n"
        f"    Args:\n"
        f"{doc_args}\n"
        f'    """\n'
        f"    return {spec.name!r}\n"
    )


def make_function(spec: ToolSpec) -> types.FunctionType:
    """A real function for ``spec``, built by ``exec`` of :func:`function_source`.

    Its annotations are real objects (no ``from __future__ import annotations``), its globals hold
    ``Optional``/``Literal``, so ``inspect.signature`` and ``typing.get_type_hints`` both work, and
    ``inspect.getdoc`` gives a Google-style docstring with an ``Args:`` section.
    """
    namespace: dict[str, Any] = {"__name__": __name__, **TYPE_NAMESPACE}
    namespace.update({f"_d_{p.name}": p.default for p in spec.params if p.default is not REQUIRED})
    exec(function_source(spec), namespace)
    fn = namespace[spec.name]
    assert isinstance(fn, types.FunctionType)
    return fn


def build_functions(specs: Sequence[ToolSpec]) -> list[types.FunctionType]:
    return [make_function(s) for s in specs]


# --------------------------------------------------------------------------------------------------------
# Floor and peers
# --------------------------------------------------------------------------------------------------------


def _envelope(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def floor_register_and_export(specs: Sequence[ToolSpec]) -> Registered:
    """Plain Pydantic: ``create_model`` + ``model_json_schema()`` per spec, in an OpenAI envelope.

    Returns ``({name: model}, envelopes)``.
    """
    registry: dict[str, type[pydantic.BaseModel]] = {}
    out = []
    for spec in specs:
        fields: dict[str, Any] = {
            p.name: (resolve_type(p.type), pydantic.Field(p.default, description=p.description))
            for p in spec.params
        }
        model = pydantic.create_model(spec.name, **fields)
        registry[spec.name] = model
        out.append(_envelope(spec.name, spec.description, model.model_json_schema()))
    return registry, out


def langchain_register_and_export(functions: list[types.FunctionType]) -> Registered:
    """``StructuredTool.from_function(f, parse_docstring=True)`` -> ``convert_to_openai_tool``."""
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    tools = [StructuredTool.from_function(f, parse_docstring=True) for f in functions]
    return tools, [convert_to_openai_tool(t) for t in tools]


def openai_agents_register_and_export(functions: list[types.FunctionType]) -> Registered:
    """``function_tool(f)`` (strict JSON schema, the default) -> ``params_json_schema``."""
    from agents import function_tool

    tools = [function_tool(f) for f in functions]
    return tools, [_envelope(t.name, t.description, t.params_json_schema) for t in tools]


def pydantic_ai_register_and_export(functions: list[types.FunctionType]) -> Registered:
    """``Tool(f)`` -> ``tool_def`` (name, description, ``parameters_json_schema``)."""
    from pydantic_ai import Tool

    tools = [Tool(f) for f in functions]
    defs = [t.tool_def for t in tools]
    return tools, [_envelope(d.name, d.description or "", d.parameters_json_schema) for d in defs]


def fastmcp_register_and_export(functions: list[types.FunctionType]) -> Registered:
    """``FunctionTool.from_function(f)`` -> ``parameters``."""
    from fastmcp.tools import FunctionTool

    tools = [FunctionTool.from_function(f) for f in functions]
    return tools, [_envelope(t.name, t.description or "", t.parameters) for t in tools]


PEERS: dict[str, Registrar] = {
    "langchain": langchain_register_and_export,
    "openai_agents": openai_agents_register_and_export,
    "pydantic_ai": pydantic_ai_register_and_export,
    "fastmcp": fastmcp_register_and_export,
}

NOTES = {
    "floor": "from specs: create_model(Field(description=)) + model_json_schema()",
    "langchain": "StructuredTool.from_function(parse_docstring=True) + convert_to_openai_tool",
    "openai_agents": "function_tool(f).params_json_schema (strict)",
    "pydantic_ai": "Tool(f).tool_def.parameters_json_schema",
    "fastmcp": "FunctionTool.from_function(f).parameters",
}


# --------------------------------------------------------------------------------------------------------
# Checking and running
# --------------------------------------------------------------------------------------------------------


def check_export(specs: Sequence[ToolSpec], exported: Sequence[dict[str, Any]]) -> float:
    """Raise unless every tool and parameter is there; return the share of parameter descriptions kept."""
    if len(exported) != len(specs):
        raise AssertionError(f"{len(exported)} tools exported for {len(specs)} specs")
    kept = total = 0
    for spec, env in zip(specs, exported, strict=True):
        fn = env["function"]
        if fn["name"] != spec.name:
            raise AssertionError(f"tool {fn['name']!r} where {spec.name!r} was expected")
        props = fn["parameters"].get("properties", {})
        for p in spec.params:
            if p.name not in props:
                raise AssertionError(f"{spec.name}: parameter {p.name!r} missing from {sorted(props)}")
            total += 1
            kept += props[p.name].get("description") == p.description
    return kept / total if total else 1.0


class _Input:
    """Fresh, salted specs + functions for the next batch (built untimed by ``prepare``)."""

    def __init__(self) -> None:
        self.counter = 0
        self.specs: list[ToolSpec] = []
        self.functions: list[types.FunctionType] = []

    def prepare(self, *, functions: bool) -> None:
        self.counter += 1
        self.specs = build_specs(salt=f" #{self.counter}")
        self.functions = build_functions(self.specs) if functions else []


def _candidate(
    name: str, kind: Kind, registrar: Callable[[Any], Registered], from_specs: bool
) -> tuple[Candidate, _Input]:
    inp = _Input()

    async def op() -> Registered:
        return registrar(inp.specs if from_specs else inp.functions)

    def prepare() -> None:
        inp.prepare(functions=not from_specs)

    return Candidate(name=name, op=op, kind=kind, batch=1, prepare=prepare, note=NOTES.get(name, "")), inp


async def main(settings: _harness.Settings, toolrun: Mapping[str, Registrar] | None = None) -> dict[str, Any]:
    entries: list[tuple[str, Kind, Callable[[Any], Registered], bool]] = [
        ("floor", "floor", floor_register_and_export, True)
    ]
    entries += [(name, "toolrun", fn, False) for name, fn in (toolrun or {}).items()]
    entries += [(name, "peer", fn, False) for name, fn in PEERS.items()]

    candidates: list[Candidate] = []
    memory: dict[str, _harness.Memory] = {}
    descriptions: dict[str, float] = {}
    for name, kind, registrar, from_specs in entries:
        if kind != "floor" and not settings.wants(name):
            continue
        cand, inp = _candidate(name, kind, registrar, from_specs)
        try:
            inp.prepare(functions=not from_specs)
            _, exported = await cand.op()
        except ImportError as exc:
            print(f"  skipped {name}: {exc}", file=sys.stderr)
            continue
        descriptions[name] = check_export(inp.specs, exported)
        del exported
        inp.prepare(functions=not from_specs)
        arg = inp.specs if from_specs else inp.functions
        memory[name] = _harness.peak_memory(registrar, arg)
        if descriptions[name] < 1.0:
            cand.note += f" [kept {descriptions[name]:.0%} of parameter descriptions]"
        candidates.append(cand)

    rows = await _harness.measure(candidates, settings)
    n_params = sum(len(s.params) for s in build_specs())
    _harness.compare(
        rows,
        "floor",
        title=(
            f"Register {N_TOOLS:,} tools ({n_params:,} parameters) and export OpenAI schemas "
            f"(median of {settings.rounds} rounds)"
        ),
        unit="ms",
        per=f"{N_TOOLS} tools",
        name="registry",
        settings=settings,
        extra={
            "n_tools": N_TOOLS,
            "n_params": n_params,
            "memory": {k: vars(v) for k, v in memory.items()},
            "param_descriptions_kept": descriptions,
        },
    )
    print(f"\nMemory of one registration of {N_TOOLS:,} tools (tracemalloc)")
    width = max(len(n) for n in memory)
    print(f"{'candidate':<{width}}  {'peak MiB':>9}  {'retained MiB':>12}  {'retained KiB/tool':>17}")
    for name, m in memory.items():
        print(
            f"{name:<{width}}  {m.peak_bytes / 2**20:>9.1f}  {m.retained_bytes / 2**20:>12.1f}  "
            f"{m.retained_bytes / 1024 / N_TOOLS:>17.1f}"
        )
    return {"rows": rows, "memory": memory, "param_descriptions_kept": descriptions}


def run(toolrun: Mapping[str, Registrar] | None = None, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Command-line entry point: parse flags, run, print and write the table."""
    settings = _harness.parse_args(
        argv, description="Register 1,000 tools and export their schemas", rounds=11, quick_rounds=2
    )
    return asyncio.run(main(settings, toolrun))


def _self_check() -> None:
    """``make_function`` output is inspectable; cheap enough to run on every invocation."""
    spec = build_specs(6)[5]
    fn = make_function(spec)
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    assert list(sig.parameters) == [p.name for p in spec.params], sig
    for p in spec.params:
        assert hints[p.name] == resolve_type(p.type), (p, hints[p.name])
        default = sig.parameters[p.name].default
        assert (default is inspect.Parameter.empty) if p.default is REQUIRED else default == p.default
    assert "Args:" in (inspect.getdoc(fn) or "")


_self_check()

if __name__ == "__main__":
    run(argv=sys.argv[1:])
