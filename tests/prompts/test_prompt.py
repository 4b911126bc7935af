"""Prompt sections: validation when built, depth-first rendering, tools in declaration order."""

from __future__ import annotations

from typing import Any

import pytest

from toolrun import ToolCall, ToolContext, tool
from toolrun.exceptions import ToolrunError
from toolrun.prompts import Prompt, PromptError, RenderedPrompt, Section


@tool
def add_task(title: str, due: str | None = None) -> dict[str, str]:
    """Add a task."""
    return {"title": title}


@tool
def list_tasks(limit: int = 10) -> list[str]:
    """List tasks."""
    return []


@tool
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    return "sent"


@tool
def search_web(query: str) -> list[str]:
    """Search the web."""
    return []


def tree() -> Prompt:
    return Prompt(
        [
            Section("Role", "You help $user.", "role"),
            Section(
                "Tools",
                "Use tools when needed.",
                "tools",
                tools=[list_tasks],
                children=[
                    Section("Tasks", "Tasks belong to the user.", "tasks", tools=[add_task]),
                    Section(
                        "Mail",
                        "Mail only on request.",
                        "mail",
                        tools=[send_mail],
                        children=[Section("Signatures", "Sign as $user.", "sig")],
                    ),
                ],
            ),
            Section("Web", "Search the web.", "web", tools=[search_web]),
        ],
        variables={"user": "Ada"},
    )


def test_rendering_walks_the_tree_depth_first_with_deeper_headings() -> None:
    rendered = tree().render()
    assert isinstance(rendered, RenderedPrompt)
    assert rendered.sections == ["role", "tools", "tasks", "mail", "sig", "web"]
    assert rendered.instructions == (
        "# Role\n\nYou help Ada.\n\n"
        "# Tools\n\nUse tools when needed.\n\n"
        "## Tasks\n\nTasks belong to the user.\n\n"
        "## Mail\n\nMail only on request.\n\n"
        "### Signatures\n\nSign as Ada.\n\n"
        "# Web\n\nSearch the web."
    )


def test_tools_follow_declaration_order_depth_first() -> None:
    prompt = tree()
    assert [t.name for t in prompt.tools] == ["list_tasks", "add_task", "send_mail", "search_web"]
    assert [t.name for t in prompt.render().tools] == [t.name for t in prompt.tools]


def test_a_disabled_section_drops_its_text_tools_and_children() -> None:
    prompt = Prompt(
        [
            Section("Role", "Hi.", "role"),
            Section(
                "Mail",
                "Mail.",
                "mail",
                tools=[send_mail],
                enabled=False,
                children=[Section("Inner", "x", "inner", tools=[add_task])],
            ),
            Section(
                "Web", "Web.", "web", tools=[search_web], children=[Section("Off", "y", "off", enabled=False)]
            ),
        ]
    )
    rendered = prompt.render()
    assert [t.name for t in rendered.tools] == ["search_web"]
    assert rendered.sections == ["role", "web"]
    assert "Mail" not in rendered.instructions and "Inner" not in rendered.instructions
    assert "Off" not in rendered.instructions


def test_a_duplicate_tool_across_sections_names_both_sections() -> None:
    with pytest.raises(PromptError) as err:
        Prompt(
            [
                Section("Tasks", "t", "tasks", tools=[add_task]),
                Section("More", "m", "more", children=[Section("Again", "a", "again", tools=[add_task])]),
            ]
        )
    message = str(err.value)
    assert "'add_task'" in message and "'tasks'" in message and "'again'" in message
    assert isinstance(err.value, ToolrunError)
    with pytest.raises(PromptError, match="twice in section 'tasks'"):
        Prompt([Section("Tasks", "t", "tasks", tools=[add_task, add_task])])
    # A disabled duplicate is no clash: only one of them reaches the model.
    prompt = Prompt(
        [Section("A", "a", "a", tools=[add_task]), Section("B", "b", "b", tools=[add_task], enabled=False)]
    )
    assert [t.name for t in prompt.tools] == ["add_task"]


def test_duplicate_and_invalid_keys_are_refused() -> None:
    with pytest.raises(PromptError, match="key 'x'"):
        Prompt([Section("A", "a", "x"), Section("B", "b", "y", children=[Section("C", "c", "x")])])
    with pytest.raises(PromptError, match="not valid"):
        Section("A", "a", "has space")
    with pytest.raises(PromptError, match="title"):
        Section(" ", "a", "k")


def test_templates_are_checked_when_built_and_variables_when_rendered() -> None:
    with pytest.raises(PromptError, match=r"invalid '\$' placeholder"):
        Section("Price", "Costs $5.", "price")
    assert Section("Price", "Costs $$5.", "price").render_text(None, {}) == "Costs $5."
    prompt = Prompt([Section("Role", "You help $user in $lang.", "role")], variables={"user": "Ada"})
    with pytest.raises(PromptError, match=r"Section 'role' uses \$lang"):
        prompt.render()
    assert prompt.render(variables={"lang": "French"}).instructions == "# Role\n\nYou help Ada in French."
    assert "Bob" in prompt.render(variables={"user": "Bob", "lang": "en"}).instructions
    with pytest.raises(PromptError, match="template"):
        Section("A", 42, "a")  # type: ignore[arg-type]


def test_a_template_function_gets_the_context() -> None:
    seen: list[Any] = []

    def text(ctx: ToolContext[Any] | None) -> str:
        seen.append(ctx)
        return f"User: {ctx.user_id if ctx else 'nobody'}"

    prompt = Prompt([Section("Who", text, "who")])
    assert prompt.render().instructions == "# Who\n\nUser: nobody"
    ctx: ToolContext[Any] = ToolContext(user_id="u7")
    assert prompt.render(ctx).instructions == "# Who\n\nUser: u7"
    assert seen == [None, ctx]


def test_examples_are_validated_against_their_sections_tools() -> None:
    section = Section(
        "Tasks",
        "Manage tasks.",
        "tasks",
        tools=[add_task, list_tasks],
        examples=[
            ToolCall(name="add_task", arguments={"title": "Buy milk"}),
            {"name": "list_tasks", "arguments": {"limit": 3}, "description": "the three newest"},
        ],
    )
    assert section.render_text(None, {}) == (
        "Manage tasks.\n\nExamples:\n"
        '- add_task({"title": "Buy milk"})\n'
        '- list_tasks({"limit": 3})  # the three newest'
    )
    with pytest.raises(PromptError, match=r"example 0 calls 'send_mail', which is not one of the section's"):
        Section("T", "t", "t", tools=[add_task], examples=[ToolCall(name="send_mail", arguments={})])
    with pytest.raises(PromptError) as err:
        Section(
            "T", "t", "t", tools=[add_task], examples=[ToolCall(name="add_task", arguments={"titel": "x"})]
        )
    assert "example 0 does not fit 'add_task'" in str(err.value) and "title" in str(err.value)
    with pytest.raises(PromptError, match="example 0 must be"):
        Section("T", "t", "t", tools=[add_task], examples=[{"arguments": {}}])


def test_sections_refuse_things_that_are_not_tools_or_sections() -> None:
    with pytest.raises(PromptError, match="Tool objects"):
        Section("T", "t", "t", tools=[lambda: None])  # type: ignore[list-item]
    with pytest.raises(PromptError, match="children must be Sections"):
        Section("T", "t", "t", children=["x"])  # type: ignore[list-item]


def test_lookup_by_key() -> None:
    prompt = tree()
    assert prompt.section("sig").title == "Signatures"
    with pytest.raises(KeyError):
        prompt.section("nope")
