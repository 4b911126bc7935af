"""The tune half's misses of `ToolIndex` on BFCL, to read before changing the ranker (never the held-out's).

For each question of the tune half (see `search.held_out`) whose gold tool, or a reviewed equivalent, is
not among the first 5 distinct names, or not among the first 5·n: the question, the gold tool's doc and
what ranked instead. The held-out half is not printed, on purpose: the ranker is chosen on the tune half
and only scored on the other.

Run: ``python bench/search_misses.py [--engine bm25s|fts5] [--corpus PATH]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from search import CORPUS, distinct_names, held_out, load_equivalents, load_queries, load_tools

from toolrun.search import ToolIndex


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--engine", choices=("bm25s", "fts5"), default="bm25s")
    args = parser.parse_args(argv)
    tools = load_tools(args.corpus)
    docs = {}
    for t in tools:
        docs.setdefault(t.name, t)
    equivalents = load_equivalents()
    index = ToolIndex(tools, engine=args.engine)
    misses = 0
    for query in load_queries(args.corpus):
        if held_out(query.id):
            continue
        n = len(query.gold)
        wide = distinct_names([h.tool.name for h in index.search(query.text, 5 * n)], 5 * n)
        top = distinct_names([h.tool.name for h in index.search(query.text, 5)], 5)
        for gold in query.gold:
            same = equivalents.get(gold, frozenset([gold]))
            at_5, within = not same.isdisjoint(top), not same.isdisjoint(wide)
            if at_5 and within:
                continue
            misses += 1
            doc = docs[gold]
            params = list((doc.parameters or {}).get("properties", {}))[:8]
            print(f"== {query.id}  gold {gold}  at 5: {at_5}  within 5n: {within}")
            print(f"   question: {query.text[:400]}")
            print(f"   gold doc: {doc.description[:200]} | parameters: {params}")
            print(f"   first 5: {top}")
    print(f"\n{misses} tune-half (question, gold) misses ({args.engine})")


if __name__ == "__main__":
    main()
