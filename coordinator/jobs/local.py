"""The in-process job queue of the embedded (SQLite) deployment.

The same job functions as on PostgreSQL (:mod:`coordinator.jobs.tasks`), run by a few
daemon threads of the coordinator process instead of procrastinate workers. Jobs are
keyed like procrastinate's queueing locks (``secfpp:round:<id>``, ``secfpp:deadlines``)
and coalesce the same way: a job whose key already waits to run is not queued twice.
Unlike procrastinate, a key never runs twice at once: a job queued while its key runs
is run once more right after (it may have been queued because of something the running
one did not see). Jobs live in memory: a killed process loses its queue, and the next
process's deadline checks and requests queue again whatever is still due (every job is
a pass that rereads the database).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import datetime

from secfpp.coordinator.jobs.completions import Completions
from secfpp.coordinator.jobs.tasks import (
    DEADLINES_LOCK,
    JobRuntime,
    check_deadlines,
    drive_round,
    round_queueing_lock,
)

__all__ = ["LocalJobs"]

log = logging.getLogger(__name__)

Job = Callable[[], object]


class LocalJobs:
    """Coalescing job threads (``workers`` of them) for one coordinator process."""

    def __init__(self, completions: Completions, *, workers: int = 2) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.completions = completions
        self.workers = workers
        self._runtime: JobRuntime | None = None
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._jobs: dict[str, Job] = {}
        """Key -> job, for every key waiting in ``_queue``."""
        self._running: set[str] = set()
        self._again: dict[str, Job] = {}
        """Key -> job queued while that key was running: run once more after it."""
        self._threads: list[threading.Thread] = []
        self._stopping = False

    # -- the DecodeQueue of the driver ------------------------------------------------
    def defer_decode(self, round_id: str, resumed_at: datetime) -> Callable[[float], bool]:
        seen = self.completions.seen(round_id)
        self.submit(round_queueing_lock(round_id), lambda: self._drive_round(round_id, resumed_at))
        return lambda timeout_s: self.completions.wait(round_id, seen, timeout_s)

    def defer_deadline_check(self, resumed_at: datetime) -> None:
        self.submit(DEADLINES_LOCK, lambda: check_deadlines(self._bound(), resumed_at))

    def _drive_round(self, round_id: str, resumed_at: datetime) -> None:
        drive_round(self._bound(), round_id, resumed_at)

    def _bound(self) -> JobRuntime:
        if self._runtime is None:
            raise RuntimeError("LocalJobs.start(runtime) was not called")
        return self._runtime

    # -- the queue -----------------------------------------------------------------------
    def start(self, runtime: JobRuntime) -> None:
        """Start the job threads; jobs run with ``runtime``."""
        self._runtime = runtime
        with self._cond:
            self._stopping = False
        for n in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"secfpp-job-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(self, key: str, job: Job) -> bool:
        """Queue ``job`` under ``key``; False when that key already waits to run."""
        with self._cond:
            if self._stopping:
                return False
            if key in self._running:
                self._again[key] = job
                return True
            if key in self._jobs:
                return False
            self._jobs[key] = job
            self._queue.append(key)
            self._cond.notify()
            return True

    def pending(self) -> int:
        """Jobs waiting to run (not counting running ones)."""
        with self._cond:
            return len(self._queue) + len(self._again)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Drop the waiting jobs and let running ones finish (at most ``timeout_s``)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            self._jobs.clear()
            self._again.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = [t for t in self._threads if t.is_alive()]

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                key = self._queue.popleft()
                job = self._jobs.pop(key)
                self._running.add(key)
            try:
                job()
            except Exception:  # a failed job is logged; the next pass queues it again
                log.exception("job %s failed", key)
            finally:
                with self._cond:
                    self._running.discard(key)
                    again = self._again.pop(key, None)
                    if again is not None and not self._stopping:
                        self._jobs[key] = again
                        self._queue.append(key)
                        self._cond.notify()
