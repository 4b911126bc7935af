"""Descriptions from docstrings: the summary for the tool, one line per parameter.

Google, NumPy and Sphinx styles are read by `docstring_parser`. The style is picked by a cheap look at the
text (parsing with auto-detection tries every style and costs about three times as much), and a docstring
with no parameter section is not parsed at all.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

import docstring_parser

__all__ = ["ParsedDocstring", "parse_docstring"]

_NUMPY_SECTION = re.compile(
    r"^\s*(Parameters|Returns|Yields|Raises|Examples?)\s*\n\s*-{3,}\s*$", re.MULTILINE
)
_GOOGLE_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Examples?)\s*:\s*$", re.M
)


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    description: str
    """The text before the first section: what the tool does and when to use it."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name → description."""
    returns: str | None = None
    """What the tool returns, if documented."""


def _style(text: str) -> docstring_parser.DocstringStyle | None:
    if ":param " in text or ":returns:" in text or ":return:" in text:
        return docstring_parser.DocstringStyle.REST
    if _NUMPY_SECTION.search(text):
        return docstring_parser.DocstringStyle.NUMPYDOC
    if _GOOGLE_SECTION.search(text):
        return docstring_parser.DocstringStyle.GOOGLE
    return None


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split a docstring into the tool description and per-parameter descriptions."""
    if not doc:
        return ParsedDocstring("")
    text = inspect.cleandoc(doc)
    style = _style(text)
    if style is None:
        return ParsedDocstring(text.strip())
    parsed = docstring_parser.parse(text, style=style)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: " ".join(p.description.split()) for p in parsed.params if p.description}
    returns = parsed.returns.description if parsed.returns and parsed.returns.description else None
    return ParsedDocstring("\n\n".join(parts).strip(), params, returns)
