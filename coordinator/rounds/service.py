"""Admin operations on rounds: start the next one, abort one.

Starting a round is one transaction: insert the round (``sharing``, version 1) and its
``started`` event; ``(federation_id, number)`` is unique, so two concurrent starts
cannot both succeed. The round trains under the membership and global prompts the
newest published round produced (generation 0 and everybody in cluster 0 before the
first one). Warmup counts published rounds, so a failed round does not use it up.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import Federation, Participant, Round
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import (
    beacons,
    contributions,
    history,
    lifecycle,
    rerandomization,
    store,
)
from secfpp.coordinator.rounds.driver import stage_deadline
from secfpp.coordinator.rounds.machine import TERMINAL, Stage
from secfpp.coordinator.rounds.prompts import initial_prompt
from secfpp.coordinator.rounds.protocol import ClusterRow, planned_releases
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.clustering import Membership
from secfpp.crypto.committee import round_committee
from secfpp.crypto.dp import check_budget
from secfpp.crypto.errors import PrivacyBudgetError
from secfpp.federation import FederationConfig

__all__ = ["abort_round", "get_round", "start_round"]


def get_round(session: Session, federation_id: str, number: int) -> Round:
    rnd = session.scalars(
        select(Round).where(Round.federation_id == federation_id, Round.number == number)
    ).first()
    if rnd is None:
        raise ProblemError("round_not_found", f"federation has no round {number}")
    return rnd


def start_round(session: Session, federation: Federation, now: datetime) -> Round:
    """Create the federation's next round in stage ``sharing``.

    Two concurrent starts: one creates the round, the other gets ``round_in_progress``
    (PostgreSQL: the unique ``(federation_id, number)``; SQLite: the loser's write is
    refused as busy, and its retry reads the round the winner created).
    """
    retries = 0
    while True:
        try:
            return _start_once(session, federation, now)
        except ProblemError as err:
            # The last round was the last one, or the ledger cannot afford another: the
            # federation has finished (lifecycle.py); the refusal still answers 409.
            ending = _ENDINGS.get(err.code)
            session.rollback()
            if ending is not None and lifecycle.end(session, federation.id, ending, now):
                session.commit()
            raise
        except IntegrityError:
            # PostgreSQL: the other start committed round ``number`` (or generation 0's
            # prompts) first; the unique keys refuse the second.
            session.rollback()
            raise ProblemError(
                "round_in_progress", "another round was started concurrently"
            ) from None
        except OperationalError as err:
            session.rollback()
            retries += 1
            if retries > _START_RETRIES or not _sqlite_busy(err):
                raise


_START_RETRIES = 2
_ENDINGS = {
    "rounds_exhausted": lifecycle.ROUNDS_DONE,
    "privacy_budget_exceeded": lifecycle.BUDGET_SPENT,
}


def _start_once(session: Session, federation: Federation, now: datetime) -> Round:
    config = FederationConfig.model_validate(federation.config)
    lifecycle.require_startable(session, federation)
    last = store.current_round(session, federation.id)
    if last is not None and Stage(last.stage) not in TERMINAL:
        raise ProblemError(
            "round_in_progress", f"round {last.number} is still in stage {last.stage}"
        )
    number = 1 if last is None else last.number + 1
    if config.rounds.total is not None and number > config.rounds.total:
        raise ProblemError(
            "rounds_exhausted", f"the federation is configured for {config.rounds.total} rounds"
        )
    enrolled = list(
        session.execute(
            select(Participant.lcc_index, Participant.revoked_at).where(
                Participant.federation_id == federation.id
            )
        )
    )
    if len(enrolled) < config.n_participants:
        raise ProblemError(
            "enrollment_incomplete",
            f"{len(enrolled)} of {config.n_participants} participants have enrolled",
        )
    # A revoked participant keeps its slot (and index) but takes part in no new round.
    indices = sorted(index for index, revoked_at in enrolled if revoked_at is None)
    published = store.latest_published(session, federation.id)
    if published is None:
        membership, generation = Membership.initial(indices), 0
        if not store.generation_prompts(session, federation.id, 0, config.aggregation_length):
            first = (  # protopfl: no prototypes yet (all class weights 0)
                initial_prompt(config)
                if config.prototypes is None
                else np.zeros(config.aggregation_length)
            )
            store.write_clusters(
                session,
                federation.id,
                0,
                [ClusterRow(0, tuple(indices), first)],
                now,
            )
    else:
        done = RoundState.model_validate(published.state)
        assert done.next_membership is not None
        membership, generation = Membership.from_dict(done.next_membership), published.number
    excluded: set[int] = set()  # convicted by an earlier round's offset check
    if last is not None:
        previous = RoundState.model_validate(last.state)
        excluded = set(previous.distance_excluded) | set(previous.offset_failures)
    warm = store.count_published(session, federation.id) < config.rounds.warmup_rounds
    draw = _draw(session, config, federation.id, number, indices, now)
    clustering = config.clustered and not warm
    distance_excluded = sorted(excluded & set(indices))
    state = RoundState(
        membership=membership.to_dict(),
        generation=generation,
        clustering=clustering,
        participants=indices,
        zero_contributors=rerandomization.designate(
            config.crypto_params(),
            number,
            indices,
            distance_excluded,
            federation_id=federation.id if draw.committee is not None else None,
            beacon=draw.beacon if draw.committee is not None else None,
        )
        if clustering
        and config.crypto.rerandomize_distances
        and config.dp.distance_noise_multiplier is None
        else None,
        distance_excluded=distance_excluded,
        committee=draw.committee,
        beacon=draw.beacon,
        coordinator_beacon=draw.coordinator_beacon,
        contributions=draw.contributions,
        next_commitment=draw.next_commitment,
        next_contributions=draw.next_contributions,
    )
    if config.dp.epsilon_budget is not None:
        try:
            check_budget(
                store.ledger_records(session, federation.id),
                planned_releases(config, federation.id, number, state),
                epsilon_budget=config.dp.epsilon_budget,
                delta=config.dp.delta,
            )
        except PrivacyBudgetError as err:
            history.record_ledger_refusal(session, federation.id, number, str(err), now)
            raise ProblemError("privacy_budget_exceeded", str(err)) from None
    rnd = Round(
        id=str(uuid.uuid4()),
        federation_id=federation.id,
        number=number,
        stage=Stage.SHARING.value,
        version=1,
        stage_started_at=now,
        deadline=stage_deadline(config, Stage.SHARING, now),
        started_at=now,
        state=state.model_dump(mode="json"),
    )
    session.add(rnd)
    session.flush()
    detail: dict[str, object] = {"generation": generation, "clustering": state.clustering}
    if state.committee is not None:
        detail.update(draw.detail())
    store.append_event(
        session,
        rnd.id,
        version=1,
        kind="started",
        now=now,
        detail=detail,
        to_stage=Stage.SHARING.value,
    )
    session.commit()
    return rnd


@dataclass(frozen=True)
class _Draw:
    """A round's draw (:func:`_draw`): committee, beacon and contributions of a committee
    round; only the beacon (for probes) of an all-to-all clustered one; else all None."""

    committee: list[int] | None = None
    beacon: str | None = None
    coordinator_beacon: str | None = None
    committed: bool = False
    contributions: list[dict[str, Any]] | None = None
    next_commitment: str | None = None
    next_contributions: str | None = None

    def detail(self) -> dict[str, object]:
        """What the ``started`` event records of the draw."""
        left_out = {
            str(c["index"]): c["reason"] for c in self.contributions or [] if c["value"] is None
        }
        return {
            "committee": self.committee,
            "beacon": self.beacon,
            "coordinator_beacon": self.coordinator_beacon,
            "beacon_committed": self.committed,
            "contributions": sorted(
                c["index"] for c in self.contributions or [] if c["value"] is not None
            ),
            "contributions_left_out": left_out,
            "next_commitment": self.next_commitment,
        }


def _draw(
    session: Session,
    config: FederationConfig,
    federation_id: str,
    number: int,
    roster: list[int],
    now: datetime,
) -> _Draw:
    """A committee round's committee, beacon and the next round's commitments
    (docs/protocol.md section 11).

    The coordinator's beacon was drawn ahead (:mod:`coordinator.rounds.beacons`) when
    the federation was created or the previous round started; only a federation older
    than that mechanism draws it here (``committed`` False). In a committee round it is
    combined with the participants' revealed contributions
    (:mod:`coordinator.rounds.contributions`), and the commitments to the next round's
    contributions are frozen, in this transaction (under the federation's lock). An
    all-to-all federation that clusters draws its beacons the same way (no committee, no
    contributions): they salt its probes (:mod:`coordinator.rounds.probes`). Other
    all-to-all federations get an empty :class:`_Draw`.
    """
    size = config.crypto.committee_size
    committee_round = size is not None and beacons.uses_committee(config)
    if not roster or not (committee_round or beacons.draws_probes(config)):
        return _Draw()
    contributions.lock_federation(session, federation_id)
    earlier = beacons.drawn(session, federation_id, number)
    own = (
        earlier if earlier is not None else beacons.draw_ahead(session, federation_id, number, now)
    )
    if committee_round:
        assert size is not None
        beacon, parts = contributions.collect(session, federation_id, number, own)
        committee: list[int] | None = list(
            round_committee(federation_id, number, roster, beacon, size)
        )
    else:
        beacon, parts, committee = own, [], None
    following = number + 1
    next_commitment = next_digest = None
    if config.rounds.total is None or following <= config.rounds.total:
        upcoming = beacons.draw_ahead(session, federation_id, following, now)
        next_commitment = beacons.commitment_hex(federation_id, following, upcoming)
        if committee_round:
            next_digest = contributions.frozen_digest(session, federation_id, following)
    return _Draw(
        committee=committee,
        beacon=beacon.hex(),
        coordinator_beacon=own.hex() if committee_round else None,
        committed=earlier is not None,
        contributions=[
            {
                "index": c.index,
                "commitment": c.commitment.hex(),
                "value": None if c.value is None else c.value.hex(),
                "reason": c.reason,
            }
            for c in parts
        ]
        if committee_round
        else None,
        next_commitment=next_commitment,
        next_contributions=next_digest,
    )


def _sqlite_busy(err: OperationalError) -> bool:
    """SQLite refused the write: another writer committed after this transaction read
    (``SQLITE_BUSY_SNAPSHOT``) or held the lock past the busy timeout."""
    return "database is locked" in str(err.orig)


def abort_round(
    session: Session, federation_id: str, number: int, reason: str, now: datetime
) -> Round:
    """Move a running round to ``aborted`` (compare-and-set; retried on contention)."""
    for _ in range(16):
        rnd = get_round(session, federation_id, number)
        session.refresh(rnd)
        if Stage(rnd.stage) in TERMINAL:
            raise ProblemError("round_finished", f"round {number} is already {rnd.stage}")
        previous = rnd.stage
        if store.compare_and_set(
            session,
            rnd,
            stage=Stage.ABORTED,
            now=now,
            deadline=None,
            finished_at=now,
            failure_reason=f"aborted: {reason}",
        ):
            store.append_event(
                session,
                rnd.id,
                version=rnd.version + 1,
                kind="aborted",
                now=now,
                detail={"reason": reason},
                from_stage=previous,
                to_stage=Stage.ABORTED.value,
            )
            session.commit()
            session.refresh(rnd)
            return rnd
        session.rollback()
    raise ProblemError("round_in_progress", "the round kept changing; retry the abort")
