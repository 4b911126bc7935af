"""A process starting durable runs the way the service does (`python _dbos_start_worker.py URL EXECUTOR`):
the job store and the executor lease make their tables, DBOS launches on the same database, a job row is
recorded (the start a background tool makes); then it stops cleanly and exits 0."""

from __future__ import annotations

import asyncio
import sys


async def main(url: str, executor: str) -> None:
    from dbos import DBOS

    from toolrun.integrations.dbos import ExecutorLease, JobStore, dbos_config

    jobs = JobStore(url)
    DBOS(config=dbos_config(url, executor_id=executor))
    DBOS.launch()
    lease = ExecutorLease(url, executor_id=executor, seconds=5)
    lease.start()
    try:
        await jobs.create(
            f"job_{executor}", user_id=executor, tool="crunch", conversation_id=None, run_id=None
        )
        assert (await jobs.get(f"job_{executor}", executor)) is not None
    finally:
        lease.stop()
        DBOS.destroy()
        jobs.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
