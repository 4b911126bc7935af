"""`ExecutorLease`: the runs of durable-run processes that died, finished by a live one. Internal: import
from `toolrun.integrations.dbos`."""

from __future__ import annotations

import contextlib
import threading
import time

import sqlalchemy as sa
from dbos import DBOS

from toolrun.integrations._dbos_steps import sync_url
from toolrun.store._schema import create_all_locked

__all__ = ["ExecutorLease"]


class ExecutorLease:
    """Finish the runs of processes that died: every process renews a lease on its DBOS executor id; a
    process whose lease ran out has its pending runs recovered by one live process (DBOS re-queues them,
    and one process takes each).

    ```python
    lease = ExecutorLease(database_url, executor_id="web-1", seconds=30)
    lease.start()      # after DBOS.launch(); lease.stop() before DBOS.destroy()
    ```

    Args:
        database_url: Where the leases live (the DBOS system database will do): sync or async URL.
        executor_id: This process's DBOS executor id (as in `dbos_config`).
        seconds: How long a lease lasts; renewed every third of it.
    """

    def __init__(self, database_url: str, *, executor_id: str, seconds: float = 30.0) -> None:
        if not seconds > 0:
            raise ValueError("seconds must be positive.")
        self.executor_id = executor_id
        self.seconds = seconds
        self._engine = sa.create_engine(sync_url(database_url))
        self._table = sa.Table(
            "toolrun_executor_leases",
            sa.MetaData(),
            sa.Column("executor_id", sa.String(200), primary_key=True),
            sa.Column("until", sa.Float, nullable=False),
        )
        with self._engine.begin() as db:  # processes starting together make it once
            create_all_locked(db, self._table.metadata)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the lease and start renewing it (and recovering others') in a background thread."""
        self.tick()
        self._thread = threading.Thread(target=self._loop, name="toolrun-executor-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing, and give the lease up (a clean shutdown leaves no runs behind to recover)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._engine.begin() as db:
            db.execute(sa.delete(self._table).where(self._table.c.executor_id == self.executor_id))
        self._engine.dispose()

    def tick(self) -> list[str]:
        """Renew this lease once and recover the runs of expired ones; the executor ids recovered."""
        now = time.time()
        t = self._table
        with self._engine.begin() as db:
            # RETURNING, not rowcount: what a driver reports as rowcount varies (psycopg 3 can say -1).
            renewed = db.execute(
                sa.update(t)
                .where(t.c.executor_id == self.executor_id)
                .values(until=now + self.seconds)
                .returning(t.c.executor_id)
            ).first()
            if renewed is None:
                db.execute(sa.insert(t).values(executor_id=self.executor_id, until=now + self.seconds))
            expired = db.execute(
                sa.select(t.c.executor_id, t.c.until).where(
                    t.c.until < now, t.c.executor_id != self.executor_id
                )
            ).all()
        taken: list[str] = []
        for executor_id, until in expired:
            with self._engine.begin() as db:
                # Of several live processes, the one whose delete matches takes the dead one's runs.
                gone = db.execute(
                    sa.delete(t)
                    .where(t.c.executor_id == executor_id, t.c.until == until)
                    .returning(t.c.executor_id)
                ).first()
            if gone is not None:
                DBOS._recover_pending_workflows([executor_id])
                taken.append(executor_id)
        return taken

    def _loop(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            with contextlib.suppress(Exception):  # a database blip: try again next time
                self.tick()
