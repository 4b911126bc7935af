"""`ProcessIsolation`: run a sync tool in a worker process that is killed when the call times out.

A thread cannot be stopped from outside: a sync tool that overruns its timeout gets a `TIMEOUT` result,
but its thread runs on. For tools that must really stop (CPU-bound work, untrusted code, libraries that
can hang), run them in a process:

```python
isolation = ProcessIsolation(max_workers=2)

@tool(timeout=5)
@isolation.wrap
def crunch(n: int) -> int:
    \"\"\"Compute something heavy.\"\"\"
    ...
```

`wrap` returns an async function with the same signature, name and docstring, so the tool's schema is
unchanged; each call is sent to an idle worker process. When the executor's timeout fires (or the call is
cancelled), the worker is killed and replaced on the next call. The function must be defined at module
level (it is found again by its module and name in the worker), and its arguments and return value must
be picklable. It cannot take a `ToolContext`. A `ToolError` raised in the worker reaches the executor as
itself; other exceptions as themselves when they can be pickled, else as a `RuntimeError` naming the type.

Workers start with the `spawn` method (safe in a process with threads and an event loop). A fresh
worker imports the interpreter's main module and toolrun before it can take a call: a second or more.
The first call pays for that inside its time box, so `await isolation.start()` ahead of time if timeouts
are tight: it returns when the workers are ready. A call cancelled while its worker is still starting
leaves that worker to the next call.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import multiprocessing
import pickle
import signal
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from toolrun.exceptions import ToolDefinitionError
from toolrun.results import ErrorCode, ToolError

__all__ = ["ProcessIsolation"]

P = ParamSpec("P")
R = TypeVar("R")

_ISOLATED_ATTR = "__toolrun_isolated__"
_READY = "ready"
_START_TIMEOUT = 120.0
"""Seconds a new worker may take to import what it needs before it is given up."""


@dataclass(frozen=True, slots=True)
class _FunctionRef:
    module: str
    qualname: str

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> _FunctionRef:
        module = getattr(fn, "__module__", None)
        qualname = getattr(fn, "__qualname__", None)
        if not module or not qualname or "<" in qualname:
            raise ToolDefinitionError(
                f"ProcessIsolation needs a function defined at module level (got {fn!r}): the worker "
                "process finds it again by its module and name."
            )
        return cls(module, qualname)

    def resolve(self) -> Callable[..., Any]:
        obj: Any = importlib.import_module(self.module)
        for part in self.qualname.split("."):
            obj = getattr(obj, part)
        handler = getattr(obj, "handler", None)  # a Tool made from the wrapped function
        if handler is not None and not callable(getattr(obj, _ISOLATED_ATTR, None)):
            obj = handler
        target = getattr(obj, _ISOLATED_ATTR, obj)
        if not callable(target):
            raise TypeError(f"{self.module}.{self.qualname} is not callable")
        return target  # type: ignore[no-any-return]


def _portable(exc: BaseException) -> BaseException:
    try:
        copy = pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__} raised in the worker process")
    if isinstance(copy, BaseException):
        return copy
    return RuntimeError(f"{type(exc).__qualname__} raised in the worker process")


def _worker_main(conn: Any) -> None:  # pragma: no cover - runs in the child process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent; it kills us when needed
    conn.send(_READY)  # bootstrapped (main module, toolrun imported): calls are answered at once now
    resolved: dict[_FunctionRef, Callable[..., Any]] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        ref, args, kwargs = message
        try:
            fn = resolved.get(ref)
            if fn is None:
                fn = resolved[ref] = ref.resolve()
            value = fn(*args, **kwargs)
        except ToolError as err:
            reply: tuple[str, Any] = ("tool_error", err.to_dict())
        except BaseException as exc:
            reply = ("error", _portable(exc))
        else:
            reply = ("ok", value)
        try:
            conn.send(reply)
        except Exception:
            conn.send(("unpicklable", type(reply[1]).__qualname__))


class _Worker:
    __slots__ = ("conn", "process")

    def __init__(self, process: Any, conn: Any) -> None:
        self.process = process
        self.conn = conn

    def alive(self) -> bool:
        return bool(self.process.is_alive())

    def roundtrip(self, message: Any) -> Any:
        self.conn.send(message)
        return self.conn.recv()

    def kill(self) -> None:
        try:
            self.process.kill()
        finally:
            self.conn.close()


class ProcessIsolation:
    """A small pool of worker processes for sync tools that must be killable (see the module docs).

    Args:
        max_workers: Worker processes at most; further calls wait for one to be free.
        start_method: The `multiprocessing` start method (`"spawn"`, `"forkserver"`, `"fork"`).
    """

    def __init__(self, *, max_workers: int = 2, start_method: str = "spawn") -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1.")
        self._mp: Any = multiprocessing.get_context(start_method)
        self._max = max_workers
        self._io = ThreadPoolExecutor(max_workers=max_workers + 1, thread_name_prefix="toolrun-isolation")
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._count = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._closed = False

    def wrap(self, fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        """An async function that runs `fn` in a worker process; same signature, name and docstring."""
        ref = _FunctionRef.of(fn)

        @functools.wraps(fn)
        async def isolated(*args: P.args, **kwargs: P.kwargs) -> R:
            result: R = await self._run(ref, args, kwargs)
            return result

        setattr(isolated, _ISOLATED_ATTR, fn)
        return isolated

    async def run(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Run the module-level function `fn(*args, **kwargs)` in a worker process."""
        result: R = await self._run(_FunctionRef.of(fn), args, kwargs)
        return result

    async def start(self, workers: int | None = None) -> None:
        """Start worker processes ahead of the first calls (all of them by default; never past
        `max_workers`), side by side; returns when they can take calls."""
        wanted = self._max if workers is None else workers
        with self._lock:
            count = max(0, min(wanted, self._max - self._count))
            self._count += count
        starting = [self._io.submit(self._spawn) for _ in range(count)]
        for future in starting:
            future.add_done_callback(self._adopt)  # idle as soon as it is ready (uncounted if it failed)
        await asyncio.gather(*(asyncio.wrap_future(f) for f in starting))

    @property
    def workers(self) -> int:
        """Worker processes currently alive or starting."""
        return self._count

    def close(self) -> None:
        """Kill every worker process (running calls fail) and stop."""
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self._count = 0
        for worker in workers:
            worker.kill()
            worker.process.join(1.0)
        self._io.shutdown(wait=False, cancel_futures=True)

    # ----------------------------------------------------------------------------------------------------

    async def _run(self, ref: _FunctionRef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        worker = await self._acquire(loop)
        healthy = False
        try:
            kind, payload = await loop.run_in_executor(self._io, worker.roundtrip, (ref, args, kwargs))
            healthy = True
        except (EOFError, OSError):
            raise RuntimeError("The tool's worker process died.") from None
        finally:
            if healthy:
                self._release(worker)
            else:  # cancelled (timeout), died, or could not send: never reuse it
                self._discard(worker)
        if kind == "ok":
            return payload
        if kind == "tool_error":
            raise ToolError.from_dict(payload)
        if kind == "error":
            raise payload
        raise ToolError(
            ErrorCode.RESULT_INVALID,
            "The tool's result could not be passed back from its worker process.",
        )

    def _spawn(self) -> _Worker:
        parent, child = self._mp.Pipe(duplex=True)
        process = self._mp.Process(target=_worker_main, args=(child,), daemon=True, name="toolrun-isolated")
        process.start()
        child.close()
        worker = _Worker(process, parent)
        try:  # wait until it can take a call (see the module docstring), here in an I/O thread
            ready = parent.poll(_START_TIMEOUT) and parent.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            worker.kill()
            process.join(1.0)
            raise RuntimeError("A worker process of ProcessIsolation did not start.")
        with self._lock:
            closed = self._closed
            if not closed:
                self._all.add(worker)
        if closed:
            worker.kill()
            raise RuntimeError("ProcessIsolation is closed.")
        return worker

    async def _acquire(self, loop: asyncio.AbstractEventLoop) -> _Worker:
        while True:
            spawn = False
            waiter: asyncio.Future[None] | None = None
            with self._lock:
                if self._closed:
                    raise RuntimeError("ProcessIsolation is closed.")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        return worker
                    self._forget(worker)
                if self._count < self._max:
                    self._count += 1
                    spawn = True
                else:
                    waiter = loop.create_future()
                    self._waiters.append((loop, waiter))
            if spawn:
                starting = self._io.submit(self._spawn)
                try:
                    return await asyncio.wrap_future(starting, loop=loop)
                except asyncio.CancelledError:
                    starting.add_done_callback(self._adopt)  # still starting: it serves the next call
                    raise
                except BaseException:
                    with self._lock:
                        self._count -= 1
                    self._wake_one()
                    raise
            if waiter is None:  # pragma: no cover - one of the branches above always returns or sets it
                continue
            try:
                await waiter
            except BaseException:
                with self._lock:
                    try:
                        self._waiters.remove((loop, waiter))
                    except ValueError:
                        pass
                self._wake_one()  # the wake-up we may have received goes to the next waiter
                raise

    def _adopt(self, starting: Future[_Worker]) -> None:
        """A worker whose caller was cancelled while it started: idle for the next call (or not counted)."""
        try:
            worker = starting.result()
        except BaseException:  # it did not start, or never began (cancelled in the queue)
            with self._lock:
                self._count -= 1
            self._wake_one()
            return
        self._release(worker)

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                return
            self._idle.append(worker)
        self._wake_one()

    def _discard(self, worker: _Worker) -> None:
        with self._lock:
            self._forget(worker)
        worker.kill()
        try:
            self._io.submit(worker.process.join, 5.0)  # reap it without blocking the loop
        except RuntimeError:  # closed
            pass
        self._wake_one()

    def _forget(self, worker: _Worker) -> None:  # call with the lock held
        if worker in self._all:
            self._all.discard(worker)
            self._count -= 1

    def _wake_one(self) -> None:
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                if waiter.done() or loop.is_closed():
                    continue
                loop.call_soon_threadsafe(_set_if_pending, waiter)
                return


def _set_if_pending(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
