"""Load shedding: a process admits at most `max_runs` chat runs at once; past that, new ones get a `503`
with `Retry-After` at once instead of queueing behind the others.

A run counts from the moment it is admitted (before its conversation is claimed) until its task ends, also
when its client has gone (the run goes on to its next safe point). Queueing more runs than a process can
serve only grows every run's latency until clients time out; refusing the excess keeps the admitted runs
fast and tells the rest, cheaply, when to come back (a load balancer or the client retries elsewhere or
later).

The default (`TOOLRUN_MAX_RUNS=256`) is above the 200 concurrent chats one worker is sized for
(bench/README.md); lower it to what your model's latency and throughput allow: about turns/s x the
latency you accept.
"""

from __future__ import annotations

from toolrun.server._errors import ServiceError

__all__ = ["Admission", "overloaded"]


def overloaded(retry_after: int) -> ServiceError:
    return ServiceError(
        503,
        "overloaded",
        "The server is running as many chats as it can; try again shortly (see Retry-After).",
        retry_after=retry_after,
    )


class Admission:
    """A counter of runs in flight with a ceiling.

    Args:
        max_runs: The ceiling; None admits everything (the count is still kept).
        retry_after: Seconds sent in `Retry-After` when a run is refused.
    """

    def __init__(self, max_runs: int | None, *, retry_after: int = 1) -> None:
        self.max_runs = max_runs
        self.retry_after = retry_after
        self.in_flight = 0
        self.refused = 0

    @property
    def full(self) -> bool:
        return self.max_runs is not None and self.in_flight >= self.max_runs

    def check(self) -> None:
        """Raise the 503 when no run can be admitted now (nothing is counted)."""
        if self.full:
            self.refused += 1
            raise overloaded(self.retry_after)

    def enter(self) -> None:
        """Admit one run (or raise the 503); every `enter` is matched by one `leave`."""
        self.check()
        self.in_flight += 1

    def leave(self) -> None:
        self.in_flight -= 1
