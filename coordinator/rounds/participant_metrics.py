"""Metrics participants report about a round: numbers only (name -> value), never data.

A participant evaluates the published global prompt on its held-out data and reports,
e.g., ``{"accuracy": 0.81}`` for round ``n``. The metrics are not protocol state: they
do not touch the round row (no version bump, no stage check), so they may arrive in any
stage, typically after publication, and several times.

Reports are idempotent per ``(round, participant, name)``: a name already stored with
the same value is acknowledged and changes nothing; a different value for a stored name
is ``conflicting_upload`` and the whole request changes nothing. A request may mix
stored and new names; the new ones are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import Participant, ParticipantMetric, Round
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds.service import get_round
from secfpp.wire.messages import FederationMetrics, MetricsReceipt, RoundMetrics

__all__ = ["federation_metrics", "metric_values", "record_metrics", "round_metrics"]

Table = dict[str, dict[str, float]]
"""Participant index (as a string, like every index-keyed map of the API) -> name -> value."""


def _stored(session: Session, round_id: str, index: int) -> dict[str, float]:
    rows = session.execute(
        select(ParticipantMetric.name, ParticipantMetric.value).where(
            ParticipantMetric.round_id == round_id, ParticipantMetric.participant == index
        )
    )
    return {name: float(value) for name, value in rows}


def record_metrics(
    session: Session,
    participant: Participant,
    number: int,
    values: Mapping[str, float],
    now: datetime,
) -> MetricsReceipt:
    """Store ``values`` for round ``number`` of the participant's federation.

    ``values`` were validated by :class:`~secfpp.wire.messages.MetricsUpload` (names,
    finite numbers, at most 16). Raises ``round_not_found`` when the federation has no
    such round and ``conflicting_upload`` when a name is stored with another value.
    """
    rnd = get_round(session, participant.federation_id, number)
    me = participant.lcc_index
    for _ in range(2):
        stored = _stored(session, rnd.id, me)
        conflicts = sorted(n for n, v in values.items() if n in stored and stored[n] != v)
        if conflicts:
            raise ProblemError(
                "conflicting_upload",
                f"participant {me} already reported other values for {conflicts} in round {number}",
                names=conflicts,
            )
        new = {n: float(v) for n, v in values.items() if n not in stored}
        if not new:
            return MetricsReceipt(
                round=number, participant_index=me, accepted=0, replayed=True, metrics=stored
            )
        session.add_all(
            ParticipantMetric(round_id=rnd.id, participant=me, name=n, value=v, created_at=now)
            for n, v in sorted(new.items())
        )
        try:
            session.commit()
        except IntegrityError:  # the same name raced in: compare with it
            session.rollback()
            continue
        return MetricsReceipt(
            round=number,
            participant_index=me,
            accepted=len(new),
            replayed=False,
            metrics={**stored, **new},
        )
    raise ProblemError("conflicting_upload", "concurrent reports of the same metric")


def round_metrics(session: Session, round_id: str) -> Table:
    """Every metric reported for one round."""
    rows = session.execute(
        select(ParticipantMetric.participant, ParticipantMetric.name, ParticipantMetric.value)
        .where(ParticipantMetric.round_id == round_id)
        .order_by(ParticipantMetric.participant, ParticipantMetric.name)
    )
    table: Table = {}
    for index, name, value in rows:
        table.setdefault(str(index), {})[name] = float(value)
    return table


def federation_metrics(session: Session, federation_id: str) -> FederationMetrics:
    """Every round of the federation (oldest first) with the metrics reported for it."""
    rounds = session.execute(
        select(Round.id, Round.number, Round.stage)
        .where(Round.federation_id == federation_id)
        .order_by(Round.number)
    ).all()
    rows = session.execute(
        select(
            ParticipantMetric.round_id,
            ParticipantMetric.participant,
            ParticipantMetric.name,
            ParticipantMetric.value,
        )
        .join(Round, Round.id == ParticipantMetric.round_id)
        .where(Round.federation_id == federation_id)
        .order_by(ParticipantMetric.participant, ParticipantMetric.name)
    )
    tables: dict[str, Table] = {}
    for round_id, index, name, value in rows:
        tables.setdefault(round_id, {}).setdefault(str(index), {})[name] = float(value)
    return FederationMetrics(
        federation_id=federation_id,
        rounds=[
            RoundMetrics(number=number, stage=stage, metrics=tables.get(round_id, {}))
            for round_id, number, stage in rounds
        ],
    )


def metric_values(session: Session, federation_id: str, name: str) -> list[tuple[int, int, float]]:
    """``(round number, participant index, value)`` of one metric over the federation's
    rounds, by round then participant (one query, no documents built)."""
    rows = session.execute(
        select(Round.number, ParticipantMetric.participant, ParticipantMetric.value)
        .join(Round, Round.id == ParticipantMetric.round_id)
        .where(Round.federation_id == federation_id, ParticipantMetric.name == name)
        .order_by(Round.number, ParticipantMetric.participant)
    )
    return [(int(n), int(i), float(v)) for n, i, v in rows]
