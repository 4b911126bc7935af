"""Tool search: rank tools by how well their name, description and parameters match a query.

```python
registry.search("what's the weather in Paris tomorrow", k=5)   # [Tool, ...], best first
index = ToolIndex(tools)                                        # the index behind it, for any tools
index.search("convert 100 euro to dollars", k=3)                # [SearchHit(tool, score), ...]
```

Each tool is a document of three fields (name split into words, description, parameters) ranked by BM25
with per-field weights and English stemming; a query is the bag of its words, so plain language matches
without any query syntax (and without any way to inject one). Two engines: `"bm25s"` (the `search` extra,
with pseudo-relevance feedback and a small lexicon of currencies, units and derived forms) and `"fts5"`
(SQLite, no extra dependency, no feedback); `ToolIndex` takes bm25s when it is installed. `embed=` re-ranks
the best BM25 documents by meaning with any text-embedding function. Neither engine is imported by
`import toolrun`. How each engine scores, and the measurements: docs/planning.md, "Tool search".
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    import numpy.typing as npt

    from toolrun.tools import Tool

__all__ = ["Embed", "Engine", "SearchHit", "ToolIndex", "query_terms", "split_name"]

Engine = Literal["auto", "bm25s", "fts5"]
Embed = Callable[[Sequence[str]], Any]
"""A text-embedding function: a list of texts in, an array-like of one vector per text out (n × dim)."""

NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
PARAMETERS_WEIGHT = 0.5
"""FTS5's column weights."""
MAX_SENTENCES = 16
"""A query's sentences beyond this many are searched only as part of the whole."""
MAX_TERMS = 32
"""A sentence's words beyond this many are ignored (a pasted page must not cost a full scan per word)."""
WEAK_SENTENCE = 0.3
"""A sentence whose best tool scores below this share of the best sentence's best tool gets no place of its
own in the results ("Can you help me with a few things?" asks for no tool)."""
RERANK_POOL = 20
"""With `embed`: how many of each ranking's best BM25 documents are re-ranked by meaning."""
EMBED_WEIGHT = 1.0
"""With `embed`: the weight of the cosine similarity beside the BM25 score (as a share of the pool's best)."""
FEEDBACK_DOCS = 10
"""bm25s, pseudo-relevance feedback (RM3): how many of a ranking's best documents its expansion words come
from (0: no feedback)."""
FEEDBACK_TERMS = 5
"""bm25s, pseudo-relevance feedback: how many expansion words a ranking's query gets."""
FEEDBACK_WEIGHT = 0.05
"""bm25s, pseudo-relevance feedback: the expansion words' total weight, as a share of the query's own (each
of a query's stems weighs 1; together the expansion words weigh this × the number of stems)."""
_SYNONYM_CLASSES = (
    (
        "dollar euro yen pound rupee yuan renminbi franc peso ruble rouble krona usd eur gbp jpy inr cny cad "
        "aud chf",
        "currency",
    ),
    (
        "kilometer kilometre km mile meter metre centimeter millimeter inch foot feet yard gallon liter "
        "litre ounce pint quart cup tablespoon teaspoon kilogram kg gram celsius fahrenheit kelvin pound lb "
        "lbs oz mi ft cm mm ml kmh mph ton tonne stone acre hectare",
        "unit",
    ),
    ("wind humidity rain snow precipitation", "weather"),
    ("painting sculpture installation", "art artwork"),
    ("monument landmark sightseeing", "attraction tourist"),
    ("playground picnic", "park facility"),
    ("cost costs", "price pricing"),
    ("odds chance", "probability"),
)


def _lexicon(classes: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Each word of a class -> the general words of every class it is in ("pound": currency and unit)."""
    out: dict[str, tuple[str, ...]] = {}
    for words, extra in classes:
        for word in words.split():
            out[word] = tuple(dict.fromkeys((*out.get(word, ()), *extra.split())))
    return out


SYNONYMS: Mapping[str, tuple[str, ...]] = _lexicon(_SYNONYM_CLASSES)
"""bm25s: a small lexicon of general vocabulary a question uses where tool docs use a more general word (a
currency's name for "currency", a unit's for "unit"). A query word found here also searches its words,
each weighing `SYNONYM_WEIGHT` (a query's own stems weigh 1)."""
SYNONYM_WEIGHT = 0.5
SYNONYM_CAP = 1.0
"""bm25s: a lexicon word searched on behalf of several query words ("5000 yen into dollars": "currency" twice)
weighs `SYNONYM_WEIGHT` for each of them, up to this (a query word's own weight)."""
VALUE_WEIGHT = 0.5
"""bm25s: the weight of a currency or a unit written after a number ("100 euro", "15 km"): a value the tool
is given, like the number itself, more than what the tool does; its general word ("currency", "unit")
carries the request. A query's other words weigh 1."""
DERIVED_WEIGHT = 0.7
"""bm25s: the weight of a derived form of a query word that its stem does not reach ("conversion" for
"convert", "solution" for "solve", `_DERIVATIONS`)."""
_DERIVATIONS = (
    ("version", "vert"),
    ("duction", "duce"),
    ("scription", "scribe"),
    ("ception", "ceive"),
    ("sition", "se"),
    ("lysis", "lyze"),
    ("lysis", "lyse"),
    ("ution", "ve"),
    ("ication", "y"),
    ("ic", "y"),
    ("ment", ""),
)
"""Suffix pairs of English derivation that the Snowball stemmer leaves apart (it stems "conversion" to
"convers", "convert" to "convert"): a query word ending in one also searches the word ending in the other,
both ways (one way for an empty suffix: "payment" → "pay")."""
_VALUE_CLASSES = frozenset({"currency", "unit"})
_MAX_SCHEMA_DEPTH = 4

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[._\-/:]+")
_WORD = re.compile(r"[^\W_]+")
_SENTENCES = re.compile(r"(?<=[.?!;])\s+|,?\s+and then\s+|,\s+then\s+")
"""Where a question's requests part: between sentences, and at "and then" / ", then" inside one ("find a
Thai restaurant in New York, and then an Italian one in Boston")."""
_HELP = re.compile(r"\bhelp\b", re.IGNORECASE)
_STOP_WORDS_TEXT = (
    "a about also an and any are as at be been but by can could did do does for from get had has have how "
    "i if in into is it its me my of on or our please should so some than that the their them then there "
    "these they this those to us was we were what when where which who will with would you your"
)
_STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def split_name(name: str) -> str:
    """A tool name as words: `get_weatherForecast.v2` → `get weather Forecast v2`."""
    return _SEPARATORS.sub(" ", _CAMEL.sub(" ", name)).strip()


def _words(text: str) -> list[str]:
    """Lower-cased words of `text`, names split, without stop words and bare numbers."""
    words = (w.lower() for w in _WORD.findall(split_name(text)))
    return [w for w in words if w not in _STOP_WORDS and not w.isdigit()]


def _kinds(word: str) -> frozenset[str]:
    """The value classes of a lower-cased word ("currency", "unit"), singular or plural."""
    for singular in (word, word[:-1] if word.endswith("s") else "", word[:-2] if word.endswith("es") else ""):
        if singular in SYNONYMS:
            return _VALUE_CLASSES.intersection(SYNONYMS[singular])
    return frozenset()


_LINKS = frozenset({"in", "into", "to", "as"})
_VALUE_WORDS = frozenset(
    form for word in SYNONYMS if _kinds(word) for form in (word, word + "s", word + "es")
)
"""The currencies and units of the lexicon, singular and plural (a quick test before `_kinds`)."""


def _analyse(text: str) -> tuple[list[str], frozenset[str]]:
    """A sentence's search terms and its values, from one pass over its words.

    Terms: `query_terms`, and the words of a conversion the sentence asks without them: "100 euro in USD",
    "26 miles to km" ask to convert a value into another of its kind, so "convert" and the kind both words
    share ("pounds to yen": "currency", "pounds in kg": "unit") are searched too. Values: the currencies and
    units written after a number ("100 euro", "5000 Japanese yen"), lower case.
    """
    words = [w.lower() for w in _WORD.findall(split_name(text))]
    terms = list(dict.fromkeys(w for w in words if w not in _STOP_WORDS and not w.isdigit()))[:MAX_TERMS]
    values: set[str] = set()
    conversion: list[str] = []
    for i in [i for i, word in enumerate(words) if word in _VALUE_WORDS]:  # most texts have none
        word = words[i]
        if (i > 0 and words[i - 1].isdigit()) or (i > 1 and words[i - 2].isdigit()):
            values.add(word)
        if not conversion and words[i + 1 : i + 2] and words[i + 1] in _LINKS:
            for second in words[i + 2 : i + 4]:
                kinds = _kinds(word) & _kinds(second)
                if kinds and second != word:
                    conversion = [w for w in ("convert", *sorted(kinds)) if w not in terms]
                    break
    if conversion:
        terms = [*terms[: MAX_TERMS - len(conversion)], *conversion]
    return terms, frozenset(values)


def _derivation_table() -> dict[str, tuple[str, ...]]:
    """Every suffix of `_DERIVATIONS` -> what it is replaced by (both ways but for an empty suffix)."""
    table: dict[str, tuple[str, ...]] = {}
    for long, short in _DERIVATIONS:
        table[long] = (*table.get(long, ()), short)
        if short:
            table[short] = (*table.get(short, ()), long)
    return table


_DERIVATION_TABLE = _derivation_table()
_SUFFIX_LENGTHS = sorted({len(suffix) for suffix in _DERIVATION_TABLE}, reverse=True)


def _derived(word: str) -> list[str]:
    """Derived forms of `word` by `_DERIVATIONS`, its longest matching suffix (with at least three letters
    before it) replaced; most are words of no tool, harmless. A few dictionary lookups per word: this runs
    for every word of every query."""
    for length in _SUFFIX_LENGTHS:
        if len(word) > length + 2:
            others = _DERIVATION_TABLE.get(word[len(word) - length :])
            if others is not None:
                stem = word[: len(word) - length]
                return [stem + other for other in others]
    return []


def query_terms(query: str) -> list[str]:
    """The words a query is searched by: lower-cased, names split; stop words, bare numbers (values, not
    what a tool does) and repeats dropped."""
    return list(dict.fromkeys(_words(query)))[:MAX_TERMS]


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


def _fields(tool: Tool) -> tuple[str, str, str]:
    return split_name(tool.name), tool.description, " ".join(_parameters_text(tool.parameters))


_WEIGHTS = (NAME_WEIGHT, DESCRIPTION_WEIGHT, PARAMETERS_WEIGHT)
_REPEATS = (4, 2, 1)
"""bm25s: how many times the name's, the description's and the parameters' words are indexed."""
_K1, _B = 3.0, 0.9
"""bm25s's BM25 parameters. These, `_REPEATS`, `WEAK_SENTENCE`, `MAX_SENTENCES` and the `FEEDBACK_*`
parameters were chosen on one half of the BFCL questions and checked on the other (bench/search.py)."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A tool that matched a query, with its score (higher is better; only comparable within a query)."""

    tool: Tool
    score: float


class _Ranker(Protocol):
    def rank(
        self, queries: Sequence[list[str]], limit: int, values: Sequence[frozenset[str]] = ()
    ) -> list[list[tuple[int, float]]]:
        """For each query (its terms), up to `limit` (tool position, score) pairs, best first, score > 0.
        `values`: per query, its terms written as values after a number (`_analyse`); an engine may weigh
        them less."""
        ...

    def close(self) -> None: ...


class _Fts5:
    """SQLite FTS5: one `MATCH` of the terms OR-ed per query, ordered by `bm25()` with column weights."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        import sqlite3

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
                "Install the search extra (pip install 'toolrun[search]'), or use a Python whose SQLite "
                "has FTS5 (python.org, Debian and Homebrew builds do)."
            ) from exc
        self._db.executemany(
            "INSERT INTO tools (rowid, name, description, parameters) VALUES (?, ?, ?, ?)",
            ((i, *_fields(t)) for i, t in enumerate(tools)),
        )
        self._sql = (
            "SELECT rowid, -bm25(tools, ?, ?, ?) FROM tools WHERE tools MATCH ? "
            "ORDER BY bm25(tools, ?, ?, ?) LIMIT ?"
        )

    def rank(
        self, queries: Sequence[list[str]], limit: int, values: Sequence[frozenset[str]] = ()
    ) -> list[list[tuple[int, float]]]:
        out = []
        with self._lock:
            for terms in queries:
                match = " OR ".join(f'"{t}"' for t in terms)  # words are [^\W_]+: nothing to escape
                rows = self._db.execute(self._sql, (*_WEIGHTS, match, *_WEIGHTS, limit)).fetchall()
                out.append([(int(i), float(s)) for i, s in rows])
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Bm25s:
    """bm25s: its index holds each stem's BM25 score in every tool (a sparse row per stem); a query's scores
    are the sum of its stems' rows, as bm25s retrieves, here for every query of a question at once. Then
    pseudo-relevance feedback (`_feedback`) adds the scores of a few expansion stems per query."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        import bm25s
        import numpy as np
        import Stemmer

        self._np = np
        self._stemmer = Stemmer.Stemmer("english")
        self._lock = threading.Lock()  # a PyStemmer stemmer is not thread-safe
        self._synonyms: dict[str, list[str]] = {}
        for word, extra in SYNONYMS.items():
            stem = self._stemmer.stemWord(word)
            self._synonyms.setdefault(stem, [])
            self._synonyms[stem] += [s for s in self._stemmer.stemWords(list(extra)) if s != stem]
        self._n = len(tools)
        corpus = [
            [
                stem
                for text, times in zip(_fields(t), _REPEATS, strict=True)
                for stem in self._stemmer.stemWords(_words(text)) * times
            ]
            for t in tools
        ]
        retriever = bm25s.BM25(k1=_K1, b=_B)
        retriever.index(corpus, show_progress=False)
        data, indices, indptr = (retriever.scores[key] for key in ("data", "indices", "indptr"))
        # Stem i's row (the tools holding it and its BM25 score in each) is _tools[_row[i]:_row[i + 1]] and
        # _scores[...] (bm25s's own arrays: its placeholder for an empty vocabulary, no stem, is left out).
        columns = {str(stem): int(column) for stem, column in retriever.vocab_dict.items() if stem}
        self._ids = {stem: i for i, stem in enumerate(columns)}
        self._row = np.array([0, *np.cumsum([indptr[c + 1] - indptr[c] for c in columns.values()])], np.int64)
        picked = [np.arange(indptr[c], indptr[c + 1]) for c in columns.values()]
        flat = np.concatenate(picked) if picked else np.zeros(0, np.int64)
        self._tools = np.asarray(indices, dtype=np.int64)[flat]
        self._scores = np.asarray(data, dtype=np.float64)[flat]
        # For feedback, each tool's stems and their shares of its indexed words, the same way round: tool
        # j's are _terms[_words[j]:_words[j + 1]] and _shares[...].
        terms: list[int] = []
        shares: list[float] = []
        bounds = [0]
        for words in corpus:
            counts: dict[int, int] = {}
            for stem in words:
                if stem in self._ids:
                    counts[self._ids[stem]] = counts.get(self._ids[stem], 0) + 1
            terms += counts
            shares += [c / len(words) for c in counts.values()]
            bounds.append(len(terms))
        self._terms = np.array(terms, dtype=np.int64)
        self._shares = np.array(shares, dtype=np.float64)
        self._words = np.array(bounds, dtype=np.int64)
        # The stems of the derived forms of the tools' own words, worked out once: most words of a query
        # are words of some tool, so a query rarely derives a word itself.
        known = sorted({w for t in tools for text in _fields(t) for w in _words(text)})
        self._forms = self._derive(known)

    def _derive(self, words: Sequence[str]) -> dict[str, list[str]]:
        """Each word -> the stems of its derived forms (`_derived`) that some tool has."""
        forms = [_derived(word) for word in words]
        with self._lock:
            stems = iter(self._stemmer.stemWords([form for found in forms for form in found]))
        derived = [[next(stems) for _ in found] for found in forms]
        return {w: [s for s in d if s in self._ids] for w, d in zip(words, derived, strict=True)}

    def rank(
        self, queries: Sequence[list[str]], limit: int, values: Sequence[frozenset[str]] = ()
    ) -> list[list[tuple[int, float]]]:
        np = self._np
        values = list(values) or [frozenset()] * len(queries)
        with self._lock:
            stemmed = [self._stemmer.stemWords(terms) for terms in queries]
        known = self._forms
        new = {w for terms in queries for w in terms if w not in known}
        unknown = self._derive(sorted(new)) if new else {}
        derived = [[s for w in terms for s in (known[w] if w in known else unknown[w])] for terms in queries]
        ids: list[list[int]] = []
        weights: list[list[float]] = []
        for terms, stems_, variants, given in zip(queries, stemmed, derived, values, strict=True):
            weighed = self._weigh(terms, stems_, variants, given)
            found = [stem for stem in weighed if stem in self._ids]
            ids.append([self._ids[stem] for stem in found])
            weights.append([weighed[stem] for stem in found])
        if not any(ids):
            return [[] for _ in queries]
        stemmed_sets = [set(stems) for stems in stemmed]
        owners = np.repeat(np.arange(len(queries)), [len(row) for row in ids])
        terms = np.fromiter((i for row in ids for i in row), np.int64, len(owners))
        weight = np.fromiter((w for row in weights for w in row), np.float64, len(owners))
        matrix = self._sum(owners, terms, weight, len(queries))
        if FEEDBACK_DOCS > 0 and FEEDBACK_TERMS > 0 and FEEDBACK_WEIGHT > 0:
            matrix += self._feedback(matrix, owners, terms, [len(stems) for stems in stemmed_sets])
        limit = min(limit, self._n)
        if limit < self._n:
            top = np.argpartition(-matrix, limit - 1, axis=1)[:, :limit]
        else:
            top = np.broadcast_to(np.arange(self._n), (len(queries), self._n))
        scores = np.take_along_axis(matrix, top, axis=1)
        order = np.argsort(-scores, axis=1, kind="stable")
        positions = np.take_along_axis(top, order, axis=1).tolist()
        ranked = np.take_along_axis(scores, order, axis=1).tolist()
        return [
            [(i, score) for i, score in zip(row_positions, row_scores, strict=True) if score > 0]
            for row_positions, row_scores in zip(positions, ranked, strict=True)
        ]

    def _weigh(
        self, terms: list[str], stems: list[str], variants: list[str], values: frozenset[str]
    ) -> dict[str, float]:
        """A query's stems and their weights: its own (1, or `VALUE_WEIGHT` for a value after a number),
        then the lexicon's general words (`SYNONYM_WEIGHT` per query word that asks for one, up to
        `SYNONYM_CAP`) and the stems of derived forms (`variants`, at `DERIVED_WEIGHT`) that are not its
        own."""
        own: dict[str, float] = {}
        for word, stem in zip(terms, stems, strict=True):
            own[stem] = max(own.get(stem, 0.0), VALUE_WEIGHT if word in values else 1.0)
        extra: dict[str, float] = {}
        if SYNONYM_WEIGHT > 0:
            for stem in stems:
                for general in self._synonyms.get(stem, ()):
                    extra[general] = min(SYNONYM_CAP, extra.get(general, 0.0) + SYNONYM_WEIGHT)
        if DERIVED_WEIGHT > 0:
            for variant in variants:
                extra[variant] = max(extra.get(variant, 0.0), DERIVED_WEIGHT)
        own.update((stem, weight) for stem, weight in extra.items() if stem not in own)
        return own

    def _sum(
        self,
        owners: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        queries: int,
    ) -> npt.NDArray[np.float64]:
        """The queries × tools score matrix: query `owners[i]` gets stem `terms[i]`'s row × `weights[i]`."""
        np = self._np
        rows, sizes = _ranges(np, self._row, terms)
        at = np.repeat(owners * self._n, sizes) + self._tools[rows]
        values = self._scores[rows] * np.repeat(weights, sizes)
        return np.bincount(at, values, queries * self._n).reshape(queries, self._n)  # type: ignore[no-any-return]

    def _feedback(
        self,
        matrix: npt.NDArray[np.float64],
        owners: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        lengths: list[int],
    ) -> npt.NDArray[np.float64]:
        """RM3 pseudo-relevance feedback: each query's scores for `FEEDBACK_TERMS` expansion stems, in the
        tools that already match it (a tool that shares no word with the query stays out).

        A query's first `FEEDBACK_DOCS` tools (by `matrix`, its BM25 scores; `owners` and `terms` are its
        stems) stand for what it asks: a stem weighs the sum over them of its share of the tool's indexed
        words times the tool's share of their scores (the relevance model). The heaviest stems that are not
        the query's own are searched too, their weights scaled to `FEEDBACK_WEIGHT` × the query's number of
        stems (`lengths`) in all.
        """
        np = self._np
        queries, vocabulary = len(lengths), len(self._ids)
        depth = min(FEEDBACK_DOCS, self._n)
        if depth < self._n:
            top = np.argpartition(-matrix, depth - 1, axis=1)[:, :depth]
        else:
            top = np.broadcast_to(np.arange(self._n), (queries, self._n))
        scores = np.take_along_axis(matrix, top, axis=1)
        totals = scores.sum(axis=1, keepdims=True)
        shares = (scores / np.where(totals > 0, totals, 1.0)).ravel()  # a query matching nothing: zeros
        words, sizes = _ranges(np, self._words, top.ravel())
        at = np.repeat(np.arange(queries).repeat(depth) * vocabulary, sizes) + self._terms[words]
        model = np.bincount(at, self._shares[words] * np.repeat(shares, sizes), queries * vocabulary)
        model[owners * vocabulary + terms] = 0.0  # a query's own stems are not expansions
        model = model.reshape(queries, vocabulary)
        count = min(FEEDBACK_TERMS, vocabulary)
        chosen = np.argpartition(-model, count - 1, axis=1)[:, :count]
        mass = np.take_along_axis(model, chosen, axis=1)
        sums = mass.sum(axis=1, keepdims=True)
        mass *= FEEDBACK_WEIGHT * np.array(lengths, dtype=np.float64)[:, None] / np.where(sums > 0, sums, 1.0)
        extra = self._sum(np.arange(queries).repeat(count), chosen.ravel(), mass.ravel(), queries)
        return extra * (matrix > 0)

    def close(self) -> None:
        self._ids = {}
        self._row = self._tools = self._terms = self._words = self._np.zeros(0, dtype=self._np.int64)
        self._scores = self._shares = self._np.zeros(0)


def _ranges(
    np: Any, bounds: npt.NDArray[np.int64], picks: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The positions of the rows `picks` of a CSR-like layout (row i: bounds[i]:bounds[i + 1]), one after
    the other, and each row's size."""
    first, sizes = bounds[picks], bounds[picks + 1] - bounds[picks]
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    return np.arange(total) - np.repeat(ends - sizes - first, sizes), sizes


def _engine(name: Engine) -> str:
    if name != "auto":
        return name
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError:
        return "fts5"
    return "bm25s"


class ToolIndex:
    """A full-text index over tools (see the module docstring). Thread-safe; build a new one to change it.

    Args:
        tools: The tools to index. Names need not be unique: each tool is its own document, and a search
            returns the best-matching one of each name.
        engine: ``"bm25s"`` (needs the ``search`` extra), ``"fts5"``, or ``"auto"``: bm25s when it is
            installed.
        embed: A text-embedding function (texts in, one vector per text out, e.g. `model2vec`'s
            `StaticModel.encode`): each ranking's best BM25 documents are then re-ranked by their cosine
            similarity to the query too (see the module docstring). Called once here on every tool's
            text, then once per search on the query and its sentences. Needs numpy.
    """

    def __init__(self, tools: Iterable[Tool], *, engine: Engine = "auto", embed: Embed | None = None) -> None:
        self.tools: list[Tool] = list(tools)
        self.engine: str = _engine(engine)
        self._unique = len({t.name for t in self.tools}) == len(self.tools)
        self._ranker: _Ranker | None = None
        self._closed = False
        self._embed = embed
        self._vectors: npt.NDArray[np.float32] | None = None
        if embed is not None:
            try:
                import numpy  # noqa: F401
            except ImportError as exc:
                raise ImportError(
                    "ToolIndex(embed=...) needs numpy: pip install numpy (or 'toolrun[search]')."
                ) from exc
        if embed is not None and self.tools:
            self._vectors = _unit_rows(embed([" ".join(_fields(t)) for t in self.tools]), len(self.tools))
        if self.engine == "bm25s":
            if self.tools:
                self._ranker = _Bm25s(self.tools)
        elif self.engine == "fts5":
            self._ranker = _Fts5(self.tools)
        else:
            raise ValueError(f"Unknown search engine {engine!r}: use 'auto', 'bm25s' or 'fts5'.")

    def __len__(self) -> int:
        return len(self.tools)

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        """The `k` best-matching tools for `query`, best first, one hit per name (fewer when fewer tools
        share a word with it).

        A query of several sentences asks for several things ("Convert 100 EUR to USD. Then book a
        table."): each sentence is searched too, and the lists are interleaved — the whole query's first,
        then the sentences', best-matching sentence first — so that every request gets its best tools near
        the top instead of the longest one taking them all. A sentence that matches far worse than the best
        one (`WEAK_SENTENCE`) is left to the whole query's list, and so are a first sentence that only
        announces the requests ("Could you help me plan my vacation?") and one whose best tool a stronger
        sentence already has (the same request again). "and then" / ", then" part requests inside a
        sentence too.

        With `embed`, each list is re-ranked by meaning first (its hits' scores are then the mixed
        scores); sentences are still compared by their best BM25 score.
        """
        if k < 1:
            raise ValueError("k must be at least 1.")
        if self._closed:
            raise RuntimeError("This ToolIndex is closed: build a new one to search.")
        if self._ranker is None:
            return []
        texts = _SENTENCES.split(query)
        analysed = [_analyse(s) for s in texts]
        sentences = [terms for terms, _ in analysed]
        whole = list(dict.fromkeys(t for terms in sentences for t in terms))[:MAX_TERMS]
        if not whole:
            return []
        asks = [
            (terms, text, given)
            for (terms, given), text in zip(analysed, texts, strict=True)
            if len(terms) >= 2
        ]
        if asks and asks[0][1] is texts[0] and len(texts) > 1 and _announces(texts[0]):
            asks = asks[1:]
        asks = asks[:MAX_SENTENCES]
        if len(asks) < 2:
            asks = []
        limit = k if self._unique else 4 * k + 8  # room for repeated names, dropped below
        if self._vectors is not None:
            limit = max(limit, RERANK_POOL)
        values = [frozenset().union(*(given for _, given in analysed)), *(given for _, _, given in asks)]
        rankings = self._ranker.rank([whole, *(terms for terms, _, _ in asks)], limit, values)
        # The sentences that get a place: best BM25 score (rows come best first) not under WEAK_SENTENCE of
        # the best sentence's, strongest first.
        best = max((rows[0][1] for rows in rankings[1:] if rows), default=0.0)
        kept = sorted(
            (
                (rows[0][1], rows, text)
                for rows, (_, text, _) in zip(rankings[1:], asks, strict=True)
                if rows and rows[0][1] >= WEAK_SENTENCE * best
            ),
            key=lambda sentence: -sentence[0],
        )
        # A sentence whose best tool is a stronger sentence's best asks the same again ("the area of a
        # triangle…", "lastly the area of another triangle…"): its runners-up would only take places.
        firsts: set[str] = set()
        distinct = []
        for sentence in kept:
            name = self.tools[sentence[1][0][0]].name
            if name not in firsts:
                firsts.add(name)
                distinct.append(sentence)
        kept = distinct
        lists = [rankings[0], *(rows for _, rows, _ in kept)]
        if self._vectors is not None:
            lists = self._rerank(lists, query, [text for _, _, text in kept])
        if len(lists) == 1:
            return self._hits(lists[0], k)
        return _interleave([self._hits(rows, k) for rows in lists], k)

    def _rerank(
        self, rankings: list[list[tuple[int, float]]], query: str, asks: list[str]
    ) -> list[list[tuple[int, float]]]:
        """Each ranking (the whole query's, then its sentences', `asks`) of its first `RERANK_POOL`
        documents re-ranked by BM25 share + weighted cosine."""
        assert self._embed is not None and self._vectors is not None
        import numpy as np

        if len(asks) >= 2:  # the whole question's vector: the mean of its sentences' (each embedded once)
            sentences = _unit_rows(self._embed(asks), len(asks))
            queries = _unit_rows(np.vstack([sentences.mean(axis=0), sentences]), len(asks) + 1)
        else:
            queries = _unit_rows(self._embed([query, *asks]), len(asks) + 1)
        pools = [rows[:RERANK_POOL] for rows in rankings]
        sizes = [len(pool) for pool in pools]
        width = max(sizes)
        if width == 0:
            return pools
        positions = np.zeros((len(pools), width), dtype=np.int64)
        scores = np.zeros((len(pools), width))
        for row, pool in enumerate(pools):
            positions[row, : sizes[row]] = [position for position, _ in pool]
            scores[row, : sizes[row]] = [score for _, score in pool]
        padding = np.arange(width) >= np.array(sizes)[:, None]
        cosines = np.einsum("rwd,rd->rw", self._vectors[positions], queries).astype(np.float64)
        cosines[padding] = -2.0  # below any cosine: never the best one
        shares = scores / np.maximum(scores.max(axis=1, keepdims=True), 1e-300)
        mixed = shares + EMBED_WEIGHT * (cosines - cosines.max(axis=1, keepdims=True))
        order = np.argsort(-mixed, axis=1, kind="stable")
        return [
            [(int(positions[row, j]), float(mixed[row, j])) for j in order[row, : sizes[row]]]
            for row in range(len(pools))
        ]

    def _hits(self, rows: list[tuple[int, float]], k: int) -> list[SearchHit]:
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for position, score in rows:
            tool = self.tools[position]
            if tool.name not in seen:
                seen.add(tool.name)
                hits.append(SearchHit(tool, score))
                if len(hits) == k:
                    break
        return hits

    def close(self) -> None:
        """Release the index's memory; searching afterwards raises `RuntimeError`."""
        self._closed = True
        if self._ranker is not None:
            self._ranker.close()

    def __repr__(self) -> str:
        return f"<ToolIndex {len(self.tools)} tools, {self.engine}>"


def _announces(sentence: str) -> bool:
    """Whether the first sentence of several only announces the requests that follow: a question asking for
    help ("Could you help me plan my vacation?", "Can you help me with a few tasks?"). Its words still count
    in the whole question's list; a list of its own would give a place to whatever matches "plan" or
    "tasks"."""
    return sentence.strip().strip("\"'").rstrip().endswith("?") and _HELP.search(sentence) is not None


def _unit_rows(vectors: Any, n: int) -> npt.NDArray[np.float32]:
    """An embedding function's output as a float32 matrix of unit rows (zero rows stay zero)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(
            f"embed returned an array of shape {matrix.shape}, not one vector for each of {n} texts."
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


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
