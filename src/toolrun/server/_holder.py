"""Which process holds a conversation's lease, so a restarted service need not wait for a dead one's.

A run's lease (`_leases`) names the process that took it (`toolrun_conversations.lease_holder`): its
host, PID namespace, PID and the kernel's start time of that PID. A lease whose holder shares this
process's host and PID namespace, and whose PID is gone or now names another process, was left by a
process that died: the next message may take it at once instead of waiting up to a lease for it to lapse.
Anything else (another host or namespace, no `/proc`, a process this one may not see) counts as alive, and
the lease lapses on its own.
"""

from __future__ import annotations

import os
import socket

__all__ = ["holder_gone", "this_process"]

_own: tuple[int, str | None] | None = None


def _start_ticks(pid: int) -> str | None:
    """The kernel's start time of `pid` (`/proc/<pid>/stat`, field 22), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def _place() -> str | None:
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{socket.gethostname()[:100]}|{namespace}"


def this_process() -> str | None:
    """This process as a lease holder (`host|pid namespace|pid|start ticks`); None where it cannot be told."""
    global _own
    pid = os.getpid()
    if _own is None or _own[0] != pid:  # computed once per process (a fork gets its own)
        place, ticks = _place(), _start_ticks(pid)
        _own = (pid, None if place is None or ticks is None else f"{place}|{pid}|{ticks}")
    return _own[1]


def holder_gone(holder: str | None) -> bool:
    """Whether `holder` names a process on this host and PID namespace that no longer runs."""
    mine = this_process()
    if not holder or mine is None or holder == mine:
        return False
    place, _, rest = holder.rpartition("|")
    place, _, pid_text = place.rpartition("|")
    if place != mine.rsplit("|", 2)[0] or not pid_text.isdigit():
        return False
    pid, ticks = int(pid_text), rest
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it runs, as another user: its start time tells whether it is the holder
        pass
    except OSError:
        return False
    now = _start_ticks(pid)
    return now is not None and now != ticks
