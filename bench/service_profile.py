"""Where one turn of toolrun's `POST /api/v1/chat` spends its CPU, model over HTTP (issue 21).

Starts the scripted model (`_scripted_llm.py`) and one toolrun server (`_toolrun_server.py`, SQLite,
`OpenAIModel` on its default transport or `--transport`) under `py-spy record` (collapsed stacks), drives
`--turns` turns per chat from `--concurrency` chats with bench/service.py's load generator, stops py-spy
and prints the frames with the largest share of the server's samples, counted two ways: inclusive (the
frame or anything it called) and self (the frame itself).

    python bench/service_profile.py [--concurrency 50] [--turns 4] [--rate 200] [--top 25]
    python bench/service_profile.py --src ../main/src      # profile another checkout's server
    python bench/service_profile.py --no-spy [--src ...]   # CPU per turn of a fresh server, no sampler
    python bench/service_profile.py --no-spy --pythonpath DIR   # DIR on the server's path (e.g. uvloop there)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from service import HERE, Stacks, Target, free_port, load, make_users, wait_up

from toolrun.server.migrate import upgrade


def _frame(raw: str) -> str:
    # py-spy's raw format: "function (path/to/file.py:line)"; keep the function and the file's last parts.
    name, _, where = raw.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if parts else path
    return f"{name} ({short})"


def summarise(collapsed: Path, top: int) -> str:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")]
        total += count
        if frames:
            own[frames[-1]] += count
        for f in set(frames):
            inclusive[f] += count
    lines = [f"{total} samples"]
    lines.append("-- inclusive (the frame and what it called)")
    lines += [f"{n / total:6.1%}  {f}" for f, n in inclusive.most_common(top)]
    lines.append("-- self")
    lines += [f"{n / total:6.1%}  {f}" for f, n in own.most_common(top)]
    return "\n".join(lines)


ROUTES = {
    "json": ("/api/v1/chat", "json"),
    "sse": ("/api/v1/chat/stream", "sse"),
    "ag-ui": ("/api/v1/ag-ui", "ag-ui"),
    "ai-sdk": ("/api/v1/ai-sdk", "ai-sdk"),
}


async def main(args: argparse.Namespace) -> None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    tmp = Path(tempfile.mkdtemp(prefix="toolrun-profile-"))
    stacks = Stacks(tmp)
    db = f"sqlite+aiosqlite:///{tmp}/toolrun.db"
    await upgrade(db)
    tokens = await make_users(db, args.concurrency)
    out = tmp / "collapsed.txt"
    try:
        await stacks.model()
        port = free_port()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([args.src or str(HERE.parent / "src"), *args.pythonpath]),
            "TOOLRUN_DATABASE_URL": db,
            "TOOLRUN_DATA_DIR": str(tmp / "data"),
        }
        if (os.cpu_count() or 1) > 1:
            env["BENCH_SERVER_CPU"] = "0"
        server = str(HERE / "_toolrun_server.py")
        transport = args.transport
        proc = stacks.spawn("toolrun", [server, str(port), stacks.model_url, transport], env)
        base = f"http://127.0.0.1:{port}"
        await wait_up(base, proc)
        path, protocol = ROUTES[args.route]
        target = Target("toolrun", [base], path, protocol, tokens, [proc.pid], toolrun=True)
        await load(target, 10, 1)  # warm-up, not profiled
        if args.no_spy:  # the same load without the sampler: CPU per turn of a fresh server, for A/B runs
            started = time.perf_counter()
            row = await load(target, args.concurrency, args.turns)
            wall = time.perf_counter() - started
            print(
                f"{args.src or 'this checkout'}: {row['turns']} turns in {wall:.1f} s, "
                f"{row['turns_per_s']:.1f} turns/s, {row['cpu_ms_per_turn']:.2f} ms server CPU per turn, "
                f"{row['errors']} errors {' '.join(row['error_kinds'])}".rstrip()
            )
            return
        spy = await asyncio.create_subprocess_exec(
            pyspy, "record", "--pid", str(proc.pid), "--rate", str(args.rate), "--format", "raw",
            "--output", str(out),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await asyncio.sleep(1.0)
        started = time.perf_counter()
        row = await load(target, args.concurrency, args.turns)
        wall = time.perf_counter() - started
        spy.send_signal(signal.SIGINT)
        await spy.wait()
    finally:
        stacks.stop()
    print(
        f"{row['turns']} turns in {wall:.1f} s, {row['turns_per_s']:.1f} turns/s, "
        f"{row['cpu_ms_per_turn']:.2f} ms server CPU per turn, {row['errors']} errors "
        f"{' '.join(row['error_kinds'])}".rstrip()
    )
    print(summarise(out, args.top))
    print(f"(collapsed stacks: {out})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--route", choices=sorted(ROUTES), default="json", help="the chat route to drive")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--src", default="", help="the src/ of another checkout to profile")
    parser.add_argument("--no-spy", action="store_true", help="no profile: only CPU per turn (A/B runs)")
    parser.add_argument(
        "--transport",
        default="default",
        help="OpenAIModel transport: default (its own: aiohttp where installed), httpx, aiohttp, sdk",
    )
    parser.add_argument(
        "--pythonpath",
        action="append",
        default=[],
        help="another entry for the server's PYTHONPATH, after the source (e.g. a folder with uvloop)",
    )
    main_args = parser.parse_args()
    asyncio.run(main(main_args))
