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
MAX_SENTENCES = 8
"""A query's sentences beyond this many are searched only as part of the whole."""
MAX_TERMS = 32
"""A query's words beyond this many are ignored (a pasted page must not cost a full scan per word)."""
_MAX_SCHEMA_DEPTH = 4

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[._\-/:]+")
_WORD = re.compile(r"[^\W_]+")
_SENTENCES = re.compile(r"(?<=[.?!;])\s+")
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
        tools: The tools to index. Names need not be unique: each tool is its own document, and a search
            returns the best-matching one of each name.
    """

    def __init__(self, tools: Iterable[Tool]) -> None:
        import sqlite3

        self.tools: list[Tool] = list(tools)
        self._unique = len({t.name for t in self.tools}) == len(self.tools)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            self._db.execute(
                "CREATE VIRTUAL TABLE tools USING fts5(name, description, parameters, "
                "tokenize = 'porter unicode61')"
            )
        except sqlite3.OperationalError as exc:  # a Python built against an SQLite without FTS5
            raise RuntimeError(
                f"Tool search needs SQLite's FTS5 extension, which this Python's sqlite3 lacks ({exc}). "
                "Use a Python whose SQLite has FTS5 (python.org, Debian and Homebrew builds do)."
            ) from exc
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
        """The `k` best-matching tools for `query`, best first, one hit per name (fewer when fewer tools
        share a word with it).

        A query of several sentences asks for several things ("Convert 100 EUR to USD. Then book a
        table."): each sentence is searched too, and the lists are interleaved, the whole query's first,
        so that every request gets its best tools near the top instead of the longest one taking them all.
        """
        if k < 1:
            raise ValueError("k must be at least 1.")
        whole = self._search(query, k)
        sentences = [s for s in _SENTENCES.split(query) if len(query_terms(s)) >= 2][:MAX_SENTENCES]
        if len(sentences) < 2:
            return whole
        return _interleave([whole, *(self._search(s, k) for s in sentences)], k)

    def _search(self, query: str, k: int) -> list[SearchHit]:
        terms = query_terms(query)
        if not terms or not self.tools:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)  # words are [^\W_]+: nothing to escape
        weights = (NAME_WEIGHT, DESCRIPTION_WEIGHT, PARAMETERS_WEIGHT)
        limit = k if self._unique else 4 * k + 8  # room for repeated names, dropped below
        with self._lock:
            rows = self._db.execute(self._sql, (*weights, match, *weights, limit)).fetchall()
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for rowid, score in rows:
            tool = self.tools[rowid]
            if tool.name not in seen:
                seen.add(tool.name)
                hits.append(SearchHit(tool, float(score)))
                if len(hits) == k:
                    break
        return hits

    def close(self) -> None:
        """Release the index's memory (searching afterwards fails)."""
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"<ToolIndex {len(self.tools)} tools>"


def _interleave(lists: list[list[SearchHit]], k: int) -> list[SearchHit]:
    """Round-robin over ranked lists (first of each, then second of each, ...), one hit per name."""
    out: list[SearchHit] = []
    seen: set[str] = set()
    for rank in range(k):
        for hits in lists:
            if rank < len(hits) and hits[rank].tool.name not in seen:
                seen.add(hits[rank].tool.name)
                out.append(hits[rank])
                if len(out) == k:
                    return out
    return out
