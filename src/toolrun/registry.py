"""`ToolRegistry`: the tools an application offers, and cheap filtered or prefixed views of them.

A registry refuses duplicate names (with a suggestion), is safe to change from several threads, gives each
tool a stable provider-safe alias when its name is one a provider cannot take (dots, over 64 characters),
and caches provider exports until the next change.

Views (`filter`, `prefixed`) hold no copies: they read through to their base on every call and cache
their own exports against the base's version.
"""

from __future__ import annotations

import builtins
import copy
import difflib
import hashlib
import re
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack, overload

from toolrun.exceptions import ToolAlreadyExistsError, ToolNotFoundError
from toolrun.tools import Tool, ToolOptionsKwargs
from toolrun.tools._tool import PROVIDER_NAME_PATTERN

if TYPE_CHECKING:
    from toolrun.search import ToolIndex
    from toolrun.tools import ToolContext

__all__ = ["FilteredView", "PrefixedView", "ToolRegistry", "ToolSet", "provider_safe_name"]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def provider_safe_name(name: str) -> str:
    """A name every provider accepts: unsafe characters become `_`; long names keep a hash suffix."""
    if PROVIDER_NAME_PATTERN.match(name):
        return name
    safe = _UNSAFE.sub("_", name)
    if len(safe) > 64:
        digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
        safe = f"{safe[:55]}_{digest}"
    return safe


def _hashed_alias(name: str) -> str:
    digest = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    return f"{_UNSAFE.sub('_', name)[:55]}_{digest}"


class ToolSet:
    """The read side shared by registries and views: lookup, listing, exports, views."""

    def __init__(self) -> None:
        self._exports: dict[tuple[str, bool], tuple[int, list[dict[str, Any]]]] = {}
        self._index: tuple[int, ToolIndex] | None = None

    # Subclasses provide these three.
    @property
    def version(self) -> int:
        """Changes whenever the set of tools (or their names) changes."""
        raise NotImplementedError

    def tools(self) -> builtins.list[Tool]:
        """The tools, in registration order."""
        raise NotImplementedError

    def find(self, name: str) -> Tool | None:
        """The tool called `name` (or whose provider alias is `name`), or None."""
        raise NotImplementedError

    def wire_name(self, name: str) -> str:
        """The name to show providers for the tool called `name`."""
        raise NotImplementedError

    # Shared behaviour.
    def get(self, name: str) -> Tool:
        """The tool called `name` (or whose alias is `name`); `ToolNotFoundError` with close names if none."""
        found = self.find(name)
        if found is None:
            raise ToolNotFoundError(name, self.suggest(name))
        return found

    def suggest(self, name: str, n: int = 3) -> builtins.list[str]:
        """Registered names closest to `name` (for "did you mean")."""
        names = self.names()
        lowered = {n_.lower(): n_ for n_ in names}
        close = difflib.get_close_matches(str(name).lower(), list(lowered), n=n, cutoff=0.5)
        return [lowered[c] for c in close]

    def names(self) -> builtins.list[str]:
        return [t.name for t in self.tools()]

    def original_name(self, wire_name: str) -> str:
        """Map a name from a provider's tool call back to the registered name (unknown names pass through)."""
        found = self.find(wire_name)
        return found.name if found is not None else wire_name

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools())

    def __len__(self) -> int:
        return len(self.tools())

    def list(self) -> builtins.list[dict[str, Any]]:
        """Each tool's name, description, parameters schema and options, as plain data."""
        return [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "read_only": t.options.read_only,
                "destructive": t.options.destructive,
                "requires_confirmation": t.options.requires_confirmation,
                "tags": sorted(t.options.tags),
            }
            for t in self.tools()
        ]

    def definitions(
        self,
        format: str = "openai",
        *,
        strict: bool = False,
        defer_loading: bool | Collection[str] = False,
        tool_search: str | None = None,
        namespaces: Mapping[str, str] | None = None,
        allowed_callers: Sequence[str] | None = None,
        eager_input_streaming: bool | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Tool definitions in a provider's wire format, cached until the tools change.

        Args:
            format: `"openai"` (Chat Completions), `"openai-responses"`, `"anthropic"`, `"gemini"`, `"mcp"`.
            strict: The provider's strict mode (OpenAI structured outputs, Anthropic strict tool use);
                optional parameters stay optional (required and nullable, `null` meaning the default).
            defer_loading: For large tool sets (`"openai-responses"`, `"anthropic"`): `True` defers every
                tool, a collection of names those; the provider loads a deferred tool only when its tool
                search finds it, and the search tool is added (see `tool_search`).
            tool_search: `"hosted"` (OpenAI), `"bm25"` or `"regex"` (Anthropic), `"none"`.
            namespaces: `"openai-responses"`: namespace → description; tools are grouped by their tags.
            allowed_callers: `"anthropic"`: e.g. `["direct", "code_execution_20250825"]` (programmatic
                tool calling; the calls still go through the executor's gates).
            eager_input_streaming: `"anthropic"`: stream tool input as it is generated.

        Returns:
            A new list each call; the definitions in it are shared with the cache: treat them as read-only.

        Raises:
            ValueError: an option the format cannot carry, or `defer_loading` naming unknown tools.
        """
        plain = (
            defer_loading is False
            and tool_search is None
            and not namespaces
            and allowed_callers is None
            and eager_input_streaming is None
        )
        key = (format, strict)
        version = self.version
        cached = self._exports.get(key)
        if cached is not None and cached[0] == version:
            exported = cached[1]
        else:
            # Imported here: formats sit above the registry in the layering and import `toolrun.tools` only.
            from toolrun.formats import get_format

            fmt = get_format(format)
            exported = [fmt.definition(t, strict=strict, name=self.wire_name(t.name)) for t in self.tools()]
            self._exports[key] = (version, exported)
        if plain:
            return list(exported)
        from toolrun.formats._tool_sets import export_tool_set

        return export_tool_set(
            format,
            self.tools(),
            exported,
            defer_loading=defer_loading,
            tool_search=tool_search,
            namespaces=namespaces,
            allowed_callers=allowed_callers,
            eager_input_streaming=eager_input_streaming,
        )

    def tool_choice(
        self, format: str, allowed: Iterable[str], *, required: bool = False, parallel: bool | None = None
    ) -> dict[str, Any]:
        """Request fields that let the model call only the tools named `allowed` this turn, while the
        `tools` list (and the provider's prompt cache) stays the whole set: OpenAI's `allowed_tools` tool
        choice (Chat and Responses), Gemini's `allowed_function_names`. Anthropic has no such field: send
        `view(...)`'s definitions instead; its `tool_choice` here carries `required` and `parallel` only.

        Raises:
            ToolNotFoundError: a name in `allowed` is not in this set.
            ValueError: the format has no such field.
        """
        from toolrun.formats._tool_sets import tool_choice

        return tool_choice(
            format, [self.wire_name(self.get(n).name) for n in allowed], required=required, parallel=parallel
        )

    def search(self, query: str, k: int = 5) -> builtins.list[Tool]:
        """The `k` tools that best match `query` by name, description and parameters, best first.

        Full-text ranking (BM25 with weighted fields, stemming, split names: bm25s with the ``search``
        extra, SQLite FTS5 without it; see `toolrun.search`). The index is built on first use and rebuilt
        after the tools change.
        """
        version = self.version
        cached = self._index
        if cached is None or cached[0] != version:
            from toolrun.search import ToolIndex  # imported here: `import toolrun` stays light

            cached = self._index = (version, ToolIndex(self.tools()))
        return [hit.tool for hit in cached[1].search(query, k)]

    def describe(self) -> str:
        """The tools as text for a planner prompt: name, when to use, parameters."""
        blocks = []
        for t in self.tools():
            lines = [f"- {self.wire_name(t.name)}: {t.description}"]
            props: Mapping[str, Any] = t.parameters.get("properties") or {}
            required = set(t.parameters.get("required") or ())
            for pname, sub in props.items():
                kind = _type_label(sub)
                bits = [kind, "required" if pname in required else "optional"]
                if isinstance(sub, Mapping) and "default" in sub:
                    bits.append(f"default {sub['default']!r}")
                desc = sub.get("description") if isinstance(sub, Mapping) else None
                lines.append(f"    {pname} ({', '.join(bits)})" + (f": {desc}" if desc else ""))
            if not props:
                lines.append("    (no parameters)")
            blocks.append("\n".join(lines))
        return "\n".join(blocks)

    # Views.
    def filter(
        self,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        tags: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        predicate: Callable[[Tool], bool] | None = None,
    ) -> FilteredView:
        """A view with only the tools that pass every given test.

        Args:
            allow: Only these names.
            deny: Never these names.
            tags: Only tools carrying at least one of these tags.
            roles: Only tools these roles may call (tools without `roles` pass).
            predicate: Any other test.
        """
        return FilteredView(self, allow=allow, deny=deny, tags=tags, roles=roles, predicate=predicate)

    def for_context(self, context: ToolContext[Any]) -> FilteredView:
        """The tools a context may call (its roles and allowlist), e.g. to export only those."""
        return self.filter(allow=context.allowed_tools, roles=context.roles)

    def prefixed(self, prefix: str, *, separator: str = "_") -> PrefixedView:
        """A view whose tool names carry a namespace: `prefix + separator + name`."""
        return PrefixedView(self, prefix, separator=separator)


def _type_label(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(map(str, kind))
    if kind == "array":
        return f"array of {_type_label(schema.get('items'))}"
    if kind:
        return str(kind)
    if "anyOf" in schema:
        return " or ".join(_type_label(s) for s in schema["anyOf"])
    return "any"


class ToolRegistry(ToolSet):
    """A mutable, thread-safe set of uniquely named tools.

    ```python
    registry = ToolRegistry()
    registry.register(delete_task)            # a Tool, or a plain function (made a tool)

    @registry.register(read_only=True)        # also a decorator, with or without options
    def list_tasks() -> builtins.list[dict]: ...
    ```
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._tools: dict[str, Tool] = {}
        self._aliases: dict[str, str] = {}  # provider alias -> registered name
        self._wire: dict[str, str] = {}  # registered name -> provider alias
        self._version = 0
        for item in tools:
            self.register(item)

    @property
    def version(self) -> int:
        return self._version

    @overload
    def register(self, tool: Tool | Callable[..., Any], /, **options: Unpack[ToolOptionsKwargs]) -> Tool: ...

    @overload
    def register(
        self, tool: None = None, /, **options: Unpack[ToolOptionsKwargs]
    ) -> Callable[[Callable[..., Any]], Tool]: ...

    def register(
        self, tool: Tool | Callable[..., Any] | None = None, /, **options: Unpack[ToolOptionsKwargs]
    ) -> Tool | Callable[[Callable[..., Any]], Tool]:
        """Add a tool; a plain function is made a tool first (with `options`).

        Raises:
            ToolAlreadyExistsError: a tool of that name exists (nothing is replaced).
        """
        if tool is None:
            return lambda fn: self.register(fn, **options)
        if not isinstance(tool, Tool):
            tool = Tool.from_function(tool, **options)
        elif options:
            raise TypeError("Options go on the tool's definition when registering an existing Tool.")
        with self._lock:
            if tool.name in self._tools:
                raise ToolAlreadyExistsError(tool.name, self._free_names(tool.name))
            owner = self._aliases.get(tool.name)
            if owner is not None:
                # The name is another tool's provider alias: models (and saved conversations) already
                # call that tool by it. Taking it over would reroute their calls to this tool.
                error = ToolAlreadyExistsError(tool.name, self._free_names(tool.name))
                examples = " or ".join(map(repr, error.suggestions))
                error.args = (
                    f"Tool name {tool.name!r} is already the provider alias of {owner!r}: calls to it go "
                    f"to {owner!r}, and registering another tool under it would reroute them. Choose "
                    f"another name{', e.g. ' + examples if examples else ''}, or unregister {owner!r} first.",
                )
                raise error
            alias = provider_safe_name(tool.name)
            if alias != tool.name and (alias in self._tools or alias in self._aliases):
                alias = _hashed_alias(tool.name)
            self._tools[tool.name] = tool
            if alias != tool.name:
                self._aliases[alias] = tool.name
                self._wire[tool.name] = alias
            self._changed()
        return tool

    def unregister(self, name: str) -> Tool:
        """Remove and return the tool called `name` (`ToolNotFoundError` if none)."""
        with self._lock:
            tool = self._tools.pop(self.original_name(name), None)
            if tool is None:
                raise ToolNotFoundError(name, self.suggest(name))
            alias = self._wire.pop(tool.name, None)
            if alias is not None:
                del self._aliases[alias]
            self._changed()
        return tool

    def _changed(self) -> None:
        self._version += 1
        self._exports.clear()

    def _free_names(self, name: str) -> builtins.list[str]:
        candidates = [f"{name}_v2", f"{name}_alt", f"{name}_2", f"{name}_new"]
        return [c for c in candidates if c not in self._tools and c not in self._aliases][:2]

    def tools(self) -> builtins.list[Tool]:
        with self._lock:
            return list(self._tools.values())

    def find(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is None:
            original = self._aliases.get(name)
            if original is not None:
                tool = self._tools.get(original)
        return tool

    def wire_name(self, name: str) -> str:
        return self._wire.get(name, name)

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<ToolRegistry {len(self)} tools>"


class FilteredView(ToolSet):
    """A live subset of another tool set. Nothing is copied; exports are cached per base version."""

    def __init__(
        self,
        base: ToolSet,
        *,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        tags: Iterable[str] | None = None,
        roles: Iterable[str] | None = None,
        predicate: Callable[[Tool], bool] | None = None,
    ) -> None:
        super().__init__()
        self._base = base
        self._allow = frozenset(allow) if allow is not None else None
        self._deny = frozenset(deny)
        self._tags = frozenset(tags) if tags is not None else None
        self._roles = frozenset(roles) if roles is not None else None
        self._predicate = predicate

    @property
    def version(self) -> int:
        return self._base.version

    def admits(self, tool: Tool) -> bool:
        """Whether `tool` passes this view's tests."""
        if self._allow is not None and tool.name not in self._allow:
            return False
        if tool.name in self._deny:
            return False
        if self._tags is not None and not (tool.options.tags & self._tags):
            return False
        if (
            self._roles is not None
            and tool.options.roles is not None
            and not (tool.options.roles & self._roles)
        ):
            return False
        return self._predicate is None or self._predicate(tool)

    def tools(self) -> builtins.list[Tool]:
        return [t for t in self._base.tools() if self.admits(t)]

    def find(self, name: str) -> Tool | None:
        tool = self._base.find(name)
        return tool if tool is not None and self.admits(tool) else None

    def wire_name(self, name: str) -> str:
        return self._base.wire_name(name)


class PrefixedView(ToolSet):
    """Another tool set with every name namespaced (`github_search` for `search` under `github`)."""

    def __init__(self, base: ToolSet, prefix: str, *, separator: str = "_") -> None:
        super().__init__()
        if not prefix or not re.match(r"^[A-Za-z0-9_-]+$", prefix):
            raise ValueError(f"Invalid prefix {prefix!r}: use letters, digits, '_' or '-'.")
        self._base = base
        self._head = prefix + separator
        self._renamed: dict[str, Tool] = {}
        self._renamed_version = -1
        self._by_wire: dict[str, str] = {}  # exported (possibly shortened) name -> base name
        self._by_wire_version = -1

    @property
    def version(self) -> int:
        return self._base.version

    def _rename(self, tool: Tool) -> Tool:
        # Shallow copies (the handler, validator and schema are shared), rebuilt when the base changes.
        if self._renamed_version != self._base.version:
            self._renamed = {}
            self._renamed_version = self._base.version
        renamed = self._renamed.get(tool.name)
        if renamed is None:
            renamed = copy.copy(tool)
            renamed.name = self._head + tool.name
            self._renamed[tool.name] = renamed
        return renamed

    def tools(self) -> builtins.list[Tool]:
        return [self._rename(t) for t in self._base.tools()]

    def find(self, name: str) -> Tool | None:
        tool = self._base.find(name[len(self._head) :]) if name.startswith(self._head) else None
        if tool is None:
            # A name this view exported in shortened form (prefix + a long name: hashed to 64 characters).
            inner = self._wire_names().get(name)
            tool = self._base.find(inner) if inner is not None else None
        return self._rename(tool) if tool is not None else None

    def _wire_names(self) -> dict[str, str]:
        if self._by_wire_version != self._base.version:
            table: dict[str, str] = {}
            for tool in self._base.tools():
                wire = self.wire_name(self._head + tool.name)
                if wire != self._head + tool.name:
                    table[wire] = tool.name
            self._by_wire, self._by_wire_version = table, self._base.version
        return self._by_wire

    def wire_name(self, name: str) -> str:
        inner = name[len(self._head) :] if name.startswith(self._head) else name
        return provider_safe_name(self._head + self._base.wire_name(inner))
