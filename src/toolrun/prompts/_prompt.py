"""Prompt sections that carry tools: `Section`, `Prompt`, `RenderedPrompt`.

```python
prompt = Prompt([
    Section("Role", "You manage $user's tasks.", "role"),
    Section("Tasks", "Use the task tools for anything about tasks.", "tasks", tools=[list_tasks, add_task],
            examples=[ToolCall(name="add_task", arguments={"title": "Buy milk"})]),
    planning_section(),                       # re-renders the current plan on every model request
])
rendered = prompt.render(ctx, variables={"user": "Ada"})
rendered.instructions, rendered.tools     # the text, and the tools in declaration order
agent = Agent(model, prompt=prompt)       # instructions and tools from the prompt
```

Rules: rendering walks the tree depth-first (a section's text, then its children's, headings one level
deeper per level); a section's tools come before its children's, in declaration order; a disabled section
drops its text, its tools and its children; a tool name in two enabled sections is an error naming both;
each example call must name a tool of its own section and fit that tool's parameters; section keys are
unique. These are checked when the `Prompt` is built, never at the first model request.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrun.exceptions import ArgumentsError, ToolrunError
from toolrun.tools import Tool, ToolCall, ToolContext

__all__ = ["Prompt", "PromptError", "RenderedPrompt", "Section", "Template"]

Template = str | Callable[[ToolContext[Any] | None], str]
"""A section's text: a `string.Template` (`$name` filled from the render variables, `$$` for `$`), or a
function of the tool context (None when rendered without one) for text that changes between requests."""

_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class PromptError(ToolrunError):
    """A prompt cannot be built or rendered as declared; the message names the section and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Example:
    call: ToolCall
    description: str | None


class Section:
    """A titled part of the instructions, with the tools that belong to it and sub-sections.

    Args:
        title: The heading.
        template: The text (see `Template`).
        key: A unique id of the section in its prompt (letters, digits, `_`, `.`, `-`).
        tools: The tools this section explains, in the order the model should see them.
        children: Sub-sections, rendered after this section's text with headings one level deeper.
        enabled: A disabled section renders nothing and contributes no tools (nor do its children).
        examples: Example calls shown under the text: `ToolCall`s, or `{"name", "arguments",
            "description"}` mappings. Each must name one of this section's tools and fit its parameters.
    """

    __slots__ = ("children", "enabled", "examples", "key", "template", "title", "tools")

    def __init__(
        self,
        title: str,
        template: Template,
        key: str,
        *,
        tools: Sequence[Tool] = (),
        children: Sequence[Section] = (),
        enabled: bool = True,
        examples: Sequence[ToolCall | Mapping[str, Any]] = (),
    ) -> None:
        if not isinstance(key, str) or not _KEY.match(key):
            raise PromptError(f"Section key {key!r} is not valid: use 1-64 letters, digits, '_', '.' or '-'.")
        if not isinstance(title, str) or not title.strip():
            raise PromptError(f"Section {key!r} needs a non-empty title.")
        if isinstance(template, str):
            tpl = string.Template(template)
            if not tpl.is_valid():
                raise PromptError(
                    f"Section {key!r}: its template has an invalid '$' placeholder; write '$$' for a "
                    "literal dollar sign and '$name' or '${name}' for a variable."
                )
        elif not callable(template):
            raise PromptError(f"Section {key!r}: template must be a string or a function of the context.")
        for t in tools:
            if not isinstance(t, Tool):
                raise PromptError(f"Section {key!r}: tools must be Tool objects, got {type(t).__name__}.")
        for c in children:
            if not isinstance(c, Section):
                raise PromptError(f"Section {key!r}: children must be Sections, got {type(c).__name__}.")
        self.title = title
        self.template = template
        self.key = key
        self.tools: tuple[Tool, ...] = tuple(tools)
        self.children: tuple[Section, ...] = tuple(children)
        self.enabled = bool(enabled)
        self.examples: tuple[_Example, ...] = tuple(self._check_example(i, e) for i, e in enumerate(examples))

    def _check_example(self, index: int, example: ToolCall | Mapping[str, Any]) -> _Example:
        if isinstance(example, ToolCall):
            call, description = example, None
        elif isinstance(example, Mapping) and "name" in example:
            call = ToolCall(name=example["name"], arguments=example.get("arguments"))
            description = example.get("description")
        else:
            raise PromptError(
                f"Section {self.key!r}: example {index} must be a ToolCall or a mapping with 'name' and "
                "'arguments'."
            )
        tool = next((t for t in self.tools if t.name == call.name), None)
        if tool is None:
            names = ", ".join(t.name for t in self.tools) or "none"
            raise PromptError(
                f"Section {self.key!r}: example {index} calls {call.name!r}, which is not one of the "
                f"section's tools ({names})."
            )
        try:
            tool.validate(call.arguments)
        except ArgumentsError as exc:
            raise PromptError(
                f"Section {self.key!r}: example {index} does not fit {tool.name!r}:\n{exc.render()}"
            ) from None
        return _Example(call=call, description=description)

    def walk(self) -> Iterator[tuple[int, Section]]:
        """This section and its enabled descendants, depth-first, with their depth (0 for this one)."""
        if not self.enabled:
            return
        stack: list[tuple[int, Section]] = [(0, self)]
        while stack:
            depth, section = stack.pop()
            yield depth, section
            stack.extend((depth + 1, c) for c in reversed(section.children) if c.enabled)

    def render_text(self, context: ToolContext[Any] | None, variables: Mapping[str, Any]) -> str:
        """This section's own text (without heading or children)."""
        if isinstance(self.template, str):
            try:
                text = string.Template(self.template).substitute(variables)
            except KeyError as exc:
                raise PromptError(
                    f"Section {self.key!r} uses ${exc.args[0]}, but no variable of that name was given "
                    f"(given: {sorted(variables) or 'none'})."
                ) from None
        else:
            text = self.template(context)
        if self.examples:
            lines = ["Examples:"]
            for ex in self.examples:
                raw = ex.call.arguments
                args = raw if isinstance(raw, str) else json.dumps(dict(raw or {}), ensure_ascii=False)
                note = f"  # {ex.description}" if ex.description else ""
                lines.append(f"- {ex.call.name}({args}){note}")
            text = f"{text.rstrip()}\n\n" + "\n".join(lines) if text.strip() else "\n".join(lines)
        return text.strip()

    def __repr__(self) -> str:
        return f"<Section {self.key!r} {len(self.tools)} tools, {len(self.children)} children>"


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedPrompt:
    """A prompt rendered for one request: the instructions text and the tools, in declaration order."""

    instructions: str
    """The system prompt."""
    tools: list[Tool] = field(default_factory=list)
    """The enabled sections' tools, depth-first in declaration order."""
    sections: list[str] = field(default_factory=list)
    """The keys of the sections rendered, in order."""


class Prompt:
    """Sections rendered into one set of instructions plus the tools they carry.

    Args:
        sections: The top-level sections, in order.
        variables: Default values for `$name` placeholders (overridden by `render(variables=...)`).

    Raises:
        PromptError: duplicate section keys, or a tool name in two enabled sections (both are named).
    """

    def __init__(self, sections: Sequence[Section], *, variables: Mapping[str, Any] | None = None) -> None:
        self.sections: tuple[Section, ...] = tuple(sections)
        self.variables: dict[str, Any] = dict(variables or {})
        keys: dict[str, Section] = {}
        owners: dict[str, Section] = {}
        tools: list[Tool] = []
        for section in self._all_sections():
            if section.key in keys:
                raise PromptError(f"Two sections have the key {section.key!r}; keys must be unique.")
            keys[section.key] = section
        for _, section in self._walk():
            for t in section.tools:
                first = owners.get(t.name)
                if first is not None:
                    where = (
                        f"twice in section {first.key!r}"
                        if first is section
                        else f"in section {first.key!r} ({first.title}) and in section {section.key!r} "
                        f"({section.title})"
                    )
                    raise PromptError(
                        f"Tool {t.name!r} appears {where}. A tool belongs to one section: keep it in one, "
                        "or disable the other section."
                    )
                owners[t.name] = section
                tools.append(t)
        self._tools = tools

    def _all_sections(self) -> Iterator[Section]:
        stack = list(reversed(self.sections))
        while stack:
            section = stack.pop()
            yield section
            stack.extend(reversed(section.children))

    def _walk(self) -> Iterator[tuple[int, Section]]:
        for top in self.sections:
            yield from top.walk()

    @property
    def tools(self) -> list[Tool]:
        """The tools of the enabled sections, depth-first in declaration order."""
        return list(self._tools)

    def section(self, key: str) -> Section:
        """The section with this key (`KeyError` if none)."""
        for s in self._all_sections():
            if s.key == key:
                return s
        raise KeyError(key)

    def render(
        self, context: ToolContext[Any] | None = None, *, variables: Mapping[str, Any] | None = None
    ) -> RenderedPrompt:
        """The instructions and tools for one request.

        Args:
            context: Passed to sections whose template is a function (e.g. to read session state).
            variables: Values for `$name` placeholders, over the prompt's defaults.
        """
        values = {**self.variables, **(variables or {})}
        blocks: list[str] = []
        keys: list[str] = []
        for depth, section in self._walk():
            text = section.render_text(context, values)
            heading = "#" * min(depth + 1, 6) + " " + section.title
            blocks.append(f"{heading}\n\n{text}" if text else heading)
            keys.append(section.key)
        return RenderedPrompt(instructions="\n\n".join(blocks), tools=list(self._tools), sections=keys)

    def __repr__(self) -> str:
        return f"<Prompt {[s.key for s in self.sections]} {len(self._tools)} tools>"
