"""The chat service under load: 200 concurrent chats x 5 turns against ONE worker, demo model, SQLite.

Compared, in the same run, with the stack a team would otherwise pick (bench/_peer_service.py): a FastAPI
route running a Pydantic AI agent with the same task tools (same store, schema and full-text index) and a
scripted FunctionModel following the same grammar, history kept as Pydantic AI message JSON.

Each chat is one user: `add …`, `list tasks`, `search …`, `done <id>`, `list done tasks`. Reported: errors,
turns/s (all turns / wall time), p50 and p99 latency of a turn as the client sees it.

    python bench/service.py [--chats 200] [--turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

HERE = Path(__file__).resolve().parent
TASK_ID = re.compile(r"Created (task_[0-9a-f]+)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc): the server's own cost, whatever else runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def make_users(url: str, count: int) -> list[tuple[str, str]]:
    engine = create_engine(url)
    try:
        users = UserStore(engine)
        out = []
        for i in range(count):
            principal, token = await users.add(f"bench{i}")
            out.append((principal.user_id, token))
        return out
    finally:
        await engine.dispose()


async def wait_up(url: str, proc: subprocess.Popen[Any], path: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(400):
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            try:
                await client.get(url + path)
                return
            except httpx.HTTPError:
                await asyncio.sleep(0.05)
    raise RuntimeError("server did not start")


async def chat_session(
    client: httpx.AsyncClient,
    path: str,
    token: str,
    i: int,
    turns: int,
    latencies: list[float],
    errors: list[str],
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    conversation: str | None = None
    task_id = "task_000000000000"
    script = [
        f"add Bench task {i} !high #bench",
        "list tasks",
        "search bench",
        "done {id}",
        "list done tasks",
    ]
    for turn in range(turns):
        message = script[turn % len(script)].replace("{id}", task_id)
        body: dict[str, Any] = {"message": message}
        if conversation:
            body["conversation_id"] = conversation
        start = time.perf_counter()
        try:
            r = await client.post(path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            errors.append(type(exc).__name__)
            continue
        latencies.append(time.perf_counter() - start)
        if r.status_code != 200:
            errors.append(f"HTTP {r.status_code}")
            continue
        data = r.json()
        conversation = data["conversation_id"]
        output = data.get("output") or ""
        if m := TASK_ID.search(output):
            task_id = m.group(1)
        if turn == 3 and "Updated" not in output:
            errors.append("done did not update: " + output[:120])


async def load(base: str, path: str, tokens: list[str], turns: int, pid: int) -> dict[str, Any]:
    # One client (one connection) per chat, as 200 browsers would be: a single httpx pool shared by 200
    # connections spends more CPU finding a free connection than the servers spend answering.
    clients = [httpx.AsyncClient(base_url=base, timeout=120) for _ in tokens]
    try:
        warm_lat: list[float] = []
        warm_err: list[str] = []
        await asyncio.gather(
            *(
                chat_session(c, path, t, -1, 1, warm_lat, warm_err)
                for c, t in zip(clients, tokens, strict=True)
            )
        )
        latencies: list[float] = []
        errors: list[str] = []
        cpu_before = cpu_seconds(pid)
        start = time.perf_counter()
        await asyncio.gather(
            *(
                chat_session(c, path, t, i, turns, latencies, errors)
                for i, (c, t) in enumerate(zip(clients, tokens, strict=True))
            )
        )
        wall = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu_before
    finally:
        for c in clients:
            await c.aclose()
    lat = sorted(latencies)
    return {
        "turns": len(lat),
        "errors": len(errors) + len(warm_err),
        "error_kinds": sorted(set(errors + warm_err)),
        "wall_s": round(wall, 3),
        "turns_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(lat) * 1000, 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000, 1),
        "server_cpu_ms_per_turn": round(cpu / max(1, len(lat)) * 1000, 2),
    }


def start(args: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "w") as log:
        return subprocess.Popen(args, env=env, stdout=log, stderr=log)


async def main(chats: int, turns: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="toolrun-bench-"))
    ours_db = f"sqlite+aiosqlite:///{tmp}/toolrun.db"
    peer_db = f"sqlite+aiosqlite:///{tmp}/peer.db"
    await upgrade(ours_db)
    await upgrade(peer_db)
    ours_users = await make_users(ours_db, chats)
    peer_tokens = {f"peer_{i:04d}_token": f"peer_user_{i}" for i in range(chats)}
    (tmp / "tokens.json").write_text(json.dumps(peer_tokens))

    results: dict[str, Any] = {}
    port = free_port()
    env = {
        **os.environ,
        "TOOLRUN_DATABASE_URL": ours_db,
        "TOOLRUN_DATA_DIR": str(tmp / "data"),
        "TOOLRUN_MODEL": "demo",
    }
    proc = start(
        [sys.executable, "-c", "from toolrun.cli import main; main()", "serve", "--port", str(port)],
        env,
        tmp / "toolrun.log",
    )
    try:
        await wait_up(f"http://127.0.0.1:{port}", proc, "/healthz")
        results["toolrun"] = await load(
            f"http://127.0.0.1:{port}", "/api/v1/chat", [t for _, t in ours_users], turns, proc.pid
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    port = free_port()
    proc = start(
        [sys.executable, str(HERE / "_peer_service.py"), str(port), peer_db, str(tmp / "tokens.json")],
        dict(os.environ),
        tmp / "peer.log",
    )
    try:
        await wait_up(f"http://127.0.0.1:{port}", proc, "/docs")
        results["fastapi_pydantic_ai"] = await load(
            f"http://127.0.0.1:{port}", "/chat", list(peer_tokens), turns, proc.pid
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return results


def report(results: dict[str, Any], chats: int, turns: int) -> None:
    print(f"\n{chats} concurrent chats x {turns} turns, one worker, SQLite, demo/scripted model\n")
    print(f"{'stack':<24}{'errors':>8}{'turns/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'server CPU ms/turn':>20}")
    for name, r in results.items():
        print(
            f"{name:<24}{r['errors']:>8}{r['turns_per_s']:>10}{r['p50_ms']:>10}{r['p99_ms']:>10}"
            f"{r['server_cpu_ms_per_turn']:>20}"
        )
    ours, peer = results["toolrun"], results["fastapi_pydantic_ai"]
    print(
        f"\ntoolrun / peer: {ours['turns_per_s'] / peer['turns_per_s']:.2f}x turns/s, "
        f"p99 {ours['p99_ms']} ms vs {peer['p99_ms']} ms, "
        f"{peer['server_cpu_ms_per_turn'] / ours['server_cpu_ms_per_turn']:.2f}x less server CPU per turn"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    out = asyncio.run(main(args.chats, args.turns))
    report(out, args.chats, args.turns)
    results_dir = HERE / "results"
    results_dir.mkdir(exist_ok=True)
    (results_dir / "service.json").write_text(json.dumps(out, indent=2))
