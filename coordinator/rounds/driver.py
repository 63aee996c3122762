"""The round driver: applies the stage machine's decisions, one transaction each.

:meth:`RoundDriver.drive` loads a round, asks :func:`~coordinator.rounds.machine.decide`
(upload stages) or runs the clustering decode (``clustering``), computes the transition
with :mod:`coordinator.rounds.protocol`, and writes it with a compare-and-set on
``(stage, version)`` together with its event row and any cluster-prompt and ledger rows.
If another worker (or an upload) got there first the write changes nothing and the
driver starts over from the fresh row. It is called after every upload, by every
request that reads a round (lazy deadline check) and by the lifespan's background task.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from coordinator.config import FederationConfig
from coordinator.db.models import Federation, Round
from coordinator.metrics import Metrics
from coordinator.rounds import store
from coordinator.rounds.machine import (
    TERMINAL,
    UPLOAD_STAGES,
    Stage,
    StageProgress,
    decide,
    is_valid_transition,
    stage_threshold,
)
from coordinator.rounds.protocol import (
    Outcome,
    close_sharing,
    close_stage,
    fail,
    publish,
    run_clustering,
)
from coordinator.rounds.state import RoundState
from crypto.rng import RandomSource, SystemRandom

__all__ = ["Clock", "RoundDriver", "stage_deadline"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
MAX_ATTEMPTS = 64


def stage_deadline(config: FederationConfig, stage: Stage, now: datetime) -> datetime | None:
    """When an upload stage entered at ``now`` closes; None for the other stages."""
    seconds = {
        Stage.SHARING: config.deadlines.sharing_s,
        Stage.DISTANCES: config.deadlines.distances_s,
        Stage.AGGREGATION: config.deadlines.aggregation_s,
    }.get(stage)
    return None if seconds is None else now + timedelta(seconds=seconds)


class RoundDriver:
    """Advances rounds; safe to run in several threads and processes at once."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        metrics: Metrics,
        rng: Callable[[], RandomSource] = SystemRandom,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.metrics = metrics
        self.rng = rng
        # Decode timings of the transition being planned in this thread; observed only
        # when that transition is applied (a plan that loses the compare-and-set to
        # another thread or process is not counted twice).
        self._decodes = threading.local()

    def drive_all(self) -> None:
        """One pass over every round that is not finished (the background task)."""
        with self.sessions() as session:
            ids = store.active_round_ids(session)
        for round_id in ids:
            try:
                self.drive(round_id)
            except Exception:  # keep the loop alive; the next tick retries
                log.exception("driving round %s failed", round_id)

    def drive(self, round_id: str, *, max_steps: int | None = None) -> None:
        """Make every transition that is due now (at most ``max_steps``)."""
        steps = 0
        for _ in range(MAX_ATTEMPTS):
            if max_steps is not None and steps >= max_steps:
                return
            with self.sessions() as session:
                rnd = session.get(Round, round_id)
                if rnd is None or Stage(rnd.stage) in TERMINAL:
                    return
                federation = session.get(Federation, rnd.federation_id)
                assert federation is not None
                config = FederationConfig.model_validate(federation.config)
                now = self.clock()
                self._decodes.timings = []
                outcome = self._plan(session, rnd, config, now)
                if outcome is None:
                    return
                if self._apply(session, rnd, config, outcome, now):
                    session.commit()
                    steps += 1
                    self._count(rnd.stage, outcome)
                    for stage, seconds in self._decodes.timings:
                        self.metrics.observe("secfpp_decode_seconds", seconds, stage=stage)
                else:
                    session.rollback()
        log.warning("round %s: gave up after %d contended attempts", round_id, MAX_ATTEMPTS)

    # -- planning (reads only) -----------------------------------------------------
    def _plan(
        self, session: Session, rnd: Round, config: FederationConfig, now: datetime
    ) -> Outcome | None:
        stage = Stage(rnd.stage)
        state = RoundState.model_validate(rnd.state)
        if stage is Stage.CLUSTERING:
            results = store.results_of(
                session, rnd.id, Stage.DISTANCES, state.responders[Stage.DISTANCES.value]
            )
            return self._timed(Stage.DISTANCES, run_clustering, state, config, results)
        if stage not in UPLOAD_STAGES:
            return None
        if stage is Stage.SHARING:
            expected = state.active()
            received = store.sharers(session, rnd.id)
        else:
            expected = state.still_present()
            received = set(store.results_of(session, rnd.id, stage))
        threshold = stage_threshold(
            stage, config.crypto_params(), clustering_round=state.clustering
        )
        assert rnd.deadline is not None
        progress = StageProgress(
            stage, frozenset(expected), frozenset(received), threshold, rnd.deadline
        )
        decision = decide(progress, now)
        if decision.action == "wait":
            return None
        if decision.action == "fail":
            dropped = state.with_dropped(decision.dropped, stage)
            return fail(dropped, decision.reason, dropped=sorted(decision.dropped))
        answered = set(received) & set(expected)
        if stage is Stage.SHARING:
            return close_sharing(state, config, answered, set(decision.dropped))
        state = close_stage(stage, state, answered, set(decision.dropped))
        detail = {"responders": sorted(answered), "dropped": sorted(decision.dropped)}
        if stage is Stage.DISTANCES:
            return Outcome(Stage.CLUSTERING, state, detail)
        results = store.results_of(session, rnd.id, Stage.AGGREGATION, sorted(answered))
        prompts = store.generation_prompts(
            session, rnd.federation_id, state.generation, config.prompt.size
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
