"""The multi-worker layout of the web lab: N processes behind one listening socket.

``serve_workers`` runs ``workers`` processes (started with ``spawn``, so each has its
own interpreter, event loop, lab and store connection) that all accept connections on
the one socket the parent bound; the kernel hands each new connection to one of them.
The parent only supervises: a worker that dies (crash, ``SIGKILL``, out of memory) is
replaced, and ``SIGINT`` / ``SIGTERM`` stop every worker and then the parent.

The workers share state only through the session store, so use one every worker can
reach: PostgreSQL (``AGENT_LAB_DATABASE_URL``), or the SQLite file on one host. A
session is driven by one worker at a time (the store's claims): a browser that
reconnects to another worker gets the session's stored history at once, and its next
message resumes the session there, taking it over at once when the previous worker is
gone (see ``docs/deployment.md``).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any, Final

WorkerMain = Callable[..., None]
"""A worker's body, ``main(sock, index, *args)``: serve on the socket until SIGTERM."""

_RESTART_PAUSE_SECONDS: Final = 0.5
_STOP_TIMEOUT_SECONDS: Final = 15.0


@dataclass
class Supervisor:
    """Starts the workers, replaces the ones that die, stops them all on a signal."""

    main: WorkerMain
    args: tuple[Any, ...]
    sock: socket.socket
    workers: int
    on_event: Callable[[str], None] = print
    _processes: dict[int, BaseProcess] = field(default_factory=dict)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> int:
        """Supervise until a signal stops everything; return the exit code (0)."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            for index in range(self.workers):
                self._start(index)
            while not self._stopping.is_set():
                self._replace_dead()
                self._stopping.wait(0.2)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._stop_all()
        return 0

    def pids(self) -> list[int]:
        return [p.pid for p in self._processes.values() if p.pid is not None]

    def _on_signal(self, signum: int, frame: object) -> None:
        self._stopping.set()

    def _start(self, index: int) -> None:
        context = multiprocessing.get_context("spawn")
        process = context.Process(
            target=_worker_entry,
            args=(self.main, self.sock, index, *self.args),
            name=f"agent-lab-worker-{index}",
            daemon=False,
        )
        process.start()
        self._processes[index] = process
        self.on_event(f"worker {index} started (pid {process.pid})")

    def _replace_dead(self) -> None:
        for index, process in list(self._processes.items()):
            if process.is_alive() or self._stopping.is_set():
                continue
            code = process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            self.on_event(f"worker {index} (pid {process.pid}) ended with {how}; replacing it")
            process.join(0)
            time.sleep(_RESTART_PAUSE_SECONDS)
            self._start(index)

    def _stop_all(self) -> None:
        for process in self._processes.values():
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT_SECONDS
        for process in self._processes.values():
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)


def _worker_entry(main: WorkerMain, sock: socket.socket, index: int, *args: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C arrives as SIGTERM
    main(sock, index, *args)


def serve_workers(
    main: WorkerMain,
    sock: socket.socket,
    workers: int,
    *args: Any,
    on_event: Callable[[str], None] = print,
) -> int:
    """Run ``workers`` processes of ``main(sock, index, *args)`` under a ``Supervisor``.

    ``main`` and ``args`` must be picklable (a module-level function and plain data).
    """
    return Supervisor(main, args, sock, workers, on_event).run()
