"""Tool search: rank tools by how well their name, description and parameters match a query.

```python
registry.search("what's the weather in Paris tomorrow", k=5)   # [Tool, ...], best first
index = ToolIndex(tools)                                        # the index behind it, for any tools
index.search("convert 100 euro to dollars", k=3)                # [SearchHit(tool, score), ...]
```

The ranking is SQLite's FTS5 full-text engine (in the standard library: no extra dependency), with BM25
over three weighted fields — the name, the description, and the parameters' names, descriptions and enum
values — and the Porter stemmer. Names are split into words first (`math_toolkit.sumOfMultiples` →
"math toolkit sum of multiples"), since providers' names glue words together that a query writes apart.
Queries are turned into an OR of their words without common English stop words and bare numbers, so a
question in plain language matches without any query syntax (and without any way to inject one).

`sqlite3` is imported when the first index is built, not by `import toolrun`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3

    from toolrun.tools import Tool

__all__ = ["SearchHit", "ToolIndex", "query_terms", "split_name"]

NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
PARAMETERS_WEIGHT = 0.5
MAX_TERMS = 32
"""A query's words beyond this many are ignored (a pasted page must not cost a full scan per word)."""
_MAX_SCHEMA_DEPTH = 4

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[._\-/:]+")
_WORD = re.compile(r"[^\W_]+")
_STOP_WORDS_TEXT = (
    "a about also an and any are as at be been but by can could did do does for from get had has have how "
    "i if in into is it its me my of on or our please should so some than that the their them then there "
    "these they this those to us was we were what when where which who will with would you your"
)
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def split_name(name: str) -> str:
    """A tool name as words: `get_weatherForecast.v2` → `get weather Forecast v2`."""
    return _SEPARATORS.sub(" ", _CAMEL.sub(" ", name)).strip()


def query_terms(query: str) -> list[str]:
    """The words a query is searched by: lower-cased, names split; stop words, bare numbers (values, not
    what a tool does) and repeats dropped."""
    words = (w.lower() for w in _WORD.findall(split_name(query)))
    return list(dict.fromkeys(w for w in words if w not in _STOP_WORDS and not w.isdigit()))[:MAX_TERMS]


def _parameters_text(schema: Any, depth: int = 0) -> Iterable[str]:
    """Parameter names, descriptions and enum values of a JSON Schema, nested ones included (bounded)."""
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            yield split_name(str(name))
            yield from _field_text(sub, depth)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _field_text(items, depth)


def _field_text(sub: Any, depth: int) -> Iterable[str]:
    if not isinstance(sub, Mapping):
        return
    if isinstance(sub.get("description"), str):
        yield sub["description"]
    if isinstance(sub.get("enum"), list):
        yield " ".join(str(v) for v in sub["enum"])
    for key in ("anyOf", "oneOf"):
        for alt in sub.get(key) or ():
            yield from _field_text(alt, depth + 1)
    yield from _parameters_text(sub, depth + 1)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A tool that matched a query, with its score (higher is better; only comparable within a query)."""

    tool: Tool
    score: float


class ToolIndex:
    """A full-text index over tools (see the module docstring). Thread-safe; build a new one to change it.

    Args:
        tools: The tools to index. Names need not be unique (each tool is its own document).
    """

    def __init__(self, tools: Iterable[Tool]) -> None:
        import sqlite3

        self.tools: list[Tool] = list(tools)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE tools USING fts5(name, description, parameters, "
            "tokenize = 'porter unicode61')"
        )
        self._db.executemany(
            "INSERT INTO tools (rowid, name, description, parameters) VALUES (?, ?, ?, ?)",
            (
                (i, split_name(t.name), t.description, " ".join(_parameters_text(t.parameters)))
                for i, t in enumerate(self.tools)
            ),
        )
        self._sql = (
            "SELECT rowid, -bm25(tools, ?, ?, ?) FROM tools WHERE tools MATCH ? "
            "ORDER BY bm25(tools, ?, ?, ?) LIMIT ?"
        )

    def __len__(self) -> int:
        return len(self.tools)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The `k` best matches for `query`, best first (fewer when fewer tools share a word with it)."""
        if k < 1:
            raise ValueError("k must be at least 1.")
        terms = query_terms(query)
        if not terms or not self.tools:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)  # words are [^\W_]+: nothing to escape
        weights = (NAME_WEIGHT, DESCRIPTION_WEIGHT, PARAMETERS_WEIGHT)
        with self._lock:
            rows = self._db.execute(self._sql, (*weights, match, *weights, k)).fetchall()
        return [SearchHit(self.tools[rowid], float(score)) for rowid, score in rows]

    def close(self) -> None:
        """Release the index's memory (searching afterwards fails)."""
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"<ToolIndex {len(self.tools)} tools>"
