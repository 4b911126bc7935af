"""Candidates for `bench/search_equivalents.json`: corpus tools that might make the same call as a gold tool.

For each of the 480 distinct gold tools of the 400 `multiple` / `parallel_multiple` questions, every other
distinct name of the corpus is scored by

    0.45 × Jaccard(name stems) + 0.35 × Jaccard(description stems) + 0.2 × Jaccard(parameter-name stems)

(stems as `toolrun.search.query_terms` makes them: split snake/camel names, stop words dropped, Snowball) and
the 10 best are the candidates (4,800 pairs). Two subsets were reviewed by hand, reading both docs:

* ``pooled``: candidates that `ToolIndex` (bm25s) ranks within the first 5·n distinct names of a question
  whose gold tool it missed at 5 (the IR "pooling" method: judge what a system returned);
* ``high``: the other candidates that score at least 0.6;
* ``wide`` (a second pass, after the lexicon): any other tool ranked there whose score with the gold is at
  least 0.15, even outside its 10 candidates (`currency_conversion` and `convert_currency` share few stems);
* ``band`` (a third pass, issue 23 part 3): every other candidate scoring at least 0.3, a subset chosen by
  the score alone, without reading any ranker's output (864 pairs then), so that the figures of the rows
  that were never pooled are not held down by candidates nobody read.

The others count as not equivalent. Run: ``python bench/experiments/search_equivalents.py`` prints both
subsets, one pair a line, for review.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search import distinct_names, load_queries, load_tools

from toolrun import Tool
from toolrun.search import ToolIndex, query_terms, split_name

TOP = 10
HIGH = 0.6
WIDE = 0.15
BAND = 0.3


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def scorer(tools: list[Tool]) -> tuple[list[str], Callable[[str, str], float]]:
    """The distinct names, and the overlap score of two of them."""
    first: dict[str, Tool] = {}
    for t in tools:
        first.setdefault(t.name, t)

    def params(t: Tool) -> list[str]:
        return list((t.parameters or {}).get("properties") or {})

    names = {n: set(query_terms(split_name(n))) for n in first}
    descriptions = {n: set(query_terms(t.description)) for n, t in first.items()}
    parameters = {n: set(query_terms(" ".join(split_name(p) for p in params(t)))) for n, t in first.items()}

    def score(g: str, c: str) -> float:
        return (
            0.45 * _jaccard(names[g], names[c])
            + 0.35 * _jaccard(descriptions[g], descriptions[c])
            + 0.2 * _jaccard(parameters[g], parameters[c])
        )

    return list(first), score


def candidates(tools: list[Tool], golds: list[str]) -> list[tuple[str, str, float]]:
    every, score = scorer(tools)
    out = []
    for g in golds:
        scored = sorted(((score(g, c), c) for c in every if c != g), reverse=True)
        out += [(g, c, round(s, 3)) for s, c in scored[:TOP]]
    return out


def main() -> None:
    tools = load_tools()
    queries = load_queries()
    golds = sorted({g for q in queries for g in q.gold})
    cands = candidates(tools, golds)
    scores = {(g, c): s for g, c, s in cands}
    index = ToolIndex(tools, engine="bm25s")
    _, score = scorer(tools)
    pooled: set[tuple[str, str]] = set()
    wide: set[tuple[str, str]] = set()
    for q in queries:
        top = distinct_names([h.tool.name for h in index.search(q.text, 5 * len(q.gold))], 5 * len(q.gold))
        missed = [g for g in q.gold if g not in top[:5]]
        pooled |= {(g, c) for g in missed for c in top if (g, c) in scores}
        wide |= {(g, c) for g in missed for c in top if c != g and (g, c) not in scores}
    high = {(g, c) for (g, c), s in scores.items() if s >= HIGH} - pooled
    wide = {(g, c) for g, c in wide if score(g, c) >= WIDE}
    band = {(g, c) for (g, c), s in scores.items() if BAND <= s < HIGH} - pooled
    print(
        f"{len(cands)} candidates; {len(pooled)} pooled, {len(high)} more at >= {HIGH}, {len(wide)} wide, "
        f"{len(band)} more at >= {BAND}"
    )
    for label, pairs in (("pooled", pooled), ("high", high), ("wide", wide), ("band", band)):
        for g, c in sorted(pairs):
            print(f"{label}\t{score(g, c):.3f}\t{g}\t{c}")


if __name__ == "__main__":
    main()
