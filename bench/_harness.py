"""Shared timing utilities for toolrun's benchmarks.

Everything runs in ONE process and ONE event loop so toolrun, its peers and the "floor" (the same work
done with plain Pydantic + ``json``) are measured under the same conditions.

How a measurement works (see :func:`measure`):

* Each candidate is an *op*: a zero-argument callable returning an awaitable that performs one
  operation (one tool call, one agent run, one whole scenario...).
* Before timing, every op is run once and its result checked (:func:`build`), then warmed up, and a
  batch size is calibrated per candidate so one batch lasts about ``--target-ms`` (ops that are much
  slower than that run one per batch).
* Then ``--rounds`` rounds are run. In each round every candidate runs one batch, **round-robin**, and the
  starting candidate rotates from one round to the next. Drift on a noisy shared machine (other tenants,
  frequency scaling, thermal) therefore hits every candidate equally instead of favouring whichever ran
  first. The sample of a round is ``batch_ns / batch`` (``time.perf_counter_ns``; with ``--clock cpu``,
  ``time.process_time_ns``: the CPU time of all of this process's threads, so time lost to other
  tenants does not count but work a candidate hands to a thread of its own still does).
* The reported number is the **median** of the per-round samples, with the interquartile range
  (Q1..Q3, ``statistics.quantiles(method="inclusive")``) as the spread.

Garbage collection (``gc``):

* Setup objects (imported libraries, tools, schemas) are moved to the permanent generation with
  ``gc.collect(); gc.freeze()`` once all candidates are built, so later full collections do not walk the
  big heap that importing every peer into one process creates. Without this, each candidate would pay
  for the other libraries' objects.
* Default mode (``--gc collect``): ``gc.collect()`` runs *untimed* before every batch, then the batch runs
  with the collector **enabled**. A library that allocates a lot (or creates reference cycles) pays for
  the collections it triggers, as it would in production, but never for garbage left by the previous
  candidate.
* ``--gc off``: the collector is disabled during the timed batch (like :mod:`timeit`) and a collection
  runs untimed after it. This hides allocation-driven GC cost; use it to see pure interpreter time.

Results are printed by :func:`compare` and written as JSON to ``bench/results/<name>.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import inspect
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

# bench/mcp.py shadows the `mcp` SDK (which FastMCP, the OpenAI Agents SDK and Pydantic AI import) when a
# script runs from this folder: keep the folder on the path, but last, so the installed packages win.
_BENCH_DIR = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH_DIR] + [str(_BENCH_DIR)]


Op = Callable[[], Awaitable[Any]]
"""One operation: a zero-argument callable returning an awaitable (usually an ``async def``)."""

Maker = Callable[[], Op | Awaitable[Op]]
"""Setup done once; returns the op. May be sync or ``async`` (the harness awaits it if needed)."""

Kind = Literal["floor", "peer", "toolrun"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"

PEER_PACKAGES = (
    "langchain-core",
    "openai-agents",
    "pydantic-ai-slim",
    "fastmcp",
    "pydantic",
    "pydantic-core",
)


# --------------------------------------------------------------------------------------------------------
# Settings / command line
# --------------------------------------------------------------------------------------------------------


@dataclass
class Settings:
    """How many rounds to run and how long a batch should last."""

    rounds: int = 41
    warmup_rounds: int = 2
    target_ms: float = 20.0
    gc_mode: Literal["collect", "off"] = "collect"
    clock: Literal["wall", "cpu"] = "wall"
    quick: bool = False
    only: tuple[str, ...] = ()
    write_json: bool = True
    rounds_explicit: bool = False
    target_explicit: bool = False

    def scaled(
        self, *, rounds: int, quick_rounds: int | None = None, target_ms: float | None = None
    ) -> Settings:
        """A copy with a scenario's own defaults; ``--rounds`` given on the command line always wins."""
        out = Settings(**asdict(self))
        if not self.rounds_explicit:
            out.rounds = (quick_rounds or self.rounds) if self.quick else rounds
        if target_ms is not None and not self.quick and not self.target_explicit:
            out.target_ms = target_ms
        return out

    def wants(self, name: str) -> bool:
        return not self.only or any(part in name for part in self.only)


def parse_args(
    argv: Sequence[str] | None = None,
    *,
    description: str = "",
    rounds: int = 41,
    quick_rounds: int = 5,
    target_ms: float = 20.0,
) -> Settings:
    """Parse the flags common to every benchmark script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help=f"smoke run: {quick_rounds} rounds, short batches"
    )
    parser.add_argument("--rounds", type=int, default=None, help=f"rounds per candidate (default {rounds})")
    parser.add_argument(
        "--target-ms", type=float, default=None, help=f"wall time of one batch (default {target_ms} ms)"
    )
    parser.add_argument(
        "--gc",
        choices=("collect", "off"),
        default="collect",
        help="collect: gc.collect() untimed before each batch, gc enabled while timing (default); "
        "off: gc disabled while timing",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: time.perf_counter_ns (default); cpu: time.process_time_ns, the CPU time of every "
        "thread of this process (steadier on a shared, overloaded machine; a sleep costs nothing)",
    )
    parser.add_argument("--only", default="", help="comma-separated substrings of candidate names to run")
    parser.add_argument("--no-json", action="store_true", help="do not write bench/results/*.json")
    ns = parser.parse_args(argv)
    settings = Settings(
        rounds=ns.rounds if ns.rounds is not None else (quick_rounds if ns.quick else rounds),
        warmup_rounds=1 if ns.quick else 2,
        target_ms=ns.target_ms
        if ns.target_ms is not None
        else (min(5.0, target_ms) if ns.quick else target_ms),
        gc_mode=ns.gc,
        clock=ns.clock,
        quick=ns.quick,
        only=tuple(p.strip() for p in ns.only.split(",") if p.strip()),
        write_json=not ns.no_json,
        rounds_explicit=ns.rounds is not None,
        target_explicit=ns.target_ms is not None,
    )
    return settings


# --------------------------------------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    """One thing to time."""

    name: str
    op: Op
    kind: Kind = "peer"
    batch: int | None = None
    """Ops per timed batch; calibrated from ``Settings.target_ms`` when ``None``."""
    prepare: Callable[[], Any] | None = None
    """Called untimed before every batch (e.g. to build fresh inputs so caches cannot help)."""
    note: str = ""


async def build(
    makers: Mapping[str, tuple[Kind, Maker]],
    *,
    expected: Any,
    settings: Settings | None = None,
    check: Callable[[Any], bool] | None = None,
    notes: Mapping[str, str] | None = None,
) -> list[Candidate]:
    """Run every maker (sync or async), verify its op once, and return the candidates.

    A maker whose library is not installed (``ImportError``) is skipped with a message. A wrong answer
    is an error: we never time something that does not do the work.
    """
    out: list[Candidate] = []
    for name, (kind, maker) in makers.items():
        if settings is not None and not settings.wants(name) and kind != "floor":
            continue
        try:
            made = maker()
            op = await made if inspect.isawaitable(made) else made
        except ImportError as exc:
            print(f"  skipped {name}: {exc}", file=sys.stderr)
            continue
        got = await op()
        ok = check(got) if check is not None else got == expected
        if not ok:
            raise AssertionError(f"{name}: expected {expected!r}, got {got!r}")
        out.append(Candidate(name=name, op=op, kind=kind, note=(notes or {}).get(name, "")))
    return out


# --------------------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    kind: Kind
    median_us: float
    q1_us: float
    q3_us: float
    rounds: int
    batch: int
    samples_us: list[float] = field(repr=False)
    note: str = ""

    @property
    def iqr_us(self) -> float:
        return self.q3_us - self.q1_us


async def _run_batch(op: Op, n: int, gc_mode: str, clock: str = "wall") -> int:
    """Time ``n`` sequential awaits of ``op()``; return elapsed nanoseconds (wall or process CPU)."""
    gc.collect()
    if gc_mode == "off":
        gc.disable()
    perf = time.process_time_ns if clock == "cpu" else time.perf_counter_ns
    try:
        t0 = perf()
        for _ in range(n):
            await op()
        t1 = perf()
    finally:
        if gc_mode == "off":
            gc.enable()
    return t1 - t0


async def _calibrate(c: Candidate, target_ns: float, gc_mode: str, clock: str = "wall") -> int:
    """Smallest power-of-two-ish batch that lasts at least a quarter of the target, then scaled up."""
    if c.batch is not None:
        return c.batch
    n = 1
    while True:
        if c.prepare is not None:
            c.prepare()
        ns = await _run_batch(c.op, n, gc_mode, clock)
        if ns >= target_ns / 4 or n >= 1 << 20:
            return max(1, round(n * target_ns / max(ns, 1)))
        n *= 2


async def measure(candidates: Sequence[Candidate], settings: Settings) -> list[Result]:
    """Time every candidate, interleaved round-robin; see the module docstring."""
    if not candidates:
        return []
    gc.collect()
    gc.freeze()
    try:
        target_ns = settings.target_ms * 1e6
        batches = [await _calibrate(c, target_ns, settings.gc_mode, settings.clock) for c in candidates]
        samples: list[list[float]] = [[] for _ in candidates]
        k = len(candidates)
        for r in range(settings.warmup_rounds + settings.rounds):
            start = r % k
            for i in [*range(start, k), *range(start)]:
                c = candidates[i]
                if c.prepare is not None:
                    c.prepare()
                ns = await _run_batch(c.op, batches[i], settings.gc_mode, settings.clock)
                if r >= settings.warmup_rounds:
                    samples[i].append(ns / batches[i] / 1e3)
    finally:
        gc.unfreeze()
        gc.collect()
    results = []
    for c, n, s in zip(candidates, batches, samples, strict=True):
        q1, med, q3 = quartiles(s)
        results.append(Result(c.name, c.kind, med, q1, q3, rounds=len(s), batch=n, samples_us=s, note=c.note))
    return results


def quartiles(samples: Sequence[float]) -> tuple[float, float, float]:
    """(Q1, median, Q3) of the samples."""
    if len(samples) == 1:
        return samples[0], samples[0], samples[0]
    q1, med, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, med, q3


# --------------------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------------------


@dataclass
class Memory:
    peak_bytes: int
    retained_bytes: int
    """Still allocated when ``fn`` returned and its result was still referenced."""


def peak_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Memory:
    """Peak and retained traced memory (``tracemalloc``) of one call of the synchronous ``fn``.

    The call runs with a freshly collected heap. ``retained_bytes`` is read after a ``gc.collect()``
    while the result is still referenced, so it is what the returned objects (e.g. a registry of 1,000
    tools) and any caches they filled cost to keep, not garbage awaiting collection.
    ``tracemalloc`` slows the call down a lot, so never time under it.
    """
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
        gc.collect()  # what is still allocated now is really kept alive by `result`
        current, _ = tracemalloc.get_traced_memory()
        del result
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return Memory(peak_bytes=peak - base, retained_bytes=current - base)


# --------------------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------------------


def environment() -> dict[str, Any]:
    """Facts about the run written next to the numbers."""
    versions = {}
    for pkg in (*PEER_PACKAGES, "toolrun"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": versions,
    }


_UNITS = {"us": (1.0, "µs"), "ms": (1e-3, "ms"), "s": (1e-6, "s")}


def _fmt(value: float) -> str:
    """Three significant digits (thousands separated)."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def compare(
    rows: Sequence[Result],
    floor_name: str,
    *,
    title: str = "",
    unit: Literal["us", "ms", "s"] = "us",
    per: str = "op",
    name: str | None = None,
    settings: Settings | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Print a table (median, IQR, × floor, × fastest peer) and, with ``name``, write JSON.

    ``× fastest peer`` divides by the smallest median among rows of kind ``"peer"``.
    """
    if not rows:
        print(f"{title}: nothing to report")
        return
    scale, label = _UNITS[unit]
    by_name = {r.name: r for r in rows}
    floor = by_name.get(floor_name)
    peers = [r for r in rows if r.kind == "peer"]
    best_peer = min(peers, key=lambda r: r.median_us) if peers else None

    headers = (
        "candidate",
        f"{label}/{per}",
        f"IQR {label}",
        "IQR %",
        f"× {floor_name}",
        f"× best peer ({best_peer.name})" if best_peer else "× best peer",
        "rounds × batch",
    )
    lines = []
    for r in rows:
        lines.append(
            (
                r.name,
                _fmt(r.median_us * scale),
                f"{_fmt(r.q1_us * scale)}..{_fmt(r.q3_us * scale)}",
                f"{100 * r.iqr_us / r.median_us:.0f}%" if r.median_us else "-",
                f"{r.median_us / floor.median_us:.2f}" if floor and floor.median_us else "-",
                f"{r.median_us / best_peer.median_us:.2f}" if best_peer and best_peer.median_us else "-",
                f"{r.rounds} × {r.batch}",
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    align = ["<", ">", ">", ">", ">", ">", ">"]

    def row(cells: Iterable[str]) -> str:
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths, strict=True))

    if title:
        print(f"\n{title}")
    print(row(headers))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(row(line))
    notes = [r for r in rows if r.note]
    for r in notes:
        print(f"  {r.name}: {r.note}")

    if name and (settings is None or settings.write_json):
        path = write_json(
            name,
            {
                "title": title,
                "unit": "us",
                "per": per,
                "floor": floor_name,
                "best_peer": best_peer.name if best_peer else None,
                "settings": asdict(settings) if settings else None,
                "environment": environment(),
                "extra": dict(extra or {}),
                "rows": [
                    {
                        "name": r.name,
                        "kind": r.kind,
                        "median_us": r.median_us,
                        "q1_us": r.q1_us,
                        "q3_us": r.q3_us,
                        "iqr_us": r.iqr_us,
                        "x_floor": r.median_us / floor.median_us if floor and floor.median_us else None,
                        "x_best_peer": (
                            r.median_us / best_peer.median_us if best_peer and best_peer.median_us else None
                        ),
                        "rounds": r.rounds,
                        "batch": r.batch,
                        "note": r.note,
                        "samples_us": r.samples_us,
                    }
                    for r in rows
                ],
            },
        )
        print(f"  -> {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


def write_json(name: str, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` to ``bench/results/<name>.json`` and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return path
