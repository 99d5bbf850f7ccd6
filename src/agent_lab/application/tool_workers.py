"""Where tool handlers run, how long they may take, and what happens to those that hang.

* **Sync handlers** run on worker threads shared by every registry in the process
  (``WORKER_THREADS`` of them). A thread cannot be stopped, so a handler still running
  past its timeout keeps its thread until it returns: its caller already got a timeout
  error payload, and the call is counted as *overdue* for its tool. Once
  ``REPLACE_AFTER_OVERDUE`` threads of the current pool are overdue, new calls go to a
  fresh pool; the old one finishes what it holds and its threads exit. Lost capacity
  is replaced, so hung handlers never starve other tools.
* **Async handlers** run as their own task. At the timeout the task is cancelled and
  given ``CANCEL_GRACE_SECONDS`` to stop; a task that swallows the cancellation is
  reported (a warning on the ``agent_lab.tools`` logger), counted as overdue and
  abandoned, so the call, the turn and ``aclose()`` all end in bounded time.
* **Per-tool bound.** A tool with ``MAX_OVERDUE_PER_TOOL`` overdue calls (threads or
  tasks) is refused at once, ``tool handler failed: ... still running past their
  timeout``, until one of them ends. This caps the threads and tasks one misbehaving
  tool can hold at ``MAX_OVERDUE_PER_TOOL``.

``overdue_calls()`` reports the current counts per tool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import logging
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agent_lab.domain.events import ToolCallEvent

WORKER_THREADS = 64
"""Sync handlers that can run at once (across all registries of the process)."""
REPLACE_AFTER_OVERDUE = 8
"""Overdue threads after which the pool is replaced by a fresh one."""
MAX_OVERDUE_PER_TOOL = 4
"""Overdue calls one tool may hold before its new calls are refused."""
CANCEL_GRACE_SECONDS = 0.25
"""How long a cancelled async handler may take to stop before it is abandoned."""

log = logging.getLogger("agent_lab.tools")


class ToolTimedOut(TimeoutError):
    """A handler did not finish within its tool's timeout."""


class ToolOverloaded(RuntimeError):
    """The tool already holds ``MAX_OVERDUE_PER_TOOL`` calls past their timeout."""


class _Workers:
    """The process-wide thread pool and the ledger of overdue calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = self._new_pool()
        self._generation = 0
        """Counts pool replacements; identifies the pool a call was submitted to."""
        self._pool_overdue = 0
        self._threads: Counter[str] = Counter()
        self._tasks: dict[str, set[asyncio.Task[Any]]] = {}

    @staticmethod
    def _new_pool() -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="agent-lab-tool")

    def submit(self, function: Callable[[], Any]) -> tuple[concurrent.futures.Future[Any], int]:
        with self._lock:
            return self._pool.submit(function), self._generation

    def thread_overdue(self, name: str, future: concurrent.futures.Future[Any], pool: int) -> None:
        """Account for a thread whose call timed out; released when the handler returns."""
        with self._lock:
            self._threads[name] += 1
            if pool == self._generation:
                self._pool_overdue += 1
                if self._pool_overdue >= REPLACE_AFTER_OVERDUE:
                    retired, self._pool, self._pool_overdue = self._pool, self._new_pool(), 0
                    self._generation += 1
                    retired.shutdown(wait=False)  # its threads end as their handlers return
                    log.warning("tool threads replaced: %d were overdue", REPLACE_AFTER_OVERDUE)
        future.add_done_callback(functools.partial(self._thread_done, name, pool))

    def _thread_done(self, name: str, pool: int, _future: object) -> None:
        with self._lock:
            self._threads[name] -= 1
            if self._threads[name] <= 0:
                del self._threads[name]
            if pool == self._generation and self._pool_overdue > 0:
                self._pool_overdue -= 1

    def task_abandoned(self, name: str, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._tasks.setdefault(name, set()).add(task)
        task.add_done_callback(functools.partial(self._task_done, name))

    def _task_done(self, name: str, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._tasks.get(name, set()).discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: its caller already got a timeout

    def overdue(self) -> dict[str, int]:
        with self._lock:
            counts = Counter(self._threads)
            for name, tasks in self._tasks.items():
                live = {t for t in tasks if not t.done() and not t.get_loop().is_closed()}
                tasks.intersection_update(live)
                if live:
                    counts[name] += len(live)
            return dict(counts)

    def check_capacity(self, name: str) -> None:
        held = self.overdue().get(name, 0)
        if held >= MAX_OVERDUE_PER_TOOL:
            raise ToolOverloaded(
                f"{held} earlier calls of this tool are still running past their timeout"
            )


_workers = _Workers()


def overdue_calls() -> dict[str, int]:
    """Calls still running past their timeout, by tool name (threads and tasks)."""
    return _workers.overdue()


async def run_handler(
    name: str,
    handler: Callable[..., Any],
    event: ToolCallEvent,
    context: object,
    limit: float | None,
) -> Any:
    """Run one handler within ``limit`` seconds and return what it returned.

    Raises:
        ToolTimedOut: it did not finish in time (it keeps running, accounted as overdue).
        ToolOverloaded: the tool already holds too many overdue calls.
        BaseException: whatever the handler raised.
    """
    _workers.check_capacity(name)
    wants_context, is_async = handler_shape(handler)
    args: tuple[Any, ...] = (event, context) if wants_context else (event,)
    if is_async:
        return await _run_task(name, handler(*args), limit)
    result = await _run_thread(name, functools.partial(handler, *args), limit)
    if inspect.isawaitable(result):
        return await _run_task(name, result, limit)
    return result


async def _run_thread(name: str, function: Callable[[], Any], limit: float | None) -> Any:
    future, pool = _workers.submit(function)
    waiter = asyncio.wrap_future(future)
    try:
        await asyncio.wait({waiter}, timeout=limit)
    except asyncio.CancelledError:
        _give_up(name, waiter, future, pool)
        raise
    if waiter.done():
        return waiter.result()
    _give_up(name, waiter, future, pool)
    raise ToolTimedOut(_timed_out(limit))


def _give_up(
    name: str,
    waiter: asyncio.Future[Any],
    future: concurrent.futures.Future[Any],
    pool: int,
) -> None:
    """Stop waiting; a call that already started is overdue until its handler returns."""
    waiter.cancel()  # also cancels ``future`` if it is still queued
    if not future.cancelled():
        _workers.thread_overdue(name, future, pool)


async def _run_task(name: str, awaitable: Any, limit: float | None) -> Any:
    task: asyncio.Task[_Raised | Any] = asyncio.ensure_future(_guarded(awaitable))
    try:
        done, _ = await asyncio.wait({task}, timeout=limit)
    except asyncio.CancelledError:
        await _stop(name, task, "its call was cancelled")
        raise
    if not done:
        stopped = await _stop(name, task, f"it ran past its timeout of {limit}s")
        suffix = "" if stopped else "; it ignored cancellation and was abandoned"
        raise ToolTimedOut(_timed_out(limit) + suffix)
    result = task.result()
    if isinstance(result, _Raised):
        raise result.error
    return result


class _Raised:
    """What a handler task raised, carried out of the task as a value.

    A task that raises ``SystemExit`` or ``KeyboardInterrupt`` would stop the event
    loop itself; inside the wrapper the exception is only data.
    """

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _guarded(awaitable: Any) -> Any:
    try:
        return await awaitable
    except asyncio.CancelledError:
        raise
    except BaseException as error:  # noqa: BLE001 - every failure becomes a payload
        return _Raised(error)


async def _stop(name: str, task: asyncio.Task[Any], why: str) -> bool:
    """Cancel ``task`` and wait briefly; ``False`` when it had to be abandoned."""
    task.cancel()
    done, _ = await asyncio.shield(asyncio.wait({task}, timeout=CANCEL_GRACE_SECONDS))
    if done:
        if not task.cancelled():
            task.exception()  # retrieved: the caller gets the timeout, not this
        return True
    log.warning("tool %s: abandoned a task that ignored cancellation (%s)", name, why)
    _workers.task_abandoned(name, task)
    return False


def _timed_out(limit: float | None) -> str:
    return f"timed out after {limit:g}s"


def handler_shape(handler: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether the handler takes the context, and whether it is async."""
    try:
        return _cached_shape(handler)
    except TypeError:  # an unhashable callable object
        return _inspect_shape(handler)


@functools.lru_cache(maxsize=4096)
def _cached_shape(handler: Callable[..., Any]) -> tuple[bool, bool]:
    return _inspect_shape(handler)


def _inspect_shape(handler: Callable[..., Any]) -> tuple[bool, bool]:
    is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    )
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return False, is_async
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    wants = len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)
    return wants, is_async
