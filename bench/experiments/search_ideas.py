"""Ideas for raising tool-search recall@5 on BFCL, each chosen on the tune half and then scored held out.

Run: ``python bench/experiments/search_ideas.py [--corpus PATH]`` (the ``search`` extra; about a minute on
one core). Prints, per idea, the configuration picked on the tune half (best recall@5 there) and its recall@1
and recall@5 on both halves. Nothing here looks at the held-out half before its single scoring at the end of
each idea.

1. **Pseudo-relevance feedback (RM3)**, with toolrun's own implementation: a grid over `FEEDBACK_DOCS`,
   `FEEDBACK_TERMS` and `FEEDBACK_WEIGHT` (kept: 10, 5, 0.05).
2. **Learned re-rankers**, pairwise logistic regression (Newton's method in numpy, L2 penalty chosen by
   5-fold cross-validation on the tune half), features cheap to compute at query time:
   a. over the union of the first 30 names of the whole question's list and of each kept sentence's
      list: ranks and score shares in those lists, the sentence's strength and order, the position in the
      interleaved result, BM25 scores of separate name / description / parameter indexes for the whole
      question and for the candidate's best sentence, and how much of the name the question covers;
   b. within each list (whole question, each sentence) before the interleaving: score share, rank, the
      three field scores, the share of the query's stems the tool has, the name's coverage both ways;
      without and with feedback.
3. **Explicit diversification** (xQuAD, Santos et al. 2010) over the sentences instead of the round-robin:
   the sentences are the aspects (weighted uniformly or by strength), a tool's probability per ranking a
   softmax of its score (or its share of the best); grid over λ and the temperature.
4. **Query-term frequency** (BM25's k3) for the whole question's terms.
5. **Truncation**: each word's first n letters indexed as extra terms beside the stems, weighted α.
6. **Clause splitting**: sentences also split at commas and/or "and" / "then".
7. **Document expansion** (a relevance model per tool, Tao et al. 2006), on top of feedback: each tool's text
   searched as a query, its M nearest tools of other names give its T heaviest stems it lacks, indexed as an
   extra field of weight γ.

The ranker here (`Lab`) is toolrun's, rebuilt from its parts so that each idea can change one of them; with
no idea applied it reproduces `ToolIndex(engine="bm25s")` without feedback exactly (checked at the start).
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bm25s
import search as bench  # bench/search.py
import Stemmer

import toolrun.search as ts
from toolrun import Tool
from toolrun.search import ToolIndex, _fields, _words, query_terms

STEM = Stemmer.Stemmer("english")
POOL = 30
"""Names per ranking that a re-ranker sees."""
Ranker = Callable[[str], list[str]]


class Sparse:
    """A bm25s index as stem -> (tool positions, scores); `scores(stems)` is the dense vector of sums."""

    def __init__(self, docs: list[list[str]], k1: float, b: float) -> None:
        r = bm25s.BM25(k1=k1, b=b)
        r.index(docs, show_progress=False)
        data, ind, ptr = (r.scores[k] for k in ("data", "indices", "indptr"))
        self.n = len(docs)
        self.rows = {
            str(s): (ind[ptr[c] : ptr[c + 1]].astype(np.int64), data[ptr[c] : ptr[c + 1]].astype(np.float64))
            for s, c in r.vocab_dict.items()
            if s
        }

    def scores(self, stems: set[str], weights: dict[str, float] | None = None) -> np.ndarray:
        out = np.zeros(self.n)
        for s in stems:
            row = self.rows.get(s)
            if row is not None:
                out[row[0]] += row[1] * (weights[s] if weights else 1.0)
        return out


def stems(words: list[str]) -> list[str]:
    return STEM.stemWords(words)


class Lab:
    """toolrun's bm25s ranker in parts: field-repeated BM25, sentences, weak-sentence rule, round-robin."""

    def __init__(self, tools: list[Tool]) -> None:
        self.names = [t.name for t in tools]
        fielded = [[stems(_words(text)) for text in _fields(t)] for t in tools]
        self.fielded_words = [[_words(text) for text in _fields(t)] for t in tools]
        self.combined = Sparse(
            [[s for f, times in zip(fs, ts._REPEATS, strict=True) for s in f * times] for fs in fielded],
            ts._K1,
            ts._B,
        )
        self.fields = [Sparse([fs[i] for fs in fielded], 1.2, 0.75) for i in range(3)]
        self.field_stems = [[set(fs[i]) for fs in fielded] for i in range(3)]
        self.all_stems = [set().union(*fs) for fs in fielded]
        self.sentences = ts._SENTENCES
        self.score: Callable[[list[str]], np.ndarray] = self.plain
        self.whole_score: Callable[[list[list[str]]], np.ndarray] | None = None

    def plain(self, words: list[str]) -> np.ndarray:
        return self.combined.scores(set(stems(words)))

    def parse(self, text: str) -> tuple[list[str], list[list[str]], np.ndarray, list[np.ndarray]]:
        """The whole question's terms, the kept sentences' terms (strongest first), and their scores."""
        sentences = [query_terms(s) for s in self.sentences.split(text)]
        whole = list(dict.fromkeys(t for terms in sentences for t in terms))[: ts.MAX_TERMS]
        asks = [terms for terms in sentences if len(terms) >= 2][: ts.MAX_SENTENCES]
        if len(asks) < 2:
            asks = []
        whole_scores = self.whole_score(sentences) if self.whole_score else self.score(whole)
        ask_scores = [self.score(a) for a in asks]
        strengths = [float(s.max()) for s in ask_scores]
        best = max(strengths, default=0.0)
        kept = sorted(
            (i for i, s in enumerate(strengths) if s > 0 and s >= ts.WEAK_SENTENCE * best),
            key=lambda i: -strengths[i],
        )
        return whole, [asks[i] for i in kept], whole_scores, [ask_scores[i] for i in kept]

    def ranking(self, scores: np.ndarray, limit: int) -> list[tuple[str, float, int]]:
        """(name, score, tool position), best first, one per name, score > 0, from the first `limit` tools."""
        out, seen = [], set()
        for i in np.argsort(-scores, kind="stable")[:limit]:
            if scores[i] <= 0:
                break
            if self.names[i] not in seen:
                seen.add(self.names[i])
                out.append((self.names[i], float(scores[i]), int(i)))
        return out

    def search(self, text: str, k: int = 5) -> list[str]:
        _, _, whole, asks = self.parse(text)
        lists = [[n for n, _, _ in self.ranking(s, 4 * k + 8)] for s in (whole, *asks)]
        return interleave(lists, k)


def interleave(lists: Sequence[Sequence[str]], k: int = 5) -> list[str]:
    out: list[str] = []
    for rank in range(k):
        for names in lists:
            if rank < len(names) and names[rank] not in out and len(out) < k:
                out.append(names[rank])
    return out


def recall(queries: Sequence[bench.Query], ranker: Ranker) -> tuple[float, float]:
    h1 = h5 = n = 0
    for q in queries:
        top = ranker(q.text)[:5]
        for g in q.gold:
            n, h1, h5 = n + 1, h1 + (top[:1] == [g]), h5 + (g in top)
    return h1 / n, h5 / n


def show(label: str, tune: Sequence[bench.Query], held: Sequence[bench.Query], ranker: Ranker) -> None:
    (t1, t5), (h1, h5) = recall(tune, ranker), recall(held, ranker)
    print(f"  {label}: tune r@1 {t1:.1%} r@5 {t5:.1%} | held-out r@1 {h1:.1%} r@5 {h5:.1%}", flush=True)


def pick(grid: Sequence[Any], tune: Sequence[bench.Query], ranker_for: Callable[[Any], Ranker]) -> Any:
    """The grid point with the best recall@5 on the tune half (the first of equals), printed."""
    scored = [(recall(tune, ranker_for(point))[1], -i, point) for i, point in enumerate(grid)]
    best = max(scored, key=lambda x: x[:2])
    print(f"  picked {best[2]!r} of {len(grid)} on the tune half (r@5 {best[0]:.1%})")
    return best[2]


# ------------------------------------------------------------------------------------------------------
# 1. RM3, toolrun's own


def feedback(tools: list[Tool], tune: Sequence[bench.Query], held: Sequence[bench.Query]) -> None:
    print("1. pseudo-relevance feedback (RM3, toolrun.search)")
    index = ToolIndex(tools, engine="bm25s")
    saved = ts.FEEDBACK_DOCS, ts.FEEDBACK_TERMS, ts.FEEDBACK_WEIGHT

    def ranker_for(point: tuple[int, int, float]) -> Ranker:
        def search(text: str) -> list[str]:
            ts.FEEDBACK_DOCS, ts.FEEDBACK_TERMS, ts.FEEDBACK_WEIGHT = point
            return [h.tool.name for h in index.search(text, 5)]

        return search

    show("without feedback", tune, held, ranker_for((0, 0, 0.0)))
    grid = list(itertools.product((3, 5, 10, 15, 20, 30), (3, 5, 10, 20), (0.025, 0.05, 0.1, 0.2, 0.4)))
    best = pick(grid, tune, ranker_for)
    show(f"with feedback {best}, the best point of the grid", tune, held, ranker_for(best))
    show(f"with feedback {saved}, toolrun's", tune, held, ranker_for(saved))
    without = {q.id: ranker_for((0, 0, 0.0))(q.text) for q in (*tune, *held)}
    kept = {q.id: ranker_for(saved)(q.text) for q in (*tune, *held)}
    for label, half in (("tune", tune), ("held-out", held)):
        found = sum(g in kept[q.id] and g not in without[q.id] for q in half for g in q.gold)
        lost = sum(g in without[q.id] and g not in kept[q.id] for q in half for g in q.gold)
        print(f"  toolrun's against none, {label} half: {found} pairs found, {lost} lost")
    ts.FEEDBACK_DOCS, ts.FEEDBACK_TERMS, ts.FEEDBACK_WEIGHT = saved


# ------------------------------------------------------------------------------------------------------
# 2. learned re-rankers


def fit_pairwise(groups: list[tuple[np.ndarray, np.ndarray]], l2: float) -> np.ndarray:
    """Weights w minimising the logistic loss of w·(x_relevant − x_other) over every pair of a group."""
    pairs = [
        (F[y][:, None, :] - F[~y][None, :, :]).reshape(-1, F.shape[1])
        for F, y in groups
        if 0 < y.sum() < len(y)
    ]
    X = np.vstack(pairs)
    w = np.zeros(X.shape[1])
    for _ in range(30):
        p = 1 / (1 + np.exp(-(X @ w)))
        gradient = X.T @ (p - 1) + l2 * w
        hessian = (X * (p * (1 - p))[:, None]).T @ X + l2 * np.eye(len(w))
        w -= np.linalg.solve(hessian, gradient)
    return w


def union_features(lab: Lab, text: str) -> tuple[list[str], np.ndarray]:
    whole_terms, ask_terms, whole, asks = lab.parse(text)
    W = lab.ranking(whole, 3 * POOL)[:POOL]
    S = [lab.ranking(a, 3 * POOL)[:POOL] for a in asks]
    strengths = [s[0][1] if s else 0.0 for s in S]
    interleaved = interleave([[n for n, _, _ in lst] for lst in (W, *S)], 10)
    doc: dict[str, int] = {}
    for lst in (W, *S):
        for n, _, d in lst:
            doc.setdefault(n, d)
    wq = set(stems(whole_terms))
    sq = [set(stems(a)) for a in ask_terms]
    fw = [f.scores(wq) for f in lab.fields]
    fs = [[f.scores(q) for f in lab.fields] for q in sq]
    w_at = {n: (r, s, d) for r, (n, s, d) in enumerate(W)}
    s_at = [{n: (r, s, d) for r, (n, s, d) in enumerate(lst)} for lst in S]
    names, rows = list(doc), []
    for n in names:
        r, s, d = w_at.get(n, (None, 0.0, doc[n]))
        row = [1 / (1 + r) if r is not None else 0.0, s / W[0][1] if W else 0.0, float(r == 0)]
        j = min((i for i in range(len(S)) if n in s_at[i]), key=lambda i: s_at[i][n][0], default=None)
        if j is None:
            row += [0.0] * 5
        else:
            rj, sj, _ = s_at[j][n]
            row += [1 / (1 + rj), sj / S[j][0][1], float(rj == 0), strengths[j] / max(strengths), 1 / (1 + j)]
        row.append(1 / (1 + interleaved.index(n)) if n in interleaved else 0.0)
        row += [f[d] / (f.max() or 1.0) for f in fw]
        if j is None:
            row += [0.0, 0.0, 0.0]
        else:
            dj = s_at[j][n][2]
            row += [f[dj] / (f.max() or 1.0) for f in fs[j]]
        name = lab.field_stems[0][d]
        row.append(len(name & wq) / max(len(name), 1))
        row.append(len(name & sq[j]) / max(len(name), 1) if j is not None else 0.0)
        rows.append(row)
    return names, np.array(rows)


def list_features(lab: Lab, terms: list[str], scores: np.ndarray) -> tuple[list[str], np.ndarray]:
    q = set(stems(terms))
    r = lab.ranking(scores, 3 * POOL)[:POOL]
    if not r:
        return [], np.zeros((0, 9))
    docs = [d for _, _, d in r]
    plain = lab.combined.scores(q)
    fields = [f.scores(q) for f in lab.fields]
    rows = []
    for rank, (_, s, d) in enumerate(r):
        name = lab.field_stems[0][d]
        rows.append(
            [
                s / r[0][1],
                1 / (1 + rank),
                plain[d] / (plain[docs].max() or 1.0),
                *(f[d] / (f[docs].max() or 1.0) for f in fields),
                len(q & lab.all_stems[d]) / max(len(q), 1),
                len(name & q) / max(len(name), 1),
                len(name & q) / max(len(q), 1),
            ]
        )
    return [n for n, _, _ in r], np.array(rows)


def cross_validated_l2(
    data: list[Any], fit: Callable[[list[Any], float], Any], score: Callable[[list[Any], Any], float]
) -> float:
    """The L2 penalty with the best 5-fold cross-validated recall@5 on the tune half."""
    results = {}
    for l2 in (0.1, 1.0, 10.0, 100.0):
        hits = 0.0
        for fold in range(5):
            train = [d for i, d in enumerate(data) if i % 5 != fold]
            test = [d for i, d in enumerate(data) if i % 5 == fold]
            hits += score(test, fit(train, l2))
        results[l2] = hits
    total = sum(len(d[0].gold) for d in data)
    print("  5-fold CV recall@5 on the tune half by L2:", {k: f"{v / total:.1%}" for k, v in results.items()})
    return max(results, key=lambda l2: results[l2])


def learned(lab: Lab, tune: Sequence[bench.Query], held: Sequence[bench.Query]) -> None:
    print("2a. learned re-ranker over the union of the lists (18 features)")
    union = [(q, *union_features(lab, q.text)) for q in (*tune, *held)]
    tune_u = union[: len(tune)]  # the held-out half is only scored, below

    def fit_u(data: list[Any], l2: float) -> np.ndarray:
        return fit_pairwise([(F, np.array([n in q.gold for n in names])) for q, names, F in data], l2)

    def hits_u(data: list[Any], w: np.ndarray) -> float:
        return sum(
            g in [names[i] for i in np.argsort(-(F @ w), kind="stable")[:5]]
            for q, names, F in data
            for g in q.gold
        )

    l2 = cross_validated_l2(tune_u, fit_u, hits_u)
    w = fit_u(tune_u, l2)
    ranked = {q.text: [names[i] for i in np.argsort(-(F @ w), kind="stable")] for q, names, F in union}
    show(f"fitted on the tune half, L2 {l2}", tune, held, ranked.__getitem__)

    for with_feedback in (False, True):
        on = ", on the lists with feedback" if with_feedback else ""
        print(f"2b. learned re-ranker within each list (9 features){on}")
        lab.score = rm3(lab, 10, 5, 0.05) if with_feedback else lab.plain
        lists = []
        for q in (*tune, *held):
            whole_terms, ask_terms, whole, asks = lab.parse(q.text)
            lists.append(
                (
                    q,
                    [
                        list_features(lab, t, s)
                        for t, s in zip([whole_terms, *ask_terms], [whole, *asks], strict=True)
                    ],
                )
            )
        lab.score = lab.plain
        tune_l = lists[: len(tune)]

        def fit_l(data: list[Any], l2: float) -> np.ndarray:
            return fit_pairwise(
                [(F, np.array([n in q.gold for n in names])) for q, ls in data for names, F in ls if names],
                l2,
            )

        def top_l(ls: list[tuple[list[str], np.ndarray]], w: np.ndarray | None) -> list[str]:
            ordered = [
                names if w is None else [names[i] for i in np.argsort(-(F @ w), kind="stable")]
                for names, F in ls
            ]
            return interleave(ordered)

        def hits_l(data: list[Any], w: np.ndarray) -> float:
            return sum(g in top_l(ls, w) for q, ls in data for g in q.gold)

        l2 = cross_validated_l2(tune_l, fit_l, hits_l)
        w = fit_l(tune_l, l2)
        as_they_are = {q.text: top_l(ls, None) for q, ls in lists}
        reranked = {q.text: top_l(ls, w) for q, ls in lists}
        show("the lists as they are", tune, held, as_they_are.__getitem__)
        show(f"re-ranked, fitted on the tune half, L2 {l2}", tune, held, reranked.__getitem__)


# ------------------------------------------------------------------------------------------------------
# 3.-6.


def rm3(lab: Lab, docs: int, terms: int, weight: float) -> Callable[[list[str]], np.ndarray]:
    """The same feedback as toolrun's (for the ideas that combine with it), in plain Python: it re-weights
    the tools that share a word with the query."""
    forward = []
    for fs in lab.fielded_words:
        counts = Counter(s for f, times in zip(fs, ts._REPEATS, strict=True) for s in stems(f) * times)
        total = sum(counts.values())
        forward.append({s: c / total for s, c in counts.items()})

    def score(words: list[str]) -> np.ndarray:
        q = set(stems(words))
        base = lab.combined.scores(q)
        top = [i for i in np.argsort(-base)[:docs] if base[i] > 0]
        if not top:
            return base
        model: Counter[str] = Counter()
        for i in top:
            for s, share in forward[i].items():
                if s not in q:
                    model[s] += base[i] / base[top].sum() * share
        chosen = dict(model.most_common(terms))
        total = sum(chosen.values())
        extra = lab.combined.scores(set(chosen), {s: weight * len(q) * v / total for s, v in chosen.items()})
        return base + extra * (base > 0)  # only the tools that share a word with the query

    return score


def xquad(lab: Lab, text: str, lam: float, tau: float, by_strength: bool, k: int = 5) -> list[str]:
    _, _, whole, asks = lab.parse(text)

    def probabilities(scores: np.ndarray) -> dict[str, float]:
        r = lab.ranking(scores, 3 * POOL)[:POOL]
        if not r:
            return {}
        top = r[0][1]
        if tau == 0:
            return {n: s / top for n, s, _ in r}
        e = {n: math.exp((s - top) / (tau * top)) for n, s, _ in r}
        z = sum(e.values())
        return {n: v / z for n, v in e.items()}

    pw, ps = probabilities(whole), [probabilities(a) for a in asks]
    strengths = [float(a.max()) for a in asks]
    aspect = [s / sum(strengths) if by_strength else 1 / len(asks) for s in strengths]
    left = [1.0] * len(asks)
    candidates = list(dict.fromkeys(itertools.chain(pw, *ps)))
    out: list[str] = []
    while len(out) < k:
        best = max(
            (c for c in candidates if c not in out),
            key=lambda c: (
                (1 - lam) * pw.get(c, 0.0)
                + lam * sum(a * p.get(c, 0.0) * r for a, p, r in zip(aspect, ps, left, strict=True))
            ),
            default=None,
        )
        if best is None:
            break
        out.append(best)
        left = [r * (1 - p.get(best, 0.0)) for p, r in zip(ps, left, strict=True)]
    return out


def others(lab: Lab, tools: list[Tool], tune: Sequence[bench.Query], held: Sequence[bench.Query]) -> None:
    print("3. explicit diversification over the sentences (xQuAD)")
    grid = list(itertools.product((0.3, 0.5, 0.7, 0.85, 0.95), (0.0, 0.05, 0.1, 0.2, 0.4), (False, True)))
    best = pick(grid, tune, lambda p: lambda text: xquad(lab, text, *p))
    show("xQuAD (λ, temperature, aspects by strength)", tune, held, lambda text: xquad(lab, text, *best))
    lab.score = rm3(lab, 10, 5, 0.05)
    show("the round-robin, with feedback", tune, held, lab.search)
    best = pick(grid, tune, lambda p: lambda text: xquad(lab, text, *p))
    show("xQuAD with feedback", tune, held, lambda text: xquad(lab, text, *best))
    lab.score = lab.plain

    print("4. query-term frequency for the whole question (BM25's k3)")

    def with_k3(k3: float) -> Ranker:
        def whole_score(sentences: list[list[str]]) -> np.ndarray:
            qtf = Counter(stems([t for terms in sentences for t in terms]))
            whole = list(dict.fromkeys(t for terms in sentences for t in terms))[: ts.MAX_TERMS]
            q = set(stems(whole))
            return lab.combined.scores(q, {s: (k3 + 1) * qtf[s] / (k3 + qtf[s]) for s in q})

        def search(text: str) -> list[str]:
            lab.whole_score = whole_score
            try:
                return lab.search(text)
            finally:
                lab.whole_score = None

        return search

    best = pick([0.5, 1.0, 2.0, 5.0, 1000.0], tune, with_k3)
    show(f"k3 {best}", tune, held, with_k3(best))

    print("5. word prefixes as extra terms")
    prefixes = {}
    for n in (4, 5, 6):
        docs = [
            [w[:n] for f, times in zip(fs, ts._REPEATS, strict=True) for w in f * times if len(w) > n]
            for fs in lab.fielded_words
        ]
        prefixes[n] = Sparse(docs, ts._K1, ts._B)

    def with_prefix(point: tuple[int, float]) -> Ranker:
        n, alpha = point

        def search(text: str) -> list[str]:
            lab.score = lambda words: (
                lab.plain(words) + alpha * prefixes[n].scores({w[:n] for w in words if len(w) > n})
            )
            try:
                return lab.search(text)
            finally:
                lab.score = lab.plain

        return search

    best = pick(list(itertools.product((4, 5, 6), (0.1, 0.2, 0.3, 0.5, 0.8))), tune, with_prefix)
    show(f"prefixes {best}", tune, held, with_prefix(best))

    print("6. clause splitting")
    patterns = [
        r"(?<=[.?!;])\s+|,\s+",
        r"(?<=[.?!;])\s+|,?\s+and\s+",
        r"(?<=[.?!;])\s+|,\s+|\s+and\s+|\s+then\s+",
    ]

    def with_pattern(pattern: str) -> Ranker:
        def search(text: str) -> list[str]:
            lab.sentences = re.compile(pattern)
            try:
                return lab.search(text)
            finally:
                lab.sentences = ts._SENTENCES

        return search

    best = pick(patterns, tune, with_pattern)
    show(f"split at {best!r}", tune, held, with_pattern(best))

    print("7. document expansion, on top of feedback")
    feedback_score = rm3(lab, 10, 5, 0.05)
    indexed = [
        [s for f, times in zip(fs, ts._REPEATS, strict=True) for s in stems(f) * times]
        for fs in lab.fielded_words
    ]
    shares = [{s: c / len(words) for s, c in Counter(words).items()} for words in indexed]
    neighbours = []
    for i, words in enumerate(indexed):
        scores = lab.combined.scores(set(words))
        scores[[j for j in np.nonzero(scores)[0] if lab.names[j] == lab.names[i]]] = 0.0  # itself, its twins
        neighbours.append([(int(j), float(scores[j])) for j in np.argsort(-scores)[:10] if scores[j] > 0])

    def expansion(m: int, t: int) -> Sparse:
        docs = []
        for i, near in enumerate(neighbours):
            model: Counter[str] = Counter()
            for j, score in near[:m]:
                for stem, share in shares[j].items():
                    if stem not in shares[i]:
                        model[stem] += score / sum(x for _, x in near[:m]) * share
            docs.append([stem for stem, _ in model.most_common(t)])
        return Sparse(docs, ts._K1, ts._B)

    fields = {(m, t): expansion(m, t) for m in (3, 5, 10) for t in (5, 10, 20)}

    def with_expansion(point: tuple[int, int, float]) -> Ranker:
        m, t, gamma = point

        def search(text: str) -> list[str]:
            lab.score = lambda words: feedback_score(words) + gamma * fields[m, t].scores(set(stems(words)))
            try:
                return lab.search(text)
            finally:
                lab.score = lab.plain

        return search

    grid = [(m, t, gamma) for (m, t) in fields for gamma in (0.1, 0.2, 0.4)]
    best = pick(grid, tune, with_expansion)
    show(f"expansion {best} (M, T, γ)", tune, held, with_expansion(best))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=bench.CORPUS)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    tools, queries = bench.load_tools(args.corpus), bench.load_queries(args.corpus)
    tune = [q for q in queries if not bench.held_out(q.id)]
    held = [q for q in queries if bench.held_out(q.id)]
    lab = Lab(tools)
    saved = ts.FEEDBACK_DOCS
    ts.FEEDBACK_DOCS = 0
    index = ToolIndex(tools, engine="bm25s")
    differ = sum(lab.search(q.text) != [h.tool.name for h in index.search(q.text, 5)] for q in queries)
    ts.FEEDBACK_DOCS = saved
    print(
        f"{len(tune)} tune questions, {len(held)} held out; the lab's top 5 differs from ToolIndex's without "
        f"feedback for {differ} questions (tools of equal scores in another order)"
    )
    show("ToolIndex without feedback (the lab)", tune, held, lab.search)
    feedback(tools, tune, held)
    lab.score = rm3(lab, 10, 5, 0.05)
    show("the lab's feedback (10, 5, 0.05), for the ideas below that combine with it", tune, held, lab.search)
    lab.score = lab.plain
    learned(lab, tune, held)
    others(lab, tools, tune, held)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
