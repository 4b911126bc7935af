"""Term-level diversification of `ToolIndex`'s ranked lists, on the tune half only (issue 23, part 5).

Each ranking the engine returns (the whole question's, then each sentence's) has its first `pool` documents
re-picked greedily: a document scores its BM25 score × the share of its own stems' score mass still new,
a stem's share decaying by λ for each earlier pick (of another name) that matched it. λ = 1 is the ranker
as is. The first pick never changes (nothing is covered yet), so the sentence rules of `ToolIndex.search`,
which read each list's first document, see what they always saw; only the order after it moves.

Prints, per setting, equivalence-aware recall @3 / @4 / @5 / @10, plain recall@5 and "all gold within 5n"
over the tune half (`bench/search.py`'s split and equivalence file). The held-out half is never scored.

Run: ``python bench/experiments/search_term_diversity.py`` (the ``search`` extra; about 3 minutes).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search import CORPUS, Query, distinct_names, held_out, load_equivalents, load_queries, load_tools

from toolrun.search import ToolIndex


def stem_scores(
    ranker: Any, terms: list[str], positions: list[int]
) -> dict[str, tuple[float, dict[int, float]]]:
    """Each weighed stem of a query -> (its weight, its BM25 score in each of `positions`)."""
    with ranker._lock:
        stems = ranker._stemmer.stemWords(terms)
    out = {}
    for stem, weight in ranker._weigh(terms, stems, [], frozenset()).items():
        row = ranker._ids.get(stem)
        if row is None:
            continue
        lo, hi = ranker._row[row], ranker._row[row + 1]
        scores = dict(zip(ranker._tools[lo:hi].tolist(), ranker._scores[lo:hi].tolist(), strict=True))
        out[stem] = (weight, {p: scores.get(p, 0.0) for p in positions})
    return out


def diversify(
    index: ToolIndex, rows: list[tuple[int, float]], terms: list[str], lam: float, pool: int
) -> list[tuple[int, float]]:
    if lam >= 1.0 or len(rows) < 2:
        return rows
    head = rows[:pool]
    stems = stem_scores(index._ranker, terms, [p for p, _ in head])
    covered = dict.fromkeys(stems, 0)
    names: set[str] = set()
    out: list[tuple[int, float]] = []

    def value(item: tuple[int, float]) -> float:
        position, score = item
        own = sum(w * s[position] for w, s in stems.values())
        new = sum(w * s[position] * lam ** covered[stem] for stem, (w, s) in stems.items())
        return score * new / own if own > 0 else score

    while head:
        best = max(head, key=value)
        head.remove(best)
        out.append(best)
        name = index.tools[best[0]].name
        if name not in names:
            names.add(name)
            for stem, (_, s) in stems.items():
                covered[stem] += s[best[0]] > 0
    return out + rows[pool:]


def wrap(index: ToolIndex, setting: dict[str, Any]) -> None:
    """Diversify what the engine returns, per `setting` ({"lam", "pool", "lists": "whole" | "every"})."""
    ranker = index._ranker
    rank = type(ranker).rank

    def ranked(queries: Sequence[list[str]], limit: int, values: Any = ()) -> list[list[tuple[int, float]]]:
        lists = rank(ranker, queries, max(limit, setting["pool"]), values)
        return [
            diversify(index, rows, list(terms), setting["lam"], setting["pool"])
            if i == 0 or setting["lists"] == "every"
            else rows
            for i, (rows, terms) in enumerate(zip(lists, queries, strict=True))
        ]

    ranker.rank = ranked  # type: ignore[method-assign]


def score(index: ToolIndex, queries: list[Query], equivalents: dict[str, frozenset[str]]) -> str:
    depths = (3, 4, 5, 10)
    hits = dict.fromkeys(depths, 0)
    plain = pairs = within = 0
    for query in queries:
        n = len(query.gold)
        top = distinct_names([h.tool.name for h in index.search(query.text, 10)], 10)
        wide = distinct_names([h.tool.name for h in index.search(query.text, 5 * n)], 5 * n)
        found_all = True
        for gold in query.gold:
            same = equivalents.get(gold, frozenset([gold]))
            pairs += 1
            for depth in depths:
                hits[depth] += not same.isdisjoint(top[:depth])
            plain += gold in top[:5]
            found_all = found_all and not same.isdisjoint(wide)
        within += found_all
    eq = " / ".join(f"{hits[d] / pairs:.1%}" for d in depths)
    return f"eq. @3/@4/@5/@10 {eq} | plain @5 {plain / pairs:.1%} | within 5n {within / len(queries):.1%}"


def main() -> None:
    tools = load_tools(CORPUS)
    queries = [q for q in load_queries(CORPUS) if not held_out(q.id)]
    equivalents = load_equivalents()
    index = ToolIndex(tools, engine="bm25s")
    setting: dict[str, Any] = {"lam": 1.0, "pool": 10, "lists": "whole"}
    wrap(index, setting)
    print("as is:", score(index, queries, equivalents), flush=True)
    for lists in ("whole", "every"):
        for lam in (0.9, 0.7, 0.5, 0.3, 0.1):
            for pool in (10, 30):
                setting.update(lam=lam, pool=pool, lists=lists)
                print(f"{lists} λ={lam} pool={pool}:", score(index, queries, equivalents), flush=True)


if __name__ == "__main__":
    main()
