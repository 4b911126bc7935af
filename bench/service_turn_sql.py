"""CPU of a chat turn's own SQL in toolrun's service on SQLite, in one process (issue 21).

Runs what `ChatService` does in the database each turn — the start (claim, history, the user's message,
the run row) and the finish (lease check, three new messages, the run's end) — through the checkout's own
`toolrun.server._statements`, on the service's engine (`_db.create_engine`, inline SQLite), 500
conversations in turn, and prints the process CPU per turn. Works on checkouts before and after
`_fixed` (Core statements there), so an A/B is two runs:

    PYTHONPATH=src python bench/service_turn_sql.py [--turns 1000] [--rounds 3]
    PYTHONPATH=../main/src python bench/service_turn_sql.py
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import tempfile
import time
from typing import Any

from toolrun.server import _db
from toolrun.server import _statements as S

FIXED = hasattr(S.INSERT_MESSAGES, "executemany")
try:
    from toolrun.server._fixed import transaction
except ImportError:  # a checkout before `_fixed`

    def transaction(engine: Any) -> Any:  # type: ignore[misc]
        return engine.begin()


async def _run(conn: Any, statement: Any, params: Any) -> int:
    if FIXED:
        if isinstance(params, list):
            await statement.executemany(conn, params)
            return len(params)
        return int(await statement.execute(conn, params))
    return int((await conn.execute(statement, params)).rowcount)


async def main(args: argparse.Namespace) -> None:
    folder = tempfile.mkdtemp(prefix="toolrun-turn-sql-")
    engine = _db.create_engine(f"sqlite+aiosqlite:///{folder}/turns.db")
    conversations = 500
    async with engine.begin() as conn:
        await conn.run_sync(_db.metadata.create_all)
        for i in range(conversations):
            await conn.execute(
                _db.conversations.insert().values(
                    id=f"c{i}", user_id="u1", title="t", created_at=0, updated_at=0
                )
            )

    async def turn(i: int) -> None:
        cid, rid, now = f"c{i % conversations}", "run_" + secrets.token_hex(10), time.time()
        async with transaction(engine) as conn:
            await S.claim(conn, "u1", cid, rid, now + 15, now, pending_run_id=None)
            history, _stored = await S.load_history(conn, cid)
            seq = len(history)
            user = '{"role":"user","content":"add Buy milk"}'
            row = {"conversation_id": cid, "user_id": "u1", "run_id": rid, "created_at": now}
            await _run(conn, S.INSERT_MESSAGES, {**row, "seq": seq, "role": "user", "data": user})
            run = {"id": rid, "user_id": "u1", "conversation_id": cid, "status": "running", "model": "m"}
            await _run(conn, S.INSERT_RUN, {**run, "created_at": now, "updated_at": now})
        async with transaction(engine) as conn:
            lease = {"b_cid": cid, "b_uid": "u1", "b_owner": rid, "b_pending": None, "b_now": now}
            assert await _run(conn, S.FINISH_CONVERSATION, lease) == 1
            answer = '{"role":"assistant","content":"Done."}'
            rows = [{**row, "seq": seq + 1 + k, "role": "assistant", "data": answer} for k in range(3)]
            await _run(conn, S.INSERT_MESSAGES, rows)
            end = {"b_rid": rid, "b_status": "completed", "b_state": None, "b_error": None, "b_now": now}
            await _run(conn, S.FINISH_RUN, end)

    done = 0
    for _ in range(50):  # warm-up
        await turn(done)
        done += 1
    for r in range(args.rounds):
        started = time.process_time()
        for _ in range(args.turns):
            await turn(done)
            done += 1
        cpu = (time.process_time() - started) / args.turns
        held = 4 * done // conversations
        print(
            f"round {r}: {cpu * 1e6:.0f} µs CPU per turn (start + finish), conversations at ~{held} messages"
        )
    await engine.dispose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
