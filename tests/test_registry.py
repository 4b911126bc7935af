"""ToolRegistry: unique names, thread safety, aliases, views, describe()."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from toolrun import Tool, ToolAlreadyExistsError, ToolContext, ToolNotFoundError, ToolRegistry, tool
from toolrun.registry import provider_safe_name
from toolrun.tools._tool import PROVIDER_NAME_PATTERN


def make(name: str, **options: Any) -> Tool:
    def fn(x: int = 0) -> int:
        """Return x."""
        return x

    return Tool.from_function(fn, name=name, **options)


def test_register_get_contains_len_iter_list() -> None:
    registry = ToolRegistry()
    a = registry.register(make("alpha"))
    registry.register(make("beta"))
    assert registry.get("alpha") is a
    assert "alpha" in registry and "gamma" not in registry and 3 not in registry
    assert len(registry) == 2
    assert [t.name for t in registry] == ["alpha", "beta"]
    listed = registry.list()
    assert listed[0]["name"] == "alpha"
    assert listed[0]["parameters"]["properties"]["x"]["default"] == 0


def test_duplicate_name_is_an_error_with_suggestions() -> None:
    registry = ToolRegistry([make("search")])
    with pytest.raises(ToolAlreadyExistsError) as info:
        registry.register(make("search"))
    assert str(info.value).startswith("Tool already exists: 'search'.")
    assert info.value.suggestions == ("search_v2", "search_alt")
    assert "'search_v2'" in str(info.value)
    registry.register(make("search_v2"))
    with pytest.raises(ToolAlreadyExistsError) as again:
        registry.register(make("search"))
    assert again.value.suggestions == ("search_alt", "search_2")


def test_register_as_decorator_with_and_without_options() -> None:
    registry = ToolRegistry()

    @registry.register
    def first() -> str:
        """First."""
        return "1"

    @registry.register(read_only=True)
    def second() -> str:
        """Second."""
        return "2"

    assert registry.names() == ["first", "second"]
    assert registry.get("second").options.read_only


def test_unregister_and_not_found_suggestions() -> None:
    registry = ToolRegistry([make("create_task"), make("delete_task")])
    with pytest.raises(ToolNotFoundError) as info:
        registry.get("delete_tsk")
    assert info.value.suggestions[0] == "delete_task"
    assert "Did you mean 'delete_task'" in str(info.value)
    removed = registry.unregister("delete_task")
    assert removed.name == "delete_task"
    assert "delete_task" not in registry
    with pytest.raises(ToolNotFoundError):
        registry.unregister("delete_task")


def test_aliases_for_names_providers_cannot_take() -> None:
    registry = ToolRegistry([make("math_factorial"), make("math.factorial"), make("n" * 80)])
    # "math.factorial" would clash with a real tool's name, so it gets a hashed alias.
    alias = registry.wire_name("math.factorial")
    assert alias != "math_factorial" and PROVIDER_NAME_PATTERN.match(alias)
    assert registry.original_name(alias) == "math.factorial"
    assert registry.get(alias).name == "math.factorial"
    assert registry.wire_name("math_factorial") == "math_factorial"
    long_alias = registry.wire_name("n" * 80)
    assert len(long_alias) <= 64 and PROVIDER_NAME_PATTERN.match(long_alias)
    assert registry.original_name(long_alias) == "n" * 80
    # Stable: the same name gives the same alias in a fresh registry.
    assert ToolRegistry([make("n" * 80)]).wire_name("n" * 80) == long_alias
    assert provider_safe_name("a.b:c") == "a_b_c"
    registry.unregister(alias)
    assert alias not in registry


def test_a_real_tool_cannot_take_another_tools_alias() -> None:
    """A model calls `math_factorial` (the alias of `math.factorial`); a later tool of that name must not
    capture those calls mid-conversation."""
    registry = ToolRegistry([make("math.factorial")])
    assert registry.wire_name("math.factorial") == "math_factorial"
    version = registry.version
    with pytest.raises(ToolAlreadyExistsError, match=r"provider alias of 'math\.factorial'") as info:
        registry.register(make("math_factorial"))
    assert info.value.name == "math_factorial" and info.value.suggestions
    assert registry.get("math_factorial").name == "math.factorial"
    assert registry.wire_name("math.factorial") == "math_factorial" and registry.version == version
    registry.unregister("math.factorial")
    assert registry.register(make("math_factorial")).name == "math_factorial"


def test_a_prefixed_view_routes_the_shortened_names_it_exports() -> None:
    long_name = "fetch_" + "x" * 56
    registry = ToolRegistry([make(long_name), make("a.b")])
    view = registry.prefixed("github")
    exported = [d["function"]["name"] for d in view.definitions("openai")]
    assert all(PROVIDER_NAME_PATTERN.match(n) for n in exported)
    assert exported[0] != "github_" + long_name  # shortened with a hash
    for wire, original in zip(exported, (long_name, "a.b"), strict=True):
        found = view.get(wire)
        assert found.name == "github_" + original
        assert view.original_name(wire) == "github_" + original
        assert found.validate({"x": 2}) == {"x": 2}
    assert view.find("github_" + long_name) is not None
    assert view.find("gitlab_" + long_name) is None


def test_register_is_safe_under_threads() -> None:
    registry = ToolRegistry()
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(50):
            try:
                registry.register(make(f"t{i}"))  # every thread races for the same 50 names
            except ToolAlreadyExistsError:
                pass
            except BaseException as exc:  # pragma: no cover - would be the bug
                errors.append(exc)
            registry.names()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(registry.names()) == sorted(f"t{i}" for i in range(50))


def test_filtered_view_is_live_and_cheap() -> None:
    registry = ToolRegistry(
        [
            make("read", tags={"tasks"}, read_only=True),
            make("admin_wipe", roles={"admin"}, destructive=True),
            make("other", tags={"misc"}),
        ]
    )
    tasks = registry.filter(tags={"tasks"})
    assert tasks.names() == ["read"]
    assert tasks.find("other") is None and "other" not in tasks
    registry.register(make("write", tags={"tasks"}))
    assert tasks.names() == ["read", "write"]  # live
    assert registry.filter(deny={"other"}, roles={"member"}).names() == ["read", "write"]
    assert registry.filter(allow={"read", "admin_wipe"}, roles={"admin"}).names() == ["read", "admin_wipe"]
    assert registry.filter(predicate=lambda t: t.options.destructive).names() == ["admin_wipe"]
    member = ToolContext(user_id="u", roles=("member",), allowed_tools=frozenset({"read", "admin_wipe"}))
    assert registry.for_context(member).names() == ["read"]
    assert tasks.get("read") is registry.get("read")  # no copies


def test_prefixed_view_namespaces_names() -> None:
    registry = ToolRegistry([make("search"), make("math.sqrt")])
    gh = registry.prefixed("github")
    assert gh.names() == ["github_search", "github_math.sqrt"]
    assert gh.get("github_search").name == "github_search"
    assert gh.get("github_search").handler is registry.get("search").handler
    assert gh.find("search") is None
    assert gh.wire_name("github_math.sqrt") == "github_math_sqrt"
    assert gh.original_name("github_math_sqrt") == "github_math.sqrt"
    registry.register(make("fetch"))
    assert "github_fetch" in gh
    with pytest.raises(ValueError, match="Invalid prefix"):
        registry.prefixed("bad prefix")


def test_describe_for_planner_prompts() -> None:
    @tool
    def search_tasks(query: str, limit: int = 10, status: str | None = None) -> list[str]:
        """Find tasks by words. Use before editing a task whose id you do not know.

        Args:
            query: Words to find.
        """
        return []

    @tool
    def ping() -> str:
        """Check the service."""
        return "pong"

    text = ToolRegistry([search_tasks, ping]).describe()
    assert text == (
        "- search_tasks: Find tasks by words. Use before editing a task whose id you do not know.\n"
        "    query (string, required): Words to find.\n"
        "    limit (integer, optional, default 10)\n"
        "    status (string or null, optional, default None)\n"
        "- ping: Check the service.\n"
        "    (no parameters)"
    )
