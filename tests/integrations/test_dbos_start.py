"""Eight processes starting durable runs at the same instant on a fresh PostgreSQL database (psycopg 3, as
DBOS connects): every one comes up, makes its job row and exits 0; the tables are made once."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from processes import outcomes, scratch_postgres, start_together

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

WORKER = Path(__file__).with_name("_dbos_start_worker.py")
PROCESSES = 8


def test_processes_starting_together_on_a_fresh_database_all_come_up(tmp_path: Path) -> None:
    with scratch_postgres("hpg_dbos_start") as url:
        commands = [[str(WORKER), url, f"w{i}"] for i in range(PROCESSES)]
        results = outcomes(start_together(commands, tmp_path), timeout=400)
        failed = [(code, err[-3000:]) for code, _, err in results if code != 0]
        assert failed == [], failed
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                jobs = conn.execute(sa.text("SELECT id FROM toolrun_jobs ORDER BY id")).scalars().all()
        finally:
            engine.dispose()
        assert jobs == [f"job_w{i}" for i in range(PROCESSES)]
