"""Finished job runs per round in this process, for a request that waits for one.

A request whose pass queued a decode may wait a little (``drive_wait_s``) for it to
finish, so that small rounds look synchronous. It reads the round's run count
(:meth:`Completions.seen`) before queueing and then waits until the count grows
(:meth:`Completions.wait`). Only runs in this process are seen: when another process's
worker takes the job, the wait simply times out and the request answers from the
stored state. Every coordinator app of a process shares :data:`PROCESS_COMPLETIONS` (round
ids are UUIDs, unique across databases), so a job one app's worker ran also wakes a request
of another app in the same process waiting for it (two apps on one database in a test, an
embedded coordinator beside another) instead of letting it wait out ``drive_wait_s``.
"""

from __future__ import annotations

import threading
import time

__all__ = ["PROCESS_COMPLETIONS", "Completions"]


class Completions:
    """Thread-safe counters of finished ``drive_round`` runs, by round id."""

    def __init__(self, *, max_rounds: int = 4096) -> None:
        self._cond = threading.Condition()
        self._done: dict[str, int] = {}
        self._max_rounds = max_rounds

    def seen(self, round_id: str) -> int:
        """Runs over ``round_id`` finished so far in this process."""
        with self._cond:
            return self._done.get(round_id, 0)

    def mark(self, round_id: str) -> None:
        """A run over ``round_id`` finished (successfully or not): wake its waiters."""
        with self._cond:
            if round_id not in self._done and len(self._done) >= self._max_rounds:
                # bound the memory: forget the half marked longest ago (a waiter on one of
                # those rounds times out at worst; the rounds in play were marked recently)
                for stale in list(self._done)[: self._max_rounds // 2]:
                    del self._done[stale]
            self._done[round_id] = self._done.pop(round_id, 0) + 1  # most recent last
            self._cond.notify_all()

    def wait(self, round_id: str, seen: int, timeout_s: float) -> bool:
        """Block until more than ``seen`` runs over ``round_id`` finished, at most
        ``timeout_s`` seconds; True if they did."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._cond:
            while self._done.get(round_id, 0) <= seen:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


PROCESS_COMPLETIONS = Completions()
"""The finished runs of this process's coordinator apps (module doc)."""
