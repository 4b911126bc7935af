"""How long ``import toolrun`` takes: the median over fresh interpreters.

Each sample is a new ``python -X importtime -c "import <module>"`` process; the figure is the cumulative
time of the ``<module>`` line (what the import itself costs, without the interpreter's start-up). The
machine is shared and noisy, so the script reports the median and the interquartile range of ``--runs``
samples (default 15), and the modules a bare ``import toolrun`` leaves unloaded on purpose (``LAZY``).

Run: ``PYTHONPATH=src python bench/import_time.py [--runs N] [--module toolrun] [--budget-ms 250]``.
With ``--budget-ms`` the script exits 1 when the median is over the budget (off by default: a noisy
machine is not a failing build).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Heavy dependencies ``import toolrun`` does not load: each is imported by the path that needs it.
LAZY = (
    "jsonschema",
    "multiprocessing",
    "concurrent.futures",
    "email.utils",
    "toolrun.agent",
    "toolrun.models",
    "toolrun.planning",
    "toolrun.runtime",
    "sqlalchemy",
    "redis",
    "httpx",
    "openai",
    "anthropic",
    "mcp",
    "fastapi",
    "langchain_core",
    "langgraph",
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _cpu_ms(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=_env())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu * 1000.0


def sample(module: str) -> tuple[float, float]:
    """One fresh interpreter: the cumulative import time of ``module`` and the process's CPU time, in ms.

    The CPU time (user + system, start-up included) is less disturbed by other load on the machine
    than the wall-clock importtime figure; the baseline start-up is measured apart and subtracted.
    """
    out, cpu = _cpu_ms([sys.executable, "-X", "importtime", "-c", f"import {module}"])
    for line in out.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1]) / 1000.0, cpu
    raise RuntimeError(f"no importtime line for {module!r}")


def loaded(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` a fresh ``import module`` puts in ``sys.modules``."""
    code = f"import sys, json, {module}\nprint(json.dumps([m for m in {list(names)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_env())
    result: list[str] = json.loads(out.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--module", default="toolrun")
    parser.add_argument("--budget-ms", type=float, default=None)
    parser.add_argument("--no-json", action="store_true")
    args = parser.parse_args()

    sample(args.module)  # warm the file-system cache and the .pyc files; not counted
    pairs = [sample(args.module) for _ in range(args.runs)]
    bare = statistics.median(
        _cpu_ms([sys.executable, "-X", "importtime", "-c", "pass"])[1] for _ in range(args.runs)
    )
    samples = sorted(p[0] for p in pairs)
    cpu = statistics.median(p[1] for p in pairs) - bare
    median = statistics.median(samples)
    q1, _, q3 = statistics.quantiles(samples, n=4) if len(samples) > 1 else (median, median, median)
    lazy_loaded = loaded(args.module, LAZY)
    print(
        f"import {args.module}: median {median:.1f} ms  IQR {q1:.1f}..{q3:.1f} ms"
        f"  ({args.runs} fresh interpreters)"
    )
    print(
        f"  min {samples[0]:.1f} ms  max {samples[-1]:.1f} ms  CPU time over a bare interpreter {cpu:.1f} ms"
    )
    print(f"  heavy modules loaded by the import: {lazy_loaded or 'none'}")
    if not args.no_json:
        results = ROOT / "bench" / "results"
        results.mkdir(exist_ok=True)
        (results / "import_time.json").write_text(
            json.dumps(
                {
                    "module": args.module,
                    "runs": args.runs,
                    "median_ms": median,
                    "q1_ms": q1,
                    "q3_ms": q3,
                    "samples_ms": samples,
                    "cpu_over_bare_ms": cpu,
                    "python": sys.version,
                    "lazy_loaded": lazy_loaded,
                },
                indent=2,
            )
        )
    if args.budget_ms is not None and median > args.budget_ms:
        print(f"over budget: {median:.1f} ms > {args.budget_ms:.1f} ms")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
