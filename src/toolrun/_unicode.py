"""One rule for text that enters toolrun at any door: it must be valid Unicode without NUL.

A Python `str` can hold what no UTF-8 encoder takes: a lone surrogate (a JSON `"\\ud800"` escape without
its pair, or a file name `os.listdir` read with `surrogateescape`). Stored as an escape it reads back
as the same lone surrogate, and every answer that holds it fails to encode: a 500 for good, a
conversation no provider takes. NUL cannot be stored in a PostgreSQL text column. So such text never
gets past a door, and what happens to it there depends on who sent it:

- **from a model or a tool** (nobody can be asked to fix it): cleaned — `clean_text` / `clean_json`
  join surrogate pairs and make lone surrogates and NUL U+FFFD (the model boundary, tool results and
  progress, job records);
- **from a client** (a person's message, edited arguments, an approval rule): refused with a clear error
  that says where — `text_problem` / `json_problem` — and nothing is stored or run.

Both sides test the same thing: `json_problem(v) is None` exactly when `clean_json(v) == v`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["clean_json", "clean_text", "json_problem", "text_problem"]


def clean_text(text: str) -> str:
    """`text` as valid Unicode without NUL: surrogate pairs joined, lone surrogates and NUL → U+FFFD.

    Costs one `isascii()` for ASCII text and one `encode` otherwise.
    """
    if text.isascii():
        return text.replace("\x00", "\ufffd") if "\x00" in text else text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 round trip: a high+low pair becomes its character, a lone half becomes U+FFFD.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def clean_json(value: Any) -> Any:
    """Plain JSON data with `clean_text` applied to every string, keys included (other values as they are;
    mappings become dicts, tuples lists)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def text_problem(text: str) -> str | None:
    """Why `text` cannot be taken from a client (a NUL, else a lone surrogate: its position), or None."""
    if "\x00" in text:
        return "holds a NUL character (U+0000); remove it"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"is not valid Unicode: a lone surrogate at character {exc.start} "
            "(a \\uD800-\\uDFFF escape without its pair)"
        )
    return None


def json_problem(value: Any, path: str = "") -> str | None:
    """Why JSON data from a client cannot be taken: the first string (key or value) with a `text_problem`,
    as `"<path> <problem>"` (path in dots, list items by index), or None. Walks without recursion, so
    nesting cannot overflow the stack."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return f"{where or 'the value'} {problem}"
        elif isinstance(item, Mapping):
            children: list[tuple[str, Any]] = []
            for key, child in item.items():
                name = str(key)
                problem = text_problem(name)
                if problem is not None:
                    return f"a key{' in ' + where if where else ''} {problem}"
                children.append((f"{where}.{name}" if where else name, child))
            stack.extend(reversed(children))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(f"{where}.{i}" if where else str(i), c) for i, c in enumerate(item)]))
    return None
