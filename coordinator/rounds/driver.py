"""The round driver: applies the stage machine's decisions, one transaction each.

:meth:`RoundDriver.drive` loads a round, asks :func:`~coordinator.rounds.machine.decide`
(upload stages) or runs the clustering decode (``clustering``), computes the transition
with :mod:`coordinator.rounds.protocol`, and writes it with a compare-and-set on
``(stage, version)`` together with its event row and any cluster-prompt and ledger rows.
If another worker (or an upload) got there first the write changes nothing and the
driver starts over from the fresh row. It is called after every upload, by every
request that reads a round (lazy deadline check) and by the deadline-check job.

Connections: a request passes its own session (``drive(..., session=session)``); the
driver ends that session's transaction first and then works on it, so a request never
holds two pooled connections (holding one while waiting for a second starves the pool
under load). Within one process, passes over one round are single-flight: a caller that
finds a pass running waits for it (at most ``wait_s``) and skips its own pass when the
one it waited for started after it arrived, since that pass saw everything the caller
could; another process (replica) is kept out by the compare-and-set.

Settled rounds: a pass that decides that an upload stage keeps waiting remembers the
round's ``version`` and the stage's (effective) deadline. Until the version changes
(every accepted upload and every transition bumps it, in any process) or the deadline
comes, the same pass would decide the same, so :meth:`RoundDriver.settled` lets a
request skip it: a task poll then costs one small read instead of a pass (round,
federation, uploads) and a second connection checkout. Parsed federation configs are
cached per process (a federation's config never changes after creation).

Outages: a stage whose deadline passed while this process was not running, or while
the database was unreachable, gets ``grace_s`` more seconds from the moment the
database answered again before missing uploads count as dropouts. Failures and answers
form outage episodes with hysteresis: one warning when an episode begins, one when the
database has answered for ``OUTAGE_SETTLE_S`` without a failure; a failure inside that
window continues the episode (the grace then runs from the next answer).

Decodes off the request path: with a job queue (``jobs``, :mod:`coordinator.jobs`) a
pass never decodes. When the clustering decode (stage ``clustering``) or the
aggregation decode and publication (``aggregation`` closing) is due, the pass queues a
``drive_round`` job for the round (duplicates collapse in the queue) and stops; the round
counts as settled at that version for ``DECODE_RECHECK_S`` (a later pass queues again, in
case the job was lost). The request that queued it waits at most ``decode_wait_s`` for
a job run in this process to finish, then answers from the stored state. The job calls
:meth:`RoundDriver.decode`: the same passes, decodes included, without the in-process
single-flight lock (a slow decode never makes a request wait for it) and, on
PostgreSQL, each step under a transaction-scoped advisory lock on the round
(``pg_advisory_xact_lock``, waiting at most ``ROUND_LOCK_WAIT_MS``): a second worker
that finds it taken skips the round instead of decoding the same stage again.
Correctness rests on the compare-and-set alone; the locks only save work. Without
``jobs`` (unit tests, tools) passes decode inline as before.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from secfpp.coordinator.db.errors import is_database_unavailable
from secfpp.coordinator.db.models import CodedResult, Federation, Round
from secfpp.coordinator.metrics import Metrics
from secfpp.coordinator.rounds import store
from secfpp.coordinator.rounds.machine import (
    TERMINAL,
    UPLOAD_STAGES,
    Stage,
    StageProgress,
    committee_sharing_decision,
    decide,
    is_valid_transition,
    stage_threshold,
)
from secfpp.coordinator.rounds.probes import probe_salt_of
from secfpp.coordinator.rounds.protocol import (
    Outcome,
    close_sharing,
    close_stage,
    fail,
    publish,
    run_clustering,
)
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.rng import RandomSource, SystemRandom
from secfpp.federation import FederationConfig

__all__ = [
    "Clock",
    "DecodeQueue",
    "RoundDriver",
    "effective_deadline",
    "round_lock_key",
    "stage_deadline",
]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
MAX_ATTEMPTS = 64
DECODE_RECHECK_S = 10.0
"""A round whose decode was queued at version v is not queued again by this process
before its version changes or this many seconds pass."""
ROUND_LOCK_WAIT_MS = 2000
"""How long a decode step waits for the round's advisory lock before it skips the round."""


class DecodeQueue(Protocol):
    """Where a pass sends a due decode instead of running it (:mod:`coordinator.jobs`)."""

    def defer_decode(self, round_id: str, resumed_at: datetime) -> Callable[[float], bool]:
        """Queue a ``drive_round`` job; returns ``wait(timeout_s)``, True once a run of
        that job in this process finished after the call (False: none did in time)."""
        ...


class _Decode:
    """What :meth:`RoundDriver._plan` returns when a decode is due but not allowed."""


DECODE_DUE: Final = _Decode()


def round_lock_key(round_id: str) -> int:
    """The PostgreSQL advisory-lock key (signed 64 bits) of one round's decode."""
    digest = hashlib.sha256(f"secfpp-round|{round_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def stage_deadline(config: FederationConfig, stage: Stage, now: datetime) -> datetime | None:
    """When an upload stage entered at ``now`` closes; None for the other stages."""
    seconds = {
        Stage.SHARING: config.deadlines.sharing_s,
        Stage.DISTANCES: config.deadlines.distances_s,
        Stage.AGGREGATION: config.deadlines.aggregation_s,
    }.get(stage)
    return None if seconds is None else now + timedelta(seconds=seconds)


def effective_deadline(deadline: datetime, resumed_at: datetime, grace_s: float) -> datetime:
    """The deadline the stage machine applies after an outage that ended at ``resumed_at``.

    A deadline that had already passed when the coordinator (or its database) came back
    moves to ``resumed_at + grace_s``; a later deadline is kept as it is.
    """
    if deadline > resumed_at:
        return deadline
    return max(deadline, resumed_at + timedelta(seconds=grace_s))


@dataclass
class _Flight:
    """Single-flight state of one round in this process."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    passes: int = 0
    """Passes started so far (read without the lock: a monotonic counter)."""


def _try_round_lock(session: Session, round_id: str) -> bool:
    """Take the round's decode lock for the current transaction, waiting at most
    ``ROUND_LOCK_WAIT_MS`` (the holder may be a killed worker whose session the server
    is still ending); False if another transaction still holds it. PostgreSQL only;
    elsewhere always granted: SQLite runs one job per round at a time in its one process.
    """
    if session.get_bind().dialect.name != "postgresql":
        return True
    session.execute(text(f"SET LOCAL lock_timeout = {ROUND_LOCK_WAIT_MS}"))
    try:
        session.execute(
            text("SELECT pg_advisory_xact_lock(:key)"), {"key": round_lock_key(round_id)}
        )
    except OperationalError as err:
        if getattr(err.orig, "sqlstate", None) == "55P03":  # lock_not_available
            return False
        raise
    session.execute(text("SET LOCAL lock_timeout TO DEFAULT"))
    return True


def _result_senders(session: Session, round_id: str, stage: Stage) -> set[int]:
    """Participants with a stored coded result of ``stage`` (without loading payloads)."""
    rows = session.scalars(
        select(CodedResult.participant).where(
            CodedResult.round_id == round_id, CodedResult.stage == stage.value
        )
    )
    return {int(p) for p in rows}


class RoundDriver:
    """Advances rounds; safe to run in several threads and processes at once."""

    OUTAGE_SETTLE_S = 5.0
    """An outage episode ends once the database has answered this long without a failure."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        metrics: Metrics,
        rng: Callable[[], RandomSource] = SystemRandom,
        *,
        grace_s: float = 0.0,
        jobs: DecodeQueue | None = None,
        decode_wait_s: float = 0.5,
        outcome_rate: float | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.metrics = metrics
        self.rng = rng
        self.grace_s = grace_s
        self.jobs = jobs
        """None: passes decode inline; else due decodes go to this queue."""
        self.decode_wait_s = decode_wait_s
        """How long the request that queued a decode waits for it (module docstring)."""
        self.outcome_rate = outcome_rate
        """The settings' ``outcome_rate``: the autopilot starts no round before a published
        one's outcome fetches were spread (:func:`coordinator.rounds.views.outcome_window`);
        None: it does not wait for them."""
        self.resumed_at = clock()
        """When this process last started talking to a reachable database."""
        self._outage = False
        """An outage episode is open (see :meth:`note_outage`)."""
        self._outage_since: datetime | None = None
        self._streak_since: datetime | None = None
        """During an episode: the first answer since the last failure (None: failing)."""
        self._outage_lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        self._settled: dict[str, tuple[int, datetime]] = {}
        """Round id -> (version, until): a pass at that version decided to wait."""
        self._configs: dict[str, FederationConfig] = {}
        # Decode timings of the transition being planned in this thread; observed only
        # when that transition is applied (a plan that loses the compare-and-set to
        # another thread or process is not counted twice). Also: whether this thread's
        # pass may decode (``allowed``) and the wait of a decode it queued (``ticket``).
        self._decodes = threading.local()

    # -- outages -------------------------------------------------------------------------
    def note_outage(self) -> None:
        """The database failed a request: an outage episode begins (one warning) or goes
        on (a failure while the database had answered for less than ``OUTAGE_SETTLE_S``
        since the last failure is the same episode: no new warning)."""
        with self._outage_lock:
            self._streak_since = None
            if self._outage:
                log.debug("database still unavailable")
                return
            self._outage = True
            self._outage_since = self.clock()
        log.warning("database unavailable; stage deadlines get %.0f s grace", self.grace_s)

    def adopt_resumed_at(self, resumed_at: datetime) -> None:
        """Take a later restart or reconnection time (of the process that queued a
        deadline check) as this driver's own: the grace period then runs from it."""
        if resumed_at > self.resumed_at:
            self.resumed_at = resumed_at
            self._settled.clear()  # the memos' deadlines moved

    def _database_answered(self) -> None:
        """The database answered. During an outage episode the grace runs from the first
        answer after the last failure (``resumed_at``); the episode ends, with one
        warning, once the database has answered for ``OUTAGE_SETTLE_S`` without a
        failure (hysteresis: a flapping database gives one pair of warnings, not one per
        flap)."""
        if not self._outage:
            return
        with self._outage_lock:
            if not self._outage:
                return
            now = self.clock()
            if self._streak_since is None:
                self._streak_since = now
                self.resumed_at = now
                self._settled.clear()  # the memos' deadlines moved
                return
            if (now - self._streak_since).total_seconds() < self.OUTAGE_SETTLE_S:
                return
            self._outage = False
            lasted = (
                self._streak_since - (self._outage_since or self._streak_since)
            ).total_seconds()
        log.warning(
            "database reachable again (unavailable for %.0f s); overdue stages stay open until %s",
            lasted,
            (self.resumed_at + timedelta(seconds=self.grace_s)).isoformat(),
        )

    # -- caches --------------------------------------------------------------------------
    def settled(self, round_id: str, version: int) -> bool:
        """Would a pass over the round at ``version`` decide to wait now? (No read.)

        True only when a pass already decided so at this very version and the stage's
        effective deadline has not come: the stage machine's inputs (expected and
        received uploads, threshold, deadline) are unchanged, so its answer is too.
        """
        memo = self._settled.get(round_id)
        return memo is not None and memo[0] == version and self.clock() < memo[1]

    def _remember_wait(self, rnd: Round) -> None:
        if Stage(rnd.stage) in UPLOAD_STAGES and rnd.deadline is not None:
            until = effective_deadline(rnd.deadline, self.resumed_at, self.grace_s)
            self._settled[rnd.id] = (rnd.version, until)

    def federation_config(self, session: Session, federation_id: str) -> FederationConfig:
        """The federation's parsed config (cached: it never changes once created)."""
        config = self._configs.get(federation_id)
        if config is None:
            federation = session.get(Federation, federation_id)
            if federation is None:
                raise LookupError(f"no federation with id {federation_id!r}")
            config = FederationConfig.model_validate(federation.config)
            if len(self._configs) >= 4096:  # bound the memory of a long-lived process
                self._configs.clear()
            self._configs[federation_id] = config
        return config

    # -- entry points --------------------------------------------------------------------
    def drive_all(self) -> None:
        """One pass over every round that is not finished (the background task); a round
        whose last pass decided to wait at its current version is skipped until its
        deadline (:meth:`settled`)."""
        try:
            with self.sessions() as session:
                rounds = store.active_round_versions(session)
        except Exception as err:  # the database is down: the next tick retries
            self._failed("listing active rounds", err)
            return
        for round_id, version in rounds:
            if self.settled(round_id, version):
                continue
            try:
                self.drive(round_id, wait_s=0.0)
            except Exception as err:  # keep the loop alive; the next tick retries
                self._failed(f"driving round {round_id}", err)

    def _failed(self, what: str, err: Exception) -> None:
        if is_database_unavailable(err):
            self.note_outage()
            log.debug("%s failed: %s", what, type(err).__name__)
        else:
            log.exception("%s failed", what)

    def _flight(self, round_id: str) -> _Flight:
        with self._flights_lock:
            return self._flights.setdefault(round_id, _Flight())

    def drive(
        self,
        round_id: str,
        *,
        session: Session | None = None,
        wait_s: float | None = None,
        max_steps: int | None = None,
    ) -> bool:
        """Make every transition that is due now (at most ``max_steps``).

        Args:
            session: the caller's session; its transaction is ended (rolled back: the
                caller must have committed what it wrote) and the passes run on it, so
                the caller never holds a second connection. None: a session of its own.
            wait_s: how long to wait for a pass another thread is running (None: as
                long as it takes; 0: do not wait).

        Returns False when it gave up waiting (the state read next may be one transition
        behind; the running pass or the next background tick makes it).
        """
        if session is not None:
            session.rollback()  # release the request's connection before anything else
        flight = self._flight(round_id)
        arrived = flight.passes
        acquired = flight.lock.acquire(timeout=-1 if wait_s is None else wait_s)
        if not acquired:
            return False
        self._decodes.ticket = None
        try:
            if flight.passes > arrived:
                # A pass started after this caller arrived and has finished (we hold
                # the lock): it read everything this caller could have read.
                return True
            flight.passes += 1
            if session is None:
                with self.sessions() as own:
                    self._drive(own, round_id, max_steps)
            else:
                self._drive(session, round_id, max_steps)
        finally:
            flight.lock.release()
        ticket: Callable[[float], bool] | None = self._decodes.ticket
        self._decodes.ticket = None
        if ticket is not None:
            # This pass queued a decode: wait a little for it (never holding the lock
            # or a connection), so that small rounds look synchronous.
            timeout = self.decode_wait_s if wait_s is None else min(wait_s, self.decode_wait_s)
            if timeout > 0:
                ticket(timeout)
        return True

    def decode(self, round_id: str) -> bool:
        """The ``drive_round`` job: every transition due now, decodes included.

        No in-process lock; on PostgreSQL each step holds the round's advisory lock for
        its transaction, and a step that finds it taken (another worker is decoding this
        round) ends the job. Returns False in that case, True otherwise.
        """
        with self.sessions() as session:
            return self._run(session, round_id, None, decode=True, lock=True)

    def _drive(self, session: Session, round_id: str, max_steps: int | None) -> None:
        self._run(session, round_id, max_steps, decode=self.jobs is None, lock=False)

    def _queue_decode(self, rnd: Round) -> None:
        """Send the round's due decode to the job queue and settle the round meanwhile."""
        assert self.jobs is not None
        try:
            ticket = self.jobs.defer_decode(rnd.id, self.resumed_at)
        except Exception as err:  # the next pass (request or deadline check) retries
            log.warning("round %s: queueing its decode failed: %s", rnd.id, err)
            return
        until = self.clock() + timedelta(seconds=DECODE_RECHECK_S)
        self._settled[rnd.id] = (rnd.version, until)
        self._decodes.ticket = ticket

    def _run(
        self,
        session: Session,
        round_id: str,
        max_steps: int | None,
        *,
        decode: bool,
        lock: bool,
    ) -> bool:
        steps = 0
        self._decodes.allowed = decode
        for _ in range(MAX_ATTEMPTS):
            if max_steps is not None and steps >= max_steps:
                return True
            session.expire_all()
            if lock and not _try_round_lock(session, round_id):
                session.rollback()
                log.info("round %s: another worker holds its decode lock", round_id)
                return False
            rnd = session.get(Round, round_id)
            self._database_answered()
            if rnd is None or Stage(rnd.stage) in TERMINAL:
                session.rollback()
                self._settled.pop(round_id, None)
                return True
            config = self.federation_config(session, rnd.federation_id)
            now = self.clock()
            self._decodes.timings = []
            outcome = self._plan(session, rnd, config, now)
            if outcome is None:
                self._remember_wait(rnd)
                session.rollback()
                return True
            if isinstance(outcome, _Decode):
                session.rollback()
                self._queue_decode(rnd)
                return True
            if self._apply(session, rnd, config, outcome, now):
                session.commit()
                steps += 1
                self._count(rnd.stage, outcome)
                for stage, seconds in self._decodes.timings:
                    self.metrics.observe("secfpp_decode_seconds", seconds, stage=stage)
            else:
                session.rollback()
        log.warning("round %s: gave up after %d contended attempts", round_id, MAX_ATTEMPTS)
        return True

    # -- planning (reads only) -----------------------------------------------------
    def _plan(
        self, session: Session, rnd: Round, config: FederationConfig, now: datetime
    ) -> Outcome | _Decode | None:
        """The transition due now; None: wait; DECODE_DUE: a decode this pass may not run."""
        stage = Stage(rnd.stage)
        state = RoundState.model_validate(rnd.state)
        if stage is Stage.CLUSTERING and not self._may_decode():
            return DECODE_DUE
        if stage is Stage.CLUSTERING:
            results = store.results_of(
                session, rnd.id, Stage.DISTANCES, state.responders[Stage.DISTANCES.value]
            )
            accuracy = store.reported_accuracy(session, rnd.federation_id, rnd.number)
            salt = probe_salt_of(rnd.federation_id, rnd.number, state)
            return self._timed(
                Stage.DISTANCES,
                lambda: run_clustering(
                    state,
                    config,
                    results,
                    federation_id=rnd.federation_id,
                    number=rnd.number,
                    salt=salt,
                    accuracy=accuracy,
                ),
            )
        if stage not in UPLOAD_STAGES:
            return None
        if stage is Stage.SHARING:
            expected = state.active()
            received = store.sharers(session, rnd.id, recipient=state.share_recipients()[0])
        else:
            expected = state.computers()
            received = _result_senders(session, rnd.id, stage)
        params = config.crypto_params()
        threshold = stage_threshold(stage, params, clustering_round=state.clustering)
        assert rnd.deadline is not None
        deadline = effective_deadline(rnd.deadline, self.resumed_at, self.grace_s)
        if stage is Stage.SHARING and state.committee is not None:
            decision = committee_sharing_decision(
                state, params, frozenset(expected), frozenset(received), deadline, now
            )
        else:
            progress = StageProgress(
                stage, frozenset(expected), frozenset(received), threshold, deadline
            )
            decision = decide(progress, now)
        if decision.action == "wait":
            return None
        if decision.action == "fail":
            dropped = state.with_dropped(decision.dropped, stage)
            return fail(dropped, decision.reason, dropped=sorted(decision.dropped))
        answered = set(received) & set(expected)
        if stage is Stage.SHARING:
            return close_sharing(
                state,
                config,
                answered,
                set(decision.dropped),
                salt=probe_salt_of(rnd.federation_id, rnd.number, state),
            )
        state = close_stage(stage, state, answered, set(decision.dropped))
        detail = {"responders": sorted(answered), "dropped": sorted(decision.dropped)}
        if stage is Stage.DISTANCES:
            return Outcome(Stage.CLUSTERING, state, detail)
        if not self._may_decode():
            return DECODE_DUE
        results = store.results_of(session, rnd.id, Stage.AGGREGATION, sorted(answered))
        prompts = store.generation_prompts(
            session, rnd.federation_id, state.generation, config.aggregation_length
        )
        outcome: Outcome = self._timed(
            Stage.AGGREGATION,
            lambda: publish(
                state,
                config,
                federation_id=rnd.federation_id,
                number=rnd.number,
                results=results,
                prompts=prompts,
                rng=self.rng(),
            ),
        )
        return Outcome(
            outcome.stage,
            outcome.state,
            {**detail, **outcome.detail},
            outcome.reason,
            outcome.clusters,
            outcome.ledger,
        )

    def _may_decode(self) -> bool:
        return bool(getattr(self._decodes, "allowed", self.jobs is None))

    def _timed(self, stage: Stage, fn: Callable[..., Outcome], *args: Any) -> Outcome:
        start = time.perf_counter()
        outcome = fn(*args)
        self._decodes.timings.append((stage.value, time.perf_counter() - start))
        return outcome

    # -- applying (one transaction) ------------------------------------------------
    def _apply(
        self,
        session: Session,
        rnd: Round,
        config: FederationConfig,
        outcome: Outcome,
        now: datetime,
    ) -> bool:
        current = Stage(rnd.stage)
        if not is_valid_transition(current, outcome.stage):
            raise RuntimeError(f"invalid transition {current} -> {outcome.stage}")
        terminal = outcome.stage in TERMINAL
        ok = store.compare_and_set(
            session,
            rnd,
            stage=outcome.stage,
            now=now,
            state=outcome.state.model_dump(mode="json"),
            deadline=stage_deadline(config, outcome.stage, now),
            finished_at=now if terminal else None,
            failure_reason=outcome.reason,
        )
        if not ok:
            return False
        store.append_event(
            session,
            rnd.id,
            version=rnd.version + 1,
            kind="transition",
            now=now,
            detail=outcome.detail,
            from_stage=current.value,
            to_stage=outcome.stage.value,
        )
        if outcome.clusters:
            store.write_clusters(session, rnd.federation_id, rnd.number, outcome.clusters, now)
        if outcome.ledger:
            store.write_ledger(session, outcome.ledger, now)
        return True

    def _count(self, old_stage: str, outcome: Outcome) -> None:
        self.metrics.inc("secfpp_transitions_total", to=outcome.stage.value)
        dropped = outcome.detail.get("dropped") or []
        if dropped:
            self.metrics.inc("secfpp_dropouts_total", float(len(dropped)), stage=old_stage)
