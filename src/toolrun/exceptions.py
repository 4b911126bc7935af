"""Exceptions raised by toolrun, split by who must act on them.

```
ToolrunError                      the developer's mistake, raised at definition or configuration time
├── ToolDefinitionError           a tool cannot be built: bad name, empty description, *args, bad options
│   └── ToolExampleError          an example does not match the tool's parameter or output types
├── ToolAlreadyExistsError        a registry already holds a tool of that name (never a silent replace)
├── ToolNotFoundError             a registry lookup by name failed (the executor turns this into NOT_FOUND)
├── SchemaError                   a raw JSON Schema is not valid JSON Schema, or cannot be exported
└── UnknownFormatError            a wire format name toolrun does not know

ArgumentsError (ValueError)       the *model's* mistake: arguments that do not fit the tool's schema.
                                  `Tool.validate` raises it; the executor turns it into a ToolResult with
                                  ErrorCode.INVALID_ARGUMENTS, so the model can read it and try again.

ProviderError                     the *outside world*: an LLM provider failed (`toolrun.models`), mapped
├── ProviderAuthError             from the SDKs' exceptions at one boundary per client, with `from exc`.
├── ProviderRateLimitError        Transient ones (unavailable, rate limited) are retried by one policy
├── ProviderBadRequestError       (`toolrun.models.RetryPolicy`) before they reach you; an agent run that
├── ProviderUnavailableError      meets one ends with status "failed" and the error in words.
└── ProviderResponseError
    └── ProviderStreamError

toolrun.formats.ToolCallParseError (ValueError)
                                  a provider response whose tool calls cannot be read (missing keys, wrong
                                  types); it names the path inside the response.
```

Failures of tools at run time are never exceptions to the caller: the executor returns a
`toolrun.results.ToolResult`. A tool signals a failure the model should see by raising
`toolrun.results.ToolError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ArgumentProblem",
    "ArgumentsError",
    "SchemaError",
    "ToolAlreadyExistsError",
    "ToolDefinitionError",
    "ToolExampleError",
    "ToolNotFoundError",
    "ToolrunError",
    "UnknownFormatError",
]


class ToolrunError(Exception):
    """Base of every error that means the developer must change code or configuration."""


class ToolDefinitionError(ToolrunError):
    """A tool cannot be built as declared. The message names the tool and the fix."""


class ToolExampleError(ToolDefinitionError):
    """A declared example does not validate against the tool's parameters or output type."""


class ToolAlreadyExistsError(ToolrunError):
    """A tool of the same name is already registered.

    Attributes:
        name: The name that is taken.
        suggestions: Free names the developer could use instead.
    """

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        hint = ""
        if self.suggestions:
            hint = " Choose another name, e.g. " + " or ".join(repr(s) for s in self.suggestions)
            hint += ", or unregister the existing tool first."
        super().__init__(f"Tool already exists: {name!r}.{hint}")


class ToolNotFoundError(ToolrunError, KeyError):
    """No tool of that name is registered.

    Attributes:
        name: The name that was looked up.
        suggestions: Registered names closest to it.
    """

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        hint = f" Did you mean {', '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"Unknown tool: {name!r}.{hint}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class SchemaError(ToolrunError):
    """A JSON Schema given to toolrun is invalid, or cannot be expressed in a provider's dialect."""


class UnknownFormatError(ToolrunError, ValueError):
    """A wire format name that toolrun does not know."""


@dataclass(frozen=True, slots=True)
class ArgumentProblem:
    """One thing wrong with a model's arguments.

    Attributes:
        path: Where in the arguments, as a dotted path (`items[2].name`); empty for the whole object.
        message: What is wrong, in words a model can act on.
        expected: What the schema expects there (a type, an enum, a bound), if known.
        given: A short rendering of what was given, if anything was.
    """

    path: str
    message: str
    expected: str | None = None
    given: str | None = None

    def render(self) -> str:
        where = self.path or "(arguments)"
        text = f"{where}: {self.message}"
        if self.expected and self.expected not in self.message:
            text += f" (expected {self.expected})"
        if self.given is not None:
            text += f"; got {self.given}"
        return text


class ArgumentsError(ValueError):
    """Arguments from a model do not fit a tool's parameters.

    Attributes:
        tool: The tool's name.
        problems: Every problem found, each with its field path.
    """

    def __init__(self, tool: str, problems: Sequence[ArgumentProblem]) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        super().__init__(self.render())

    def render(self) -> str:
        """All problems as text for the model: one line each."""
        count = len(self.problems)
        head = f"Invalid arguments for tool {self.tool!r} ({count} problem{'s' if count != 1 else ''}):"
        return "\n".join([head, *(f"- {p.render()}" for p in self.problems)])
