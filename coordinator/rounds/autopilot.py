"""Rounds on autopilot, and the federation's end (``rounds.schedule``, lifecycle.py).

After every deadline check and every decode job, :func:`advance_all` looks at each live
federation (``active`` or ``paused``) whose newest round has ended (or that has none):

1. its last round was round ``rounds.total``: the federation is ``finished: rounds
   done`` (whatever its schedule, paused or not);
2. ``paused`` or ``schedule: manual``: nothing more (the admin starts rounds);
3. ``auto``: once ``min_interval_s`` has passed since the last round ended (and, after a
   published round, the end-of-round spread of its outcome fetches,
   :func:`coordinator.rounds.views.outcome_window`: ``N / outcome_rate`` seconds for a
   federation larger than the settings' ``outcome_rate``), start the next round
   (:func:`coordinator.rounds.service.start_round`). A refusal by the privacy ledger ends
   the federation ``finished: privacy budget spent`` (inside ``start_round``);
   ``enrollment_incomplete`` waits for the last enrollment.

Replicas: every coordinator and worker runs this, possibly at the same moment. Exactly
one start succeeds: round ``n+1`` is one row with a unique ``(federation_id, number)``
inserted under the federation row's lock (``lifecycle.require_startable``), so the
other start gets ``round_in_progress`` and does nothing; the status changes are
compare-and-sets.

Work per tick: a federation that was found idle is not looked at again for
``RECHECK_S`` seconds (of the monotonic clock) unless its status or newest round
changed (a manual federation waiting for its admin, an auto one waiting for
enrollments).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from secfpp.coordinator.db.errors import is_database_unavailable
from secfpp.coordinator.db.models import Federation, Round
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import lifecycle, service, store
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.rounds.machine import TERMINAL, Stage
from secfpp.coordinator.rounds.views import outcome_window

__all__ = ["RECHECK_S", "Autopilot", "advance"]

log = logging.getLogger(__name__)

RECHECK_S: Final = 1.0
"""How long an idle federation is left alone when nothing about it changed."""

_Key = tuple[str, int | None]
"""A federation as the idle memo sees it: its status and the number of its newest round."""


def advance(session: Session, driver: RoundDriver, federation: Federation, now: datetime) -> str:
    """One lifecycle step of one federation; what happened (or why nothing did):
    ``running``, ``finished``, ``paused``, ``manual``, ``waiting`` (min_interval_s),
    ``started`` or the code of the start's refusal (e.g. ``round_in_progress``:
    another replica started it)."""
    config = driver.federation_config(session, federation.id)
    last = store.current_round_head(session, federation.id)
    if last is not None and Stage(last.stage) not in TERMINAL:
        return "running"
    total = config.rounds.total
    if last is not None and total is not None and last.number >= total:
        if lifecycle.end(session, federation.id, lifecycle.ROUNDS_DONE, now):
            session.commit()
            log.info("federation %s: %s", federation.id, lifecycle.ROUNDS_DONE)
        return "finished"
    if federation.status == lifecycle.PAUSED:
        return "paused"
    if config.rounds.schedule != "auto":
        return "manual"
    if last is not None and last.finished_at is not None:
        wait = config.rounds.min_interval_s
        if last.stage == Stage.PUBLISHED.value and driver.outcome_rate is not None:
            # the end-of-round spread: a round that starts before every participant's slot
            # would pull the outcome fetches into its sharing stage (daemons catch up first)
            wait = max(wait, outcome_window(config.n_participants, driver.outcome_rate))
        due = last.finished_at + timedelta(seconds=wait)
        if now < due:
            return "waiting"
    session.rollback()  # start_round reads everything afresh in its own transaction
    try:
        rnd = service.start_round(session, federation, now)
    except ProblemError as err:
        session.rollback()
        return err.code
    log.info("federation %s: autopilot started round %d", federation.id, rnd.number)
    return "started"


@dataclass
class Autopilot:
    """:func:`advance` over every live federation whose newest round has ended."""

    driver: RoundDriver
    _idle: dict[str, tuple[_Key, float]] = field(default_factory=dict)
    """Federation id -> (what it looked like, monotonic time until which it is left alone)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> dict[str, str]:
        """One pass (never concurrently in one process); federation id -> outcome of
        those looked at. Errors are logged: the next tick retries."""
        if not self._lock.acquire(blocking=False):
            return {}
        try:
            with self.driver.sessions() as session:
                return self._pass(session)
        except Exception as err:  # the database is down: the next tick retries
            if is_database_unavailable(err):
                self.driver.note_outage()
            else:
                log.exception("advancing federations failed")
            return {}
        finally:
            self._lock.release()

    def _pass(self, session: Session) -> dict[str, str]:
        running = exists().where(
            Round.federation_id == Federation.id, Round.stage.not_in([s.value for s in TERMINAL])
        )
        newest = (
            select(func.max(Round.number))
            .where(Round.federation_id == Federation.id)
            .scalar_subquery()
        )
        # One query per tick: the live federations with no running round, and the number
        # of their newest (ended) round, whose stage can no longer change.
        rows = session.execute(
            select(Federation.id, Federation.status, newest).where(
                Federation.status.in_(list(lifecycle.LIVE)), ~running
            )
        ).all()
        session.rollback()
        outcomes: dict[str, str] = {}
        now = self.driver.clock()
        for federation_id, status, number in rows:
            key: _Key = (status, number)
            memo = self._idle.get(federation_id)
            if memo is not None and memo[0] == key and time.monotonic() < memo[1]:
                continue
            federation = session.get(Federation, federation_id)
            if federation is None:
                continue
            session.rollback()
            outcome = advance(session, self.driver, federation, now)
            session.rollback()
            session.expunge_all()
            outcomes[federation_id] = outcome
            if outcome in ("started", "finished"):
                self._idle.pop(federation_id, None)
            else:
                self._idle[federation_id] = (key, time.monotonic() + RECHECK_S)
        return outcomes
