"""The two jobs, as plain functions of a :class:`JobRuntime` (any queue runs them).

* ``drive_round(round_id, resumed_at)``: every transition due on one round, decodes
  included (:meth:`~coordinator.rounds.driver.RoundDriver.decode`). Queued by a pass
  that found a decode due; the queueing lock ``round:<id>`` collapses duplicates.
* ``check_deadlines(resumed_at)``: one pass over every unfinished round (the deadline
  driver, :meth:`~coordinator.rounds.driver.RoundDriver.drive_all`), then the autopilot
  (:mod:`coordinator.rounds.autopilot`: due round starts, federation ends); a due decode is
  queued as a ``drive_round`` job, not run here. Queued by every coordinator's ticker
  every ``tick_interval_s``; the queueing lock ``deadlines`` collapses them. On
  PostgreSQL one check runs at a time across all workers: it holds the
  transaction-scoped advisory lock :data:`DEADLINE_LOCK_KEY` (on a connection of the job
  queue's own pool, :meth:`~coordinator.jobs.postgres.PostgresJobs.deadline_lock`, so
  that the passes still use one connection of the app's pool at a time), and a check
  that finds it taken returns at once.

``resumed_at`` is when the process that queued the job last (re)started or saw the
database come back; the job's driver adopts it when later than its own, so that the
deadline grace period (``deadline_grace_s``) runs from a coordinator's restart even
when another process's worker enforces the deadline.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime

from secfpp.coordinator.jobs.completions import Completions
from secfpp.coordinator.rounds.driver import RoundDriver

__all__ = [
    "DEADLINES_LOCK",
    "DEADLINE_LOCK_KEY",
    "JobRuntime",
    "check_deadlines",
    "drive_round",
    "round_queueing_lock",
]

log = logging.getLogger(__name__)

DEADLINE_LOCK_KEY = 0x5EC_F99_D1E
"""Key of the PostgreSQL advisory lock held by the running deadline check."""
DEADLINES_LOCK = "secfpp:deadlines"
"""Queueing lock of ``check_deadlines``: at most one waiting to run."""


def round_queueing_lock(round_id: str) -> str:
    """Queueing lock of ``drive_round`` for one round: at most one waiting to run."""
    return f"secfpp:round:{round_id}"


@contextlib.contextmanager
def always_granted() -> Iterator[bool]:
    """The deadline lock of a single-process queue (SQLite): nothing to exclude."""
    yield True


@dataclass
class JobRuntime:
    """What a job needs: the process's driver, its completion counters, and the lock
    that keeps deadline checks one at a time (a context manager yielding whether it
    was granted)."""

    driver: RoundDriver
    completions: Completions = field(default_factory=Completions)
    deadline_lock: Callable[[], AbstractContextManager[bool]] = always_granted
    autopilot: Callable[[], object] | None = None
    """Starts due rounds and ends finished federations (``Autopilot.run``, autopilot.py):
    after every deadline pass and every decode. None: rounds start only by hand."""


def drive_round(runtime: JobRuntime, round_id: str, resumed_at: datetime) -> None:
    """Make every transition due on ``round_id``, decodes included."""
    runtime.driver.adopt_resumed_at(resumed_at)
    try:
        runtime.driver.decode(round_id)
        if runtime.autopilot is not None:
            runtime.autopilot()  # the decode may have published the round
    finally:
        runtime.completions.mark(round_id)


def check_deadlines(runtime: JobRuntime, resumed_at: datetime) -> bool:
    """One deadline pass over every unfinished round; False when another worker's check
    was running (PostgreSQL advisory lock) and this one did nothing."""
    runtime.driver.adopt_resumed_at(resumed_at)
    try:
        with runtime.deadline_lock() as got:
            if got:
                runtime.driver.drive_all()  # catches its own errors, round by round
                if runtime.autopilot is not None:
                    runtime.autopilot()  # catches its own errors too
            return got
    except Exception as err:  # the lock's connection failed: the next tick retries
        runtime.driver.note_outage()
        log.warning("deadline check: %s: %s", type(err).__name__, err)
        return False
