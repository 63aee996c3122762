"""Database access of the round driver: reads, and the compare-and-set writes.

Every write to a round goes through :func:`compare_and_set` (a transition) or
:func:`bump_version` (an accepted upload): both are one ``UPDATE rounds ... WHERE
id = :id AND stage = :stage [AND version = :version]``, so an upload can never land
in a stage that has already closed, and a transition computed from stale data (an
upload arrived meanwhile, or another worker moved first) changes nothing and is
recomputed. The caller commits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import CursorResult, Result, func, select, update
from sqlalchemy.orm import Session, defer

from secfpp.coordinator.db.models import (
    ClusterPrompt,
    CodedResult,
    ParticipantMetric,
    PrivacyLedgerEntry,
    Round,
    RoundEvent,
    ShareEnvelope,
)
from secfpp.coordinator.rounds.machine import TERMINAL, Stage
from secfpp.coordinator.rounds.prompts import decode_prompt, encode_prompt
from secfpp.coordinator.rounds.protocol import ClusterRow
from secfpp.crypto.dp import LedgerRecord

__all__ = [
    "active_round_ids",
    "active_round_versions",
    "append_event",
    "bump_version",
    "compare_and_set",
    "current_round",
    "generation_prompts",
    "ledger_records",
    "reported_accuracy",
    "results_of",
    "sharers",
    "write_clusters",
    "write_ledger",
]


def rowcount(result: Result[Any]) -> int:
    """Rows matched by an UPDATE (``Session.execute`` is typed as returning ``Result``)."""
    return int(cast(CursorResult[Any], result).rowcount)


def current_round(session: Session, federation_id: str) -> Round | None:
    """The federation's newest round (any stage)."""
    return session.scalars(
        select(Round)
        .where(Round.federation_id == federation_id)
        .order_by(Round.number.desc())
        .limit(1)
    ).first()


def current_round_head(session: Session, federation_id: str) -> Round | None:
    """:func:`current_round` without its ``state`` column (JSON that grows with N), which
    raises if touched: read it through :func:`coordinator.rounds.views.round_state`."""
    return session.scalars(
        select(Round)
        .options(defer(Round.state, raiseload=True))
        .where(Round.federation_id == federation_id)
        .order_by(Round.number.desc())
        .limit(1)
    ).first()


def latest_published(session: Session, federation_id: str) -> Round | None:
    return session.scalars(
        select(Round)
        .where(Round.federation_id == federation_id, Round.stage == Stage.PUBLISHED.value)
        .order_by(Round.number.desc())
    ).first()


def count_published(session: Session, federation_id: str) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Round)
            .where(Round.federation_id == federation_id, Round.stage == Stage.PUBLISHED.value)
        )
        or 0
    )


def active_round_ids(session: Session) -> list[str]:
    """Ids of every round not in a terminal stage."""
    terminal = [s.value for s in TERMINAL]
    return list(session.scalars(select(Round.id).where(Round.stage.not_in(terminal))))


def active_round_versions(session: Session) -> list[tuple[str, int]]:
    """``(id, version)`` of every round not in a terminal stage."""
    terminal = [s.value for s in TERMINAL]
    rows = session.execute(select(Round.id, Round.version).where(Round.stage.not_in(terminal)))
    return [(str(i), int(v)) for i, v in rows]


def compare_and_set(
    session: Session, rnd: Round, *, stage: Stage, now: datetime, **values: Any
) -> bool:
    """Move ``rnd`` from its loaded ``(stage, version)`` to ``stage``; False if it moved."""
    result = session.execute(
        update(Round)
        .where(Round.id == rnd.id, Round.stage == rnd.stage, Round.version == rnd.version)
        .values(stage=stage.value, version=rnd.version + 1, stage_started_at=now, **values)
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def bump_version(session: Session, round_id: str, stage: Stage, **values: Any) -> int | None:
    """Record an accepted upload: ``version + 1`` if still in ``stage``; the new version."""
    result = session.execute(
        update(Round)
        .where(Round.id == round_id, Round.stage == stage.value)
        .values(version=Round.version + 1, **values)
        .returning(Round.version)
        .execution_options(synchronize_session=False)
    )
    return result.scalar()


def append_event(
    session: Session,
    round_id: str,
    *,
    version: int,
    kind: str,
    now: datetime,
    detail: dict[str, Any],
    from_stage: str | None = None,
    to_stage: str | None = None,
) -> None:
    session.add(
        RoundEvent(
            round_id=round_id,
            version=version,
            kind=kind,
            from_stage=from_stage,
            to_stage=to_stage,
            detail=detail,
            created_at=now,
        )
    )


def sharers(session: Session, round_id: str, recipient: int | None = None) -> set[int]:
    """Participants whose share upload was accepted.

    Uploads are all-or-nothing and each holds an envelope for every recipient of the
    round (:func:`~coordinator.rounds.uploads.accept_shares` refuses one that misses a
    recipient), so the senders of the envelopes addressed to any one ``recipient`` of
    the round are all the sharers: given one, only its ``2 N`` rows are read (the inbox
    index) instead of the round's ``2 N m`` (at N = 1,000 with a committee of 81, 2,000
    rows instead of 162,000: about 1 ms of the server's time instead of 80 ms, on every
    pass of the driver while shares arrive).
    """
    query = select(ShareEnvelope.sender).where(ShareEnvelope.round_id == round_id)
    if recipient is not None:
        query = query.where(ShareEnvelope.recipient == recipient)
    return set(session.scalars(query.distinct()))


def results_of(
    session: Session, round_id: str, stage: Stage, only: list[int] | None = None
) -> dict[int, bytes]:
    """Stored result payloads of ``stage``, by participant (restricted to ``only``)."""
    rows = session.execute(
        select(CodedResult.participant, CodedResult.payload).where(
            CodedResult.round_id == round_id, CodedResult.stage == stage.value
        )
    )
    wanted = None if only is None else set(only)
    return {int(p): bytes(b) for p, b in rows if wanted is None or p in wanted}


def generation_prompts(
    session: Session, federation_id: str, generation: int, size: int
) -> dict[int, NDArray[np.float64]]:
    rows = session.scalars(
        select(ClusterPrompt).where(
            ClusterPrompt.federation_id == federation_id, ClusterPrompt.generation == generation
        )
    )
    return {r.cluster_id: decode_prompt(r.prompt, size) for r in rows}


def write_clusters(
    session: Session,
    federation_id: str,
    generation: int,
    rows: tuple[ClusterRow, ...] | list[ClusterRow],
    now: datetime,
) -> None:
    for row in rows:
        session.add(
            ClusterPrompt(
                federation_id=federation_id,
                generation=generation,
                cluster_id=row.cluster_id,
                members=list(row.members),
                prompt=encode_prompt(row.prompt),
                created_at=now,
            )
        )


def ledger_records(session: Session, federation_id: str) -> list[LedgerRecord]:
    rows = session.scalars(
        select(PrivacyLedgerEntry.record).where(PrivacyLedgerEntry.federation_id == federation_id)
    )
    return [LedgerRecord.from_dict(r) for r in rows]


def write_ledger(session: Session, records: tuple[LedgerRecord, ...], now: datetime) -> None:
    for record in records:
        session.add(
            PrivacyLedgerEntry(
                federation_id=record.federation_id,
                round_number=record.round,
                cluster_id=record.cluster_id if record.cluster_id is not None else -1,
                mechanism=record.mechanism,
                sigma=record.sigma,
                record=record.to_dict(),
                created_at=now,
            )
        )


def cas_state(session: Session, rnd: Round, state: dict[str, Any]) -> bool:
    """Replace the state of ``rnd`` without changing its stage (compare-and-set)."""
    result = session.execute(
        update(Round)
        .where(Round.id == rnd.id, Round.stage == rnd.stage, Round.version == rnd.version)
        .values(version=rnd.version + 1, state=state)
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def reported_accuracy(
    session: Session, federation_id: str, before: int
) -> dict[int, dict[int, float]]:
    """Round number -> participant index -> the ``accuracy`` metric participants reported
    for the federation's rounds before ``before`` (the split review's input,
    :mod:`crypto.split_review`)."""
    rows = session.execute(
        select(Round.number, ParticipantMetric.participant, ParticipantMetric.value)
        .join(Round, Round.id == ParticipantMetric.round_id)
        .where(
            Round.federation_id == federation_id,
            Round.number < before,
            ParticipantMetric.name == "accuracy",
        )
    )
    out: dict[int, dict[int, float]] = {}
    for number, index, value in rows:
        out.setdefault(int(number), {})[int(index)] = float(value)
    return out
