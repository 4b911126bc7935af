"""The chat service under load, with the model over HTTP, against the stacks a team would otherwise deploy.

Every stack is one uvicorn worker on its own SQLite file, pinned to CPU 0 when the machine allows; the model
is bench/_scripted_llm.py (OpenAI-compatible, HTTP/1.1 keep-alive, pinned to the last CPU). Each turn is a
user message -> one `create_task` tool call (a row in the store) -> the model's answer. Compared in ONE run,
interleaved (every round runs every stack in a rotated order, so drift on a shared machine hits all alike):

- toolrun `POST /api/v1/chat` (JSON), `/api/v1/chat/stream` (SSE), `/api/v1/ag-ui`, `/api/v1/ai-sdk`, with
  `OpenAIModel`'s default transport (aiohttp); `toolrun_sdk` is the JSON route through the `openai` SDK;
- FastAPI + OpenAI Agents `Runner.run`, FastAPI + Pydantic AI `Agent.run`, each with its SDK's model client;
- `floor`: a FastAPI route doing the turn by hand (bench/_peer_service.py says exactly what each does).

Load: a raw asyncio generator, one httpx client (one connection) per chat, `--concurrency` chats at once,
each sending `--turns` messages in one conversation (AG-UI / AI SDK: one thread). Reported per stack and
concurrency: turns/s (median of rounds), p50 and p99 latency of a turn as the client sees it (all rounds
pooled), server CPU per turn (user+system time of the server process from /proc, so other tenants of the
machine do not count), errors (non-2xx, broken streams, error events, a turn whose tool did not run). At
the end the toolrun database is checked: one task, one run, four messages and one audit record per
successful toolrun turn.

    python bench/service.py [--rounds 3] [--concurrency 50,200] [--turns 3]
    python bench/service.py --baseline-src ../main/src   # + the JSON route of another checkout, same run
    python bench/service.py --processes 1,2        # N toolrun processes on PostgreSQL + Redis: scaling

`--processes` needs TOOLRUN_BENCH_POSTGRES_URL (postgresql+asyncpg://...) and TOOLRUN_BENCH_REDIS_URL; it
runs N server processes behind no balancer (the chats are spread over their ports) and prints turns/s and
the efficiency against N x one process. It means something only where the machine has N + 2 free cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

HERE = Path(__file__).resolve().parent
TASK_ID = re.compile(r"task_[0-9a-f]+")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc): the server's own cost, whatever else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def make_users(url: str, count: int) -> list[str]:
    engine = create_engine(url)
    try:
        users = UserStore(engine)
        return [(await users.add(f"bench{i}"))[1] for i in range(count)]
    finally:
        await engine.dispose()


def start(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "w") as log:
        return subprocess.Popen(args, env=env, stdout=log, stderr=log)


async def wait_up(url: str, proc: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 300  # importing an agent framework takes a while on a busy machine
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server {url} exited with {proc.returncode}")
            try:
                await client.get(url + "/openapi.json")
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
    raise RuntimeError(f"server {url} did not start")


# ------------------------------------------------------------------------------------------------------
# One chat turn per protocol: (request kwargs, how to read the answer)


@dataclass
class Target:
    name: str
    bases: list[str]
    path: str
    protocol: str  # json | peer | sse | ag-ui | ai-sdk
    tokens: list[str]
    pids: list[int]
    toolrun: bool = False
    rows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    latencies: dict[int, list[float]] = field(default_factory=dict)
    ok_turns: int = 0


def _body(target: Target, chat: int, turn: int, conversation: str | None) -> dict[str, Any]:
    text = f"Bench task {chat}-{turn}-{time.monotonic_ns() % 1_000_000}"
    if target.protocol == "ag-ui":
        return {
            "threadId": conversation or f"th-{chat}-{time.monotonic_ns()}",
            "runId": f"r-{turn}",
            "messages": [{"id": f"m-{turn}", "role": "user", "content": text}],
            "tools": [],
            "context": [],
            "state": {},
            "forwardedProps": {},
        }
    if target.protocol == "ai-sdk":
        return {
            "id": conversation or f"chat-{chat}-{time.monotonic_ns()}",
            "messages": [{"id": f"m-{turn}", "role": "user", "parts": [{"type": "text", "text": text}]}],
            "trigger": "submit-message",
        }
    body: dict[str, Any] = {"message": text}
    if conversation:
        body["conversation_id"] = conversation
    return body


def _check(target: Target, status: int, raw: bytes) -> tuple[str | None, str | None]:
    """(error, conversation id) for one answer; an answer is good when the task was created and the
    model's final text arrived."""
    if status != 200:
        return f"HTTP {status}", None
    text = raw.decode("utf-8", "replace")
    if target.protocol in ("json", "peer"):
        data = json.loads(text)
        if "Done:" not in (data.get("output") or "") or not TASK_ID.search(data.get("output") or ""):
            return "no task in: " + str(data.get("output"))[:80], None
        return None, data["conversation_id"]
    bad, good = {
        "sse": (r"event: error", r"event: run_finished"),
        "ag-ui": (r'"type":\s*"RUN_ERROR"', r'"type":\s*"RUN_FINISHED"'),
        "ai-sdk": (r'"type":\s*"error"', r'"type":\s*"finish"'),
    }[target.protocol]
    if re.search(bad, text):
        return "error event", None
    if not re.search(good, text):
        return "stream ended without its finish event", None
    if "Done:" not in text or not TASK_ID.search(text):
        return "no task in the stream", None
    if target.protocol == "sse":
        m = re.search(r'"conversation_id":\s*"(conv_[0-9a-z]+)"', text)
        return None, m.group(1) if m else None
    return None, None


async def chat(
    client: httpx.AsyncClient,
    target: Target,
    token: str,
    chat_no: int,
    turns: int,
    latencies: list[float],
    errors: list[str],
) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    conversation: str | None = None
    thread = f"t-{chat_no}-{time.monotonic_ns()}"
    good = 0
    for turn in range(turns):
        if target.protocol in ("ag-ui", "ai-sdk"):
            conversation = thread
        body = _body(target, chat_no, turn, conversation)
        start = time.perf_counter()
        try:
            async with client.stream("POST", target.path, json=body, headers=headers) as r:
                raw = await r.aread()
        except httpx.HTTPError as exc:
            errors.append(type(exc).__name__)
            continue
        latencies.append(time.perf_counter() - start)
        error, cid = _check(target, r.status_code, raw)
        if error is not None:
            errors.append(error)
            continue
        good += 1
        if target.protocol in ("json", "peer", "sse"):
            conversation = cid
    return good


async def load(target: Target, concurrency: int, turns: int) -> dict[str, Any]:
    clients = [
        httpx.AsyncClient(base_url=target.bases[i % len(target.bases)], timeout=120)
        for i in range(concurrency)
    ]
    tokens = [target.tokens[i % len(target.tokens)] for i in range(concurrency)]
    try:
        latencies: list[float] = []
        errors: list[str] = []
        cpu_before = sum(cpu_seconds(p) for p in target.pids)
        start = time.perf_counter()
        goods = await asyncio.gather(
            *(
                chat(c, target, t, i, turns, latencies, errors)
                for i, (c, t) in enumerate(zip(clients, tokens, strict=True))
            )
        )
        wall = time.perf_counter() - start
        cpu = sum(cpu_seconds(p) for p in target.pids) - cpu_before
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    target.ok_turns += sum(goods)
    target.latencies.setdefault(concurrency, []).extend(latencies)
    row = {
        "turns": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors))[:5],
        "turns_per_s": len(latencies) / wall,
        "cpu_ms_per_turn": cpu / max(1, len(latencies)) * 1000,
    }
    target.rows.setdefault(concurrency, []).append(row)
    return row


def summary(target: Target, concurrency: int) -> dict[str, Any]:
    rows = target.rows[concurrency]
    lat = sorted(target.latencies[concurrency]) or [0.0]
    return {
        "turns_per_s": statistics.median(r["turns_per_s"] for r in rows),
        "p50_ms": statistics.median(lat) * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        "cpu_ms_per_turn": statistics.median(r["cpu_ms_per_turn"] for r in rows),
        "errors": sum(r["errors"] for r in rows),
        "turns": sum(r["turns"] for r in rows),
        "error_kinds": sorted({k for r in rows for k in r["error_kinds"]})[:5],
    }


# ------------------------------------------------------------------------------------------------------
# The stacks


class Stacks:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.model_url = ""

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = start([sys.executable, "-P", *args], env, self.tmp / f"{name}.log")
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()

    async def model(self) -> None:
        port = free_port()
        self.model_url = f"http://127.0.0.1:{port}/v1"
        self.spawn("model", [str(HERE / "_scripted_llm.py"), str(port)], dict(os.environ))
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return
            except OSError:
                await asyncio.sleep(0.05)
        raise RuntimeError("the scripted model did not start")

    async def toolrun(
        self,
        name: str,
        env_extra: dict[str, str],
        transport: str,
        *,
        cpu: str | None = "0",
        src: str | None = None,
    ) -> tuple[str, int]:
        port = free_port()
        env = {**os.environ, "PYTHONPATH": src or str(HERE.parent / "src"), **env_extra}
        if cpu is not None and (os.cpu_count() or 1) > 1:
            env["BENCH_SERVER_CPU"] = cpu
        proc = self.spawn(
            name,
            [
                os.environ.get("BENCH_TOOLRUN_SERVER", str(HERE / "_toolrun_server.py")),
                str(port),
                self.model_url,
                transport,
            ],
            env,
        )
        base = f"http://127.0.0.1:{port}"
        await wait_up(base, proc)
        return base, proc.pid

    async def peer(self, kind: str, db: str, tokens_json: Path) -> tuple[str, int]:
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
        if (os.cpu_count() or 1) > 1:
            env["BENCH_SERVER_CPU"] = "0"
        proc = self.spawn(
            kind, [str(HERE / "_peer_service.py"), kind, str(port), db, str(tokens_json), self.model_url], env
        )
        base = f"http://127.0.0.1:{port}"
        await wait_up(base, proc)
        return base, proc.pid


async def run_rounds(targets: list[Target], concurrencies: list[int], turns: int, rounds: int) -> None:
    # Warm-up: every stack serves a few turns untimed (imports, JIT-free caches, connection pools).
    for target in targets:
        await load(target, 10, 1)
        target.rows.clear()
        target.latencies.clear()
    for r in range(rounds):
        for concurrency in concurrencies:
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for target in order:
                row = await load(target, concurrency, turns)
                print(
                    f"  round {r + 1} c={concurrency:<4} {target.name:<16} {row['turns_per_s']:8.1f} turns/s "
                    f"{row['cpu_ms_per_turn']:6.2f} ms CPU/turn  errors {row['errors']}",
                    flush=True,
                )


def check_persisted(db_path: Path, ok_turns: int) -> dict[str, int]:
    with sqlite3.connect(db_path) as conn:
        counts = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("toolrun_tasks", "toolrun_runs", "toolrun_messages", "toolrun_audit")
        }
    counts["ok_turns"] = ok_turns
    return counts


async def main_compare(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="toolrun-bench-"))
    stacks = Stacks(tmp)
    users = max(args.concurrency)
    ours_db_path = tmp / "toolrun.db"
    ours_db = f"sqlite+aiosqlite:///{ours_db_path}"
    await upgrade(ours_db)
    tokens = await make_users(ours_db, users)
    peer_tokens = {f"peer_{i:04d}_token": f"peer_user_{i}" for i in range(users)}
    (tmp / "tokens.json").write_text(json.dumps(peer_tokens))
    targets: list[Target] = []
    try:
        await stacks.model()
        env = {"TOOLRUN_DATABASE_URL": ours_db, "TOOLRUN_DATA_DIR": str(tmp / "data")}
        base, pid = await stacks.toolrun("toolrun", env, "default")
        for name, path, protocol in (
            ("toolrun", "/api/v1/chat", "json"),
            ("toolrun_sse", "/api/v1/chat/stream", "sse"),
            ("toolrun_ag_ui", "/api/v1/ag-ui", "ag-ui"),
            ("toolrun_ai_sdk", "/api/v1/ai-sdk", "ai-sdk"),
        ):
            if args.only and not any(o in name for o in args.only.split(",")):
                continue
            targets.append(Target(name, [base], path, protocol, tokens, [pid], toolrun=True))
        if not args.only or "toolrun_sdk" in args.only:
            sdk_db = tmp / "toolrun_sdk.db"
            await upgrade(f"sqlite+aiosqlite:///{sdk_db}")
            sdk_tokens = await make_users(f"sqlite+aiosqlite:///{sdk_db}", users)
            env = {
                "TOOLRUN_DATABASE_URL": f"sqlite+aiosqlite:///{sdk_db}",
                "TOOLRUN_DATA_DIR": str(tmp / "d2"),
            }
            base, pid = await stacks.toolrun("toolrun_sdk", env, "sdk")
            targets.append(Target("toolrun_sdk", [base], "/api/v1/chat", "json", sdk_tokens, [pid]))
        if args.baseline_src:
            old_db = tmp / "toolrun_before.db"
            await upgrade(f"sqlite+aiosqlite:///{old_db}")
            old_tokens = await make_users(f"sqlite+aiosqlite:///{old_db}", users)
            env = {
                "TOOLRUN_DATABASE_URL": f"sqlite+aiosqlite:///{old_db}",
                "TOOLRUN_DATA_DIR": str(tmp / "d3"),
            }
            base, pid = await stacks.toolrun("toolrun_before", env, "default", src=args.baseline_src)
            targets.append(Target("toolrun_before", [base], "/api/v1/chat", "json", old_tokens, [pid]))
        for kind in ("agents", "pydantic_ai", "floor"):
            if args.only and not any(o in kind for o in args.only.split(",")):
                continue
            db = f"sqlite+aiosqlite:///{tmp}/{kind}.db"
            await upgrade(db)
            base, pid = await stacks.peer(kind, db, tmp / "tokens.json")
            targets.append(Target(kind, [base], "/chat", "peer", list(peer_tokens), [pid]))
        await run_rounds(targets, args.concurrency, args.turns, args.rounds)
        await asyncio.sleep(1.0)  # the audit writer flushes every 0.25 s
        ours_ok = sum(t.ok_turns for t in targets if t.toolrun)
        persisted = check_persisted(ours_db_path, ours_ok) if any(t.toolrun for t in targets) else {}
    finally:
        stacks.stop()
    return {
        "machine": f"{os.cpu_count()} CPUs, shared: {os.getloadavg()[0]:.1f} load average at the end",
        "results": {t.name: {c: summary(t, c) for c in args.concurrency} for t in targets},
        "persisted": persisted,
    }


async def main_scaling(args: argparse.Namespace) -> dict[str, Any]:
    pg = os.environ.get("TOOLRUN_BENCH_POSTGRES_URL")
    redis = os.environ.get("TOOLRUN_BENCH_REDIS_URL")
    if not pg or not redis:
        raise SystemExit("--processes needs TOOLRUN_BENCH_POSTGRES_URL and TOOLRUN_BENCH_REDIS_URL")
    tmp = Path(tempfile.mkdtemp(prefix="toolrun-bench-"))
    stacks = Stacks(tmp)
    await upgrade(pg)
    users = max(args.concurrency)
    tag = f"{os.getpid()}_{int(time.time())}"
    engine = create_engine(pg)
    try:
        store = UserStore(engine)
        tokens = [(await store.add(f"scale{tag}_{i}"))[1] for i in range(users)]
    finally:
        await engine.dispose()
    env = {
        "TOOLRUN_DATABASE_URL": pg,
        "TOOLRUN_REDIS_URL": redis,
        "TOOLRUN_REDIS_PREFIX": f"bench{tag}:",
        "TOOLRUN_SECRET_KEY": "bench-secret-key-0123456789",
        "TOOLRUN_DATA_DIR": str(tmp / "data"),
    }
    targets: list[Target] = []
    try:
        await stacks.model()
        servers = [
            await stacks.toolrun(f"toolrun{i}", env, "default", cpu=None) for i in range(max(args.processes))
        ]
        for n in args.processes:
            chosen = servers[:n]
            targets.append(
                Target(
                    f"{n} process(es)",
                    [b for b, _ in chosen],
                    "/api/v1/chat",
                    "json",
                    tokens,
                    [p for _, p in chosen],
                )
            )
        await run_rounds(targets, args.concurrency, args.turns, args.rounds)
    finally:
        stacks.stop()
    results = {t.name: {c: summary(t, c) for c in args.concurrency} for t in targets}
    return {"machine": f"{os.cpu_count()} CPUs, shared", "results": results, "processes": args.processes}


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    results = out["results"]
    print(f"\n{out['machine']}; one uvicorn worker per stack; model over HTTP; {args.turns} turns per chat\n")
    for c in args.concurrency:
        print(f"-- {c} concurrent chats")
        print(f"{'stack':<18}{'turns/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU ms/turn':>13}{'errors':>8}")
        for name, per in results.items():
            r = per[c]
            print(
                f"{name:<18}{r['turns_per_s']:>9.1f}{r['p50_ms']:>9.0f}{r['p99_ms']:>9.0f}"
                f"{r['cpu_ms_per_turn']:>13.2f}{r['errors']:>8}  {' '.join(r['error_kinds'])}"
            )
        peers = [n for n in ("agents", "pydantic_ai") if n in results]
        if "toolrun" in results and peers:
            ours = results["toolrun"][c]
            fastest = max(peers, key=lambda n: results[n][c]["turns_per_s"])
            best_p99 = min(results[n][c]["p99_ms"] for n in peers)
            ratio = ours["turns_per_s"] / results[fastest][c]["turns_per_s"]
            print(
                f"toolrun / {fastest}: {ratio:.2f}x turns/s; "
                f"p99 {ours['p99_ms']:.0f} ms vs best peer {best_p99:.0f} ms; "
                f"CPU/turn {ours['cpu_ms_per_turn']:.2f} vs {results[fastest][c]['cpu_ms_per_turn']:.2f} ms"
            )
        if "processes" in out:
            one = results.get("1 process(es)", {}).get(c)
            for name, per in results.items():
                n = int(name.split()[0])
                if one and n > 1:
                    eff = per[c]["turns_per_s"] / (n * one["turns_per_s"])
                    print(f"{name}: scaling efficiency {eff:.2f} of linear")
        print()
    if out.get("persisted"):
        print("toolrun database after the run:", out["persisted"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[50, 200])
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated substrings of stack names")
    parser.add_argument(
        "--baseline-src",
        default="",
        help="the src/ of another toolrun checkout: its JSON route joins the run as `toolrun_before`",
    )
    parser.add_argument("--processes", type=lambda s: [int(x) for x in s.split(",")], default=None)
    args = parser.parse_args()
    out = asyncio.run(main_scaling(args) if args.processes else main_compare(args))
    report(out, args)
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    name = "service_scaling.json" if args.processes else "service.json"
    (results_dir / name).write_text(json.dumps(out, indent=2, default=str))
